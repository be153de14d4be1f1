"""Which way into a program reaches its NCCL calls:

  preload  LD_PRELOAD: programs linked against libnccl.so.2 (PyTorch, CuPy, nccl-tests, MPI
           programs). It does not reach a program that loads NCCL itself with dlopen and
           calls it through that handle.
  audit    LD_AUDIT=libnccl-car-audit.so: every load of NCCL gets the front (libnccl-car.so
           in front of the real NCCL), by name or by path (JAX/XLA, TensorFlow, XGBoost, ctypes
           bindings such as vLLM's PyNccl).
  dropin   a drop-in folder (dropin.py) first on LD_LIBRARY_PATH: loads by name only, for
           where LD_AUDIT cannot be used.

choose() reads the command (executables, Python scripts, `-m` modules) without running it;
an executable's file says whether it names libnccl in DT_NEEDED (linked: the loader loads
NCCL for it) or only as a string (the name it passes to dlopen). 64-bit little-endian ELF
only. environment_for() sets up a program's environment for the mode chosen."""

import mmap
import os
import re
import shutil
import struct

from . import paths

MODES = ("auto", "preload", "audit", "dropin")

# Python packages and how they get NCCL.
LOADS_NCCL_ITSELF = {"jax": "JAX", "jaxlib": "JAX", "tensorflow": "TensorFlow", "xgboost": "XGBoost",
                     "vllm": "vLLM", "sglang": "SGLang"}
LINKS_NCCL = {"torch": "PyTorch", "cupy": "CuPy"}

_IMPORT = re.compile(r"^\s*(?:from|import)\s+([A-Za-z_]\w*)", re.M)
_NCCL = re.compile(r"nccl", re.I)
_SCRIPT_BYTES = 1 << 20

# An executable's NCCL, read off its ELF file.
DT_NEEDED = 1
SHT_DYNAMIC = 6
_NCCL_FILE = b"libnccl.so"


def _sections(data):
    shoff, = struct.unpack_from("<Q", data, 0x28)
    shentsize, shnum = struct.unpack_from("<HH", data, 0x3A)
    for index in range(shnum):
        # sh_name, sh_type, sh_flags, sh_addr, sh_offset, sh_size, sh_link
        yield struct.unpack_from("<IIQQQQI", data, shoff + index * shentsize)


def _needed(data):
    sections = list(_sections(data))
    needed = []
    for _name, kind, _flags, _addr, offset, size, link in sections:
        if kind != SHT_DYNAMIC or link >= len(sections):
            continue
        strings = sections[link][4]
        for entry in range(offset, offset + size - 15, 16):
            tag, value = struct.unpack_from("<qQ", data, entry)
            if tag == 0:
                break
            if tag == DT_NEEDED:
                end = data.find(b"\0", strings + value)
                needed.append(data[strings + value:end].decode(errors="replace"))
    return needed


def needed_libraries(path):
    """The DT_NEEDED names of a 64-bit little-endian ELF file; [] for anything else."""
    try:
        with open(path, "rb") as stream:
            if stream.read(6) != b"\x7fELF\x02\x01":
                return []
            with mmap.mmap(stream.fileno(), 0, access=mmap.ACCESS_READ) as data:
                return _needed(data)
    except (OSError, ValueError, struct.error):
        return []


def nccl_use(path):
    """"links" (libnccl in DT_NEEDED), "loads" (names libnccl, but not in DT_NEEDED: it
    dlopens it), None (neither, or not a 64-bit little-endian ELF file)."""
    try:
        with open(path, "rb") as stream:
            if stream.read(6) != b"\x7fELF\x02\x01":
                return None
            with mmap.mmap(stream.fileno(), 0, access=mmap.ACCESS_READ) as data:
                if any(name.startswith(_NCCL_FILE.decode()) for name in _needed(data)):
                    return "links"
                return "loads" if data.find(_NCCL_FILE) >= 0 else None
    except (OSError, ValueError, struct.error):
        return None


