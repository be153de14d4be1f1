#!/usr/bin/env python3
"""Writes the functions each NCCL release's libnccl.so.2 exports into tests/abi/symbols/, one
small file per release, for the CI test that every one of them reaches a program through
every way in (tests/shim/test_shim_abi.cc). CI cannot download the wheels (200-300 MB each),
so this runs by hand, once per new release, and its output is committed:

    tests/abi/extract_nccl_symbols.py                       # every release in RELEASES
    tests/abi/extract_nccl_symbols.py nvidia-nccl-cu13==2.32.6
    tests/abi/extract_nccl_symbols.py --library /usr/local/cuda/lib64/libnccl.so.2   # print only

Each wheel is fetched with pip (no dependencies, manylinux x86_64), checked by its sha256
(printed and written into the file), read without unpacking it, and deleted. A name is
listed when the library's .dynsym defines it as a function of default or protected
visibility, global or weak: what a program can bind to."""

import argparse
import hashlib
import os
import shutil
import struct
import subprocess
import sys
import tempfile
import zipfile

# One release per minor version from 2.18 on, the last of each (cu13 from 2.27 on; its
# newest as well, which cu12 does not have).
RELEASES = [f"nvidia-nccl-cu12=={v}" for v in (
    "2.18.3", "2.19.3", "2.20.5", "2.21.5", "2.22.3", "2.23.4", "2.24.3", "2.25.1.post1", "2.26.5", "2.27.7",
    "2.28.9", "2.29.7", "2.30.7", "2.31.2", "2.32.3")] + ["nvidia-nccl-cu13==2.32.6"]

# Older releases are tagged manylinux1 or manylinux2014, newer ones manylinux_2_27; pip takes any.
PLATFORMS = ("manylinux_2_27_x86_64", "manylinux_2_18_x86_64", "manylinux2014_x86_64", "manylinux1_x86_64")
LIBRARY_IN_WHEEL = "nvidia/nccl/lib/libnccl.so.2"
OUT_DIR = os.path.join(os.path.dirname(os.path.abspath(__file__)), "symbols")

SHT_DYNSYM = 11
STT_FUNC = 2
STB_GLOBAL, STB_WEAK = 1, 2
STV_DEFAULT, STV_PROTECTED = 0, 3


def exported_functions(data):
    """The names of the functions a 64-bit little-endian ELF file exports (.dynsym)."""
    if data[:6] != b"\x7fELF\x02\x01":
        raise ValueError("not a 64-bit little-endian ELF file")
    shoff, = struct.unpack_from("<Q", data, 0x28)
    shentsize, shnum = struct.unpack_from("<HH", data, 0x3A)
    sections = [struct.unpack_from("<IIQQQQIIQQ", data, shoff + i * shentsize) for i in range(shnum)]
    names = set()
    for _name, kind, _flags, _addr, offset, size, link, _info, _align, entsize in sections:
        if kind != SHT_DYNSYM:
            continue
        strings = sections[link][4]
        for at in range(offset, offset + size, entsize):
            st_name, st_info, st_other, st_shndx = struct.unpack_from("<IBBH", data, at)
            if st_shndx == 0 or st_info & 0xF != STT_FUNC or st_info >> 4 not in (STB_GLOBAL, STB_WEAK):
                continue
            if st_other & 3 not in (STV_DEFAULT, STV_PROTECTED):
                continue
            end = data.index(b"\0", strings + st_name)
            names.add(data[strings + st_name:end].decode())
    return sorted(names)


def sha256_of(path):
    digest = hashlib.sha256()
    with open(path, "rb") as stream:
        for block in iter(lambda: stream.read(1 << 20), b""):
            digest.update(block)
    return digest.hexdigest()


def extract(requirement, out_dir):
    package, version = requirement.split("==")
    download = tempfile.mkdtemp(prefix="nccl-wheel-")
    try:
        subprocess.run([sys.executable, "-m", "pip", "download", "-q", "--no-deps", "--only-binary=:all:",
                        *[word for platform in PLATFORMS for word in ("--platform", platform)], "-d", download,
                        requirement], check=True)
        wheel, = [os.path.join(download, name) for name in os.listdir(download) if name.endswith(".whl")]
        wheel_sha = sha256_of(wheel)
        with zipfile.ZipFile(wheel) as archive:
            library = archive.read(LIBRARY_IN_WHEEL)
        names = exported_functions(library)
        path = os.path.join(out_dir, f"{package}-{version}.txt")
        with open(path, "w") as out:
            out.write(f"# {package} {version}: the functions its {LIBRARY_IN_WHEEL} exports, one a line\n")
            out.write(f"# wheel {os.path.basename(wheel)} sha256 {wheel_sha}\n")
            out.write(f"# library sha256 {hashlib.sha256(library).hexdigest()}\n")
            out.write(f"# written by tests/abi/extract_nccl_symbols.py\n")
            out.writelines(name + "\n" for name in names)
        print(f"{requirement}: {len(names)} functions -> {os.path.relpath(path)} (wheel sha256 {wheel_sha})")
    finally:
        shutil.rmtree(download, ignore_errors=True)


def main(argv):
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("requirements", nargs="*", metavar="PACKAGE==VERSION",
                        help="wheels to read (default: every release in RELEASES)")
    parser.add_argument("--library", metavar="PATH", help="print the functions of this file instead")
    parser.add_argument("--out", default=OUT_DIR, help="folder for the files (default: tests/abi/symbols)")
    args = parser.parse_args(argv)
    if args.library:
        with open(args.library, "rb") as stream:
            print("\n".join(exported_functions(stream.read())))
        return 0
    os.makedirs(args.out, exist_ok=True)
    for requirement in args.requirements or RELEASES:
        extract(requirement, args.out)
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
