"""The ways a user brings the library into a program (docs/design.md, "Three ways in"), as
one command line and environment each:

  preload       LD_PRELOAD=libnccl-car.so
  audit         LD_AUDIT=libnccl-car-audit.so
  dropin        a drop-in folder (nccl-car dropin) first on LD_LIBRARY_PATH
  tool-<mode>   nccl-car run --mode <mode> (preload, audit, dropin), or tool-auto: no --mode"""

from .tools_path import NCCL_CAR_TOOL

WAYS = ("preload", "audit", "dropin", "tool-preload", "tool-audit", "tool-dropin", "tool-auto")


def bring_in(context, way, argv, env):
    """(argv, env) of `argv` run in `env` with the build's library brought in by `way`."""
    build = context.build
    if way == "preload":
        return argv, dict(env, LD_PRELOAD=build.library)
    if way == "audit":
        return argv, dict(env, LD_AUDIT=build.audit_module)
    if way == "dropin":
        path = env.get("LD_LIBRARY_PATH")
        return argv, dict(env, LD_LIBRARY_PATH=":".join(part for part in (context.dropin_folder(), path) if part))
    if not way.startswith("tool-") or way[len("tool-"):] not in ("preload", "audit", "dropin", "auto"):
        raise ValueError(f"no way in named {way}")
    mode = way[len("tool-"):]
    tool = [context.machine.python, NCCL_CAR_TOOL, "run", "--lib", build.library]
    return tool + ([] if mode == "auto" else ["--mode", mode]) + ["--"] + argv, dict(env)
