"""The configurations bench compares. NCCL runs in four set-ups and the fastest of them at
each size is the baseline ("NCCL's best"), since users choose NCCL's settings too; then
nccl-car, and variants of nccl-car for experiments. Each configuration says how its runs
differ: buffers registered as NCCL symmetric windows, and environment variables."""

from dataclasses import dataclass

from . import library_query, paths


@dataclass(frozen=True)
class Config:
    name: str
    symmetric: bool = False         # nccl-tests -R 2, car_nccl_bench --symmetric
    graph_mixing_off: bool = False  # NCCL_GRAPH_MIXING_SUPPORT=0: NCCL skips the bookkeeping that
                                    # lets eager and graph-captured calls mix on one communicator
    with_car: bool = False          # libnccl-car.so preloaded
    car_variables: tuple = ()       # (name, value) pairs for the library


NCCL_CONFIGS = (
    Config("nccl"),
    Config("nccl-R2", symmetric=True),
    Config("nccl-gm0", graph_mixing_off=True),
    Config("nccl-R2-gm0", symmetric=True, graph_mixing_off=True),
)
CAR = Config("car", with_car=True)
CAR_VARIANTS = (
    Config("car-pdl0", with_car=True, car_variables=(("NCCL_CAR_PDL", "0"),)),
    *(Config(f"car-{algo}", with_car=True, car_variables=(("NCCL_CAR_ALGO", algo),))
      for algo in ("1shot", "2shot", "1stage", "2stage")),
)
ALL_CONFIGS = NCCL_CONFIGS + (CAR,) + CAR_VARIANTS
NAMES = tuple(config.name for config in ALL_CONFIGS)
VARIANT_NAMES = tuple(config.name for config in CAR_VARIANTS)


def chosen(extra_names):
    """The four NCCL configurations and car always, then the variants named, in the fixed
    order of ALL_CONFIGS whatever the order of the names."""
    wanted = set(extra_names)
    return [config for config in ALL_CONFIGS if config in NCCL_CONFIGS + (CAR,) or config.name in wanted]


def by_name(name):
    return ALL_CONFIGS[NAMES.index(name)]


def variables(config, base_env, library):
    """What a run of `config` sets (a value) or removes (None) in the caller's environment.
    NCCL_GRAPH_MIXING_SUPPORT is the configuration's, not the caller's, so that "nccl" is
    NCCL's default whatever the shell exported. NCCL_CAR_* set by the caller reach the runs
    with the library; the NCCL-only runs lose the library from LD_PRELOAD."""
    preload = base_env.get("LD_PRELOAD")
    changes = {
        "LD_PRELOAD": (paths.preload_with(preload, library) if config.with_car
                       else paths.preload_without(preload, library)) or None,
        "NCCL_GRAPH_MIXING_SUPPORT": "0" if config.graph_mixing_off else None,
    }
    if config.with_car:
        # The log tally needs the library's INFO lines.
        changes["NCCL_CAR_DEBUG"] = library_query.at_least_info(base_env.get("NCCL_CAR_DEBUG"))
        changes.update(config.car_variables)
    return changes


def environment(base_env, changes):
    env = dict(base_env)
    for name, value in changes.items():
        if value is None:
            env.pop(name, None)
        else:
            env[name] = value
    return env