def _python_findings(path):
    try:
        with open(path, errors="replace") as script:
            text = script.read(_SCRIPT_BYTES)
    except OSError:
        return []
    name = os.path.basename(path)
    findings = []
    modules = dict.fromkeys(_IMPORT.findall(text))
    for module in modules:
        if module in LOADS_NCCL_ITSELF:
            findings.append(("loads", f"{name} imports {module} ({LOADS_NCCL_ITSELF[module]} loads NCCL itself)"))
        elif module in LINKS_NCCL:
            findings.append(("links", f"{name} imports {module} ({LINKS_NCCL[module]} links NCCL)"))
    if "ctypes" in modules and _NCCL.search(text):
        findings.append(("loads", f"{name} uses ctypes and names NCCL (a ctypes binding loads NCCL itself)"))
    return findings


def _is_python_script(path):
    if path.endswith(".py"):
        return True
    try:
        with open(path, "rb") as stream:
            first = stream.readline(200)
    except OSError:
        return False
    return first.startswith(b"#!") and b"python" in first


def _file_findings(path):
    use = nccl_use(path)
    name = os.path.basename(path)
    if use == "links":
        return [("links", f"{name} links libnccl.so.2")]
    if use == "loads":
        return [("loads", f"{name} names libnccl.so but does not link it (it dlopens NCCL)")]
    return _python_findings(path) if _is_python_script(path) else []


def examine(command, which=shutil.which):
    """[(kind, why)] for the command's files and `-m` modules; kind is "loads" or "links"."""
    findings = []
    for index, word in enumerate(command):
        if index > 0 and command[index - 1] == "-m":
            top = word.split(".")[0]
            if top in LOADS_NCCL_ITSELF:
                findings.append(("loads", f"-m {word} ({LOADS_NCCL_ITSELF[top]} loads NCCL itself)"))
            elif top in LINKS_NCCL:
                findings.append(("links", f"-m {word} ({LINKS_NCCL[top]} links NCCL)"))
            continue
        path = word if os.sep in word or index > 0 else (which(word) or word)
        if os.path.isfile(path):
            findings.extend(_file_findings(path))
    return findings


def choose(command, which=shutil.which):
    """(mode, why) for `nccl-car run --mode auto`: audit as soon as something in the command
    loads NCCL itself, else preload (the proven way, and the only one that needs nothing
    of libnccl-car.so beyond the hooks)."""
    findings = examine(command, which)
    loads = [why for kind, why in findings if kind == "loads"]
    if loads:
        return "audit", loads[0]
    links = [why for kind, why in findings if kind == "links"]
    if links:
        return "preload", links[0]
    return "preload", "nothing in the command shows how it gets NCCL; LD_PRELOAD reaches programs linked against it"


def installed_packages(find_spec, version_of):
    """[(package, version or None, kind)] of the known packages this Python can import,
    found without importing them."""
    found = []
    for package, kind in [(name, "loads") for name in LOADS_NCCL_ITSELF] + [(name, "links") for name in LINKS_NCCL]:
        try:
            present = find_spec(package) is not None
        except (ImportError, ValueError):
            present = False
        if present:
            try:
                version = version_of(package)
            except Exception:  # noqa: BLE001 (metadata may be missing or broken)
                version = None
            found.append((package, version, kind))
    return found


# ---- Bringing the library in by a mode ----

def environment_for(base, mode, library, dropin_folder=None):
    """`base` with the library brought in by `mode` (and taken out of LD_PRELOAD otherwise)."""
    env = dict(base)
    if mode == "preload":
        env["LD_PRELOAD"] = paths.preload_with(base.get("LD_PRELOAD"), library)
        return env
    rest = paths.preload_without(base.get("LD_PRELOAD"), library)
    if rest:
        env["LD_PRELOAD"] = rest
    else:
        env.pop("LD_PRELOAD", None)
    if mode == "audit":
        env["LD_AUDIT"] = paths.path_list_with(base.get("LD_AUDIT"), paths.audit_module_for(library))
    else:
        env["LD_LIBRARY_PATH"] = paths.path_list_with(base.get("LD_LIBRARY_PATH"), dropin_folder)
    return env
