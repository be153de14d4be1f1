"""The library's NCCL_CAR_* variables, checked as plugin/config.cc checks them.

The library keeps its default when a value is bad (and says so in one WARN line), so the
tool refuses such values up front rather than let a typo silently change nothing."""

DEFAULT_MAX_BYTES = 8 << 20
LARGEST_MAX_BYTES = 1 << 30   # each rank allocates twice this per communicator
PACK_BYTES = 16
MAX_BLOCKS = 128
DEFAULT_PUSH_MAX_BYTES = 8 << 20
DEFAULT_COPY_IN_KERNEL_BYTES = 512 << 10
MAX_RANKS = 8
ALGORITHMS = ("auto", "1shot", "2shot", "1stage", "2stage")
DEBUG_LEVELS = ("WARN", "INFO", "TRACE")

# Read by the library itself.
LIBRARY_VARIABLES = ("NCCL_CAR_DISABLE", "NCCL_CAR_ALGO", "NCCL_CAR_MAX_BYTES",
                     "NCCL_CAR_MAX_BLOCKS", "NCCL_CAR_PUSH_MAX_BYTES", "NCCL_CAR_PDL",
                     "NCCL_CAR_COPY_IN_KERNEL_BYTES", "NCCL_CAR_DEBUG", "NCCL_CAR_NCCL_LIB")
# Read by this tool only: where libnccl-car.so is.
TOOL_VARIABLES = ("NCCL_CAR_LIB",)

_TRUE_WORDS = ("1", "true", "yes", "on")
_FALSE_WORDS = ("0", "false", "no", "off")


def max_bytes_problem(value):
    """None when the library accepts `value` as NCCL_CAR_MAX_BYTES, else why not."""
    if value < PACK_BYTES or value % PACK_BYTES != 0 or value > LARGEST_MAX_BYTES:
        return f"must be a multiple of 16 from 16 to {LARGEST_MAX_BYTES} (1G)"
    return None


def max_blocks_problem(value):
    if not 1 <= value <= MAX_BLOCKS:
        return f"expected 1 to {MAX_BLOCKS}"
    return None


def _unsigned(text):
    # The library wants digits only: no sign, no spaces, no suffix.
    return int(text) if text.isdigit() and text.isascii() else None


def effective_settings(env):
    """What the library would run with under `env`, plus one sentence per ignored value.

    Returns a dict: disable, algo, max_bytes, max_blocks, push_max_bytes, pdl,
    copy_in_kernel_bytes, debug, nccl_lib, problems."""
    settings = {"disable": False, "algo": "auto", "max_bytes": DEFAULT_MAX_BYTES,
                "max_blocks": MAX_BLOCKS, "push_max_bytes": DEFAULT_PUSH_MAX_BYTES, "pdl": True,
                "copy_in_kernel_bytes": DEFAULT_COPY_IN_KERNEL_BYTES,
                "debug": "WARN", "nccl_lib": None, "problems": []}

    def ignored(name, why, default):
        settings["problems"].append(
            f"{name}={env[name]!r} is ignored by the library ({why}); it uses {default}")

    text = env.get("NCCL_CAR_DISABLE")
    if text is not None:
        if text.lower() in _TRUE_WORDS:
            settings["disable"] = True
        elif text.lower() not in _FALSE_WORDS:
            ignored("NCCL_CAR_DISABLE", "expected 0 or 1", "0")

    text = env.get("NCCL_CAR_ALGO")
    if text is not None:
        if text.lower() in ALGORITHMS:
            settings["algo"] = text.lower()
        else:
            ignored("NCCL_CAR_ALGO", "expected auto, 1shot, 2shot, 1stage or 2stage", "auto")

    text = env.get("NCCL_CAR_MAX_BYTES")
    if text is not None:
        value = _unsigned(text)
        if value is None:
            ignored("NCCL_CAR_MAX_BYTES", "not a whole number of bytes", DEFAULT_MAX_BYTES)
        elif max_bytes_problem(value):
            ignored("NCCL_CAR_MAX_BYTES", max_bytes_problem(value), DEFAULT_MAX_BYTES)
        else:
            settings["max_bytes"] = value

    text = env.get("NCCL_CAR_MAX_BLOCKS")
    if text is not None:
        value = _unsigned(text)
        if value is None or max_blocks_problem(value):
            ignored("NCCL_CAR_MAX_BLOCKS", f"expected 1 to {MAX_BLOCKS}", MAX_BLOCKS)
        else:
            settings["max_blocks"] = value

    text = env.get("NCCL_CAR_PUSH_MAX_BYTES")
    if text is not None:
        value = _unsigned(text)
        if value is None or value % PACK_BYTES != 0 or value > LARGEST_MAX_BYTES:
            ignored("NCCL_CAR_PUSH_MAX_BYTES", f"must be 0 or a multiple of 16 up to {LARGEST_MAX_BYTES}",
                    DEFAULT_PUSH_MAX_BYTES)
        else:
            settings["push_max_bytes"] = value

    text = env.get("NCCL_CAR_PDL")
    if text is not None:
        if text.lower() in _TRUE_WORDS + _FALSE_WORDS:
            settings["pdl"] = text.lower() in _TRUE_WORDS
        else:
            ignored("NCCL_CAR_PDL", "expected 0 or 1", "1")

    text = env.get("NCCL_CAR_COPY_IN_KERNEL_BYTES")
    if text is not None:
        value = _unsigned(text)
        if value is None or value > LARGEST_MAX_BYTES:
            ignored("NCCL_CAR_COPY_IN_KERNEL_BYTES",
                    f"expected a whole number of bytes from 0 to {LARGEST_MAX_BYTES}",
                    DEFAULT_COPY_IN_KERNEL_BYTES)
        else:
            settings["copy_in_kernel_bytes"] = value

    text = env.get("NCCL_CAR_DEBUG")
    if text is not None:
        if text.upper() in DEBUG_LEVELS:
            settings["debug"] = text.upper()
        else:
            ignored("NCCL_CAR_DEBUG", "expected WARN, INFO or TRACE", "WARN")

    text = env.get("NCCL_CAR_NCCL_LIB")
    if text is not None:
        if text:
            settings["nccl_lib"] = text
        else:
            ignored("NCCL_CAR_NCCL_LIB", "empty path", "its search")

    for name in sorted(env):
        if name.startswith("NCCL_CAR_") and name not in LIBRARY_VARIABLES + TOOL_VARIABLES:
            settings["problems"].append(f"{name} is not a variable nccl-car reads (a typo?)")
    return settings


def at_least_info(level):
    """The run summary is built from INFO lines: WARN (or nothing) becomes INFO."""
    return "TRACE" if level is not None and level.upper() == "TRACE" else "INFO"
