#!/usr/bin/env python3
"""What each GPU architecture and each kernel family adds to libnccl-car.so (docs/benchmarks.md,
"Library size"). No GPU needed.

    device_code_size.py LIBRARY [--cubins FOLDER]

Per architecture, from the fat binary's own headers: the bytes each one takes in the file
(compressed, as nvcc stored them) and unpacked. With --cubins, a folder of the library's cubins
unpacked by `cuobjdump -xelf all LIBRARY` (run in that folder), the machine code (the .text
sections, what loading the kernels puts in GPU memory) per architecture, by kernel, element
type family and world size.
"""

import argparse
import collections
import os
import re
import struct
import subprocess
import sys

FATBIN_MAGIC = 0xBA55ED50
KIND_PTX, KIND_CUBIN = 1, 2
FLAG_COMPRESSED = 0x2000 | 0x8000  # the older and the newer compression flags
# Entry header: kind, ?, header size, payload size, compressed size, ?, minor, major, arch,
# name offset, name length, flags, ?, unpacked size.
ENTRY = struct.Struct("<HHIQIIHHIIIQQQ")

KERNELS = {"oneStageKernel": "1stage", "twoStageKernel": "2stage", "oneShotPushKernel": "1shot",
           "twoShotPushKernel": "2shot"}
# Element types by their C++ names, in families of the same width and wire format.
FAMILIES = {"signed char": "8-bit int", "unsigned char": "8-bit int", "__nv_fp8_e4m3": "fp8",
            "__nv_fp8_e5m2": "fp8", "__half": "fp16/bf16", "__nv_bfloat16": "fp16/bf16",
            "float": "fp32", "int": "32-bit int", "unsigned int": "32-bit int", "long": "64-bit int",
            "unsigned long": "64-bit int", "double": "fp64"}


def elf_sections(data):
    """(name, size) of every section of a 64-bit little-endian ELF image."""
    shoff, = struct.unpack_from("<Q", data, 0x28)
    entsize, count, names_index = struct.unpack_from("<HHH", data, 0x3A)
    headers = [struct.unpack_from("<IIQQQQ", data, shoff + i * entsize) for i in range(count)]
    names_offset = headers[names_index][4]
    for name, kind, _flags, _addr, _offset, size in headers:
        end = data.index(b"\0", names_offset + name)
        yield data[names_offset + name:end].decode(), size if kind != 8 else 0  # 8: NOBITS


def fatbin_entries(library):
    """(kind, arch, bytes in the file, bytes unpacked) of every image in the .nv_fatbin section."""
    with open(library, "rb") as stream:
        data = stream.read()
    shoff, = struct.unpack_from("<Q", data, 0x28)
    entsize, count, names_index = struct.unpack_from("<HHH", data, 0x3A)
    headers = [struct.unpack_from("<IIQQQQ", data, shoff + i * entsize) for i in range(count)]
    names_offset = headers[names_index][4]
    section = None
    for name, _kind, _flags, _addr, offset, size in headers:
        if data[names_offset + name:data.index(b"\0", names_offset + name)] == b".nv_fatbin":
            section = (offset, size)
    if section is None:
        raise SystemExit(f"{library}: no .nv_fatbin section (no device code)")
    at, end = section[0], section[0] + section[1]
    while at + 16 <= end:
        magic, _version, header_size, size = struct.unpack_from("<IHHQ", data, at)
        if magic != FATBIN_MAGIC:
            at += 8  # containers are 8-byte aligned
            continue
        entry, last = at + header_size, at + header_size + size
        while entry < last:
            (kind, _, entry_header, payload, _compressed, _, _minor, _major, arch, _name, _name_length, flags, _,
             unpacked) = ENTRY.unpack_from(data, entry)
            yield kind, arch, entry_header + payload, unpacked if flags & FLAG_COMPRESSED else payload
            entry += entry_header + payload
        at = last


def demangle(names):
    try:
        result = subprocess.run(["c++filt"], input="\n".join(names), capture_output=True, text=True, check=True)
        return dict(zip(names, result.stdout.splitlines()))
    except (OSError, subprocess.CalledProcessError):
        return {name: name for name in names}


def kernel_text(folder):
    """{(arch, kernel, family, ranks): .text bytes} over the cubins in `folder`."""
    sizes = collections.Counter()
    for file in sorted(os.listdir(folder)):
        arch = re.search(r"\.sm_(\d+[a-z]?)\.cubin$", file)
        if not arch:
            continue
        with open(os.path.join(folder, file), "rb") as stream:
            sections = dict(elf_sections(stream.read()))
        texts = {name[len(".text."):]: size for name, size in sections.items() if name.startswith(".text.")}
        for mangled, readable in demangle(list(texts)).items():
            found = re.search(r"car::(\w+)<(.+), (\d+)>\(car::LaunchArgs\)", readable)
            if found and found.group(1) in KERNELS:
                key = (arch.group(1), KERNELS[found.group(1)], FAMILIES.get(found.group(2), found.group(2)),
                       int(found.group(3)))
            else:
                key = (arch.group(1), "other", "-", 0)
            sizes[key] += texts[mangled]
    return sizes


def kib(value):
    return f"{value / 1024:,.0f}"


def print_table(title, rows, header):
    print(f"\n{title}\n")
    print("| " + " | ".join(header) + " |")
    print("| " + " | ".join("---" for _ in header) + " |")
    for row in rows:
        print("| " + " | ".join(str(cell) for cell in row) + " |")


def main(argv=None):
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("library")
    parser.add_argument("--cubins", metavar="FOLDER", help="cubins unpacked by cuobjdump -xelf all LIBRARY")
    args = parser.parse_args(argv)

    per_arch = collections.defaultdict(lambda: [0, 0, 0])  # (kind, arch): modules, stored, unpacked
    for kind, arch, stored, unpacked in fatbin_entries(args.library):
        per_arch[(kind != KIND_CUBIN, arch)][0] += 1
        per_arch[(kind != KIND_CUBIN, arch)][1] += stored
        per_arch[(kind != KIND_CUBIN, arch)][2] += unpacked
    total_file = os.path.getsize(args.library)
    device = sum(stored for _, stored, _ in per_arch.values())
    rows = [(f"{'compute' if ptx else 'sm'}_{arch}{' (PTX)' if ptx else ''}", count, kib(stored), kib(unpacked))
            for (ptx, arch), (count, stored, unpacked) in sorted(per_arch.items())]
    rows.append(("all device code", sum(c for c, _, _ in per_arch.values()), kib(device),
                 kib(sum(u for _, _, u in per_arch.values()))))
    rows.append(("host code and the rest", "", kib(total_file - device), ""))
    print_table(f"{args.library}: {kib(total_file)} KiB", rows, ["image", "modules", "KiB in the file", "KiB unpacked"])

    if args.cubins:
        sizes = kernel_text(args.cubins)
        arches = sorted({key[0] for key in sizes}, key=lambda arch: int(re.match(r"\d+", arch).group()))
        for index, label in ((1, "kernel"), (2, "element types"), (3, "world size")):
            groups = sorted({key[index] for key in sizes}, key=str)
            rows = [[group] + [kib(sum(v for k, v in sizes.items() if k[0] == arch and k[index] == group))
                               for arch in arches] for group in groups]
            rows.append(["all"] + [kib(sum(v for k, v in sizes.items() if k[0] == arch)) for arch in arches])
            print_table(f"Machine code (.text) by {label}, KiB", rows, [label] + [f"sm_{arch}" for arch in arches])
    return 0


if __name__ == "__main__":
    sys.exit(main())
