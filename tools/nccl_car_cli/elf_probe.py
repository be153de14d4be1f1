"""What an executable says about NCCL, read from its file without running it: whether it
names libnccl in DT_NEEDED (linked: the loader loads NCCL for it) or only as a string
(the name it passes to dlopen). 64-bit little-endian ELF only; anything else is None."""

import mmap
import struct

DT_NEEDED = 1
SHT_DYNAMIC = 6
_NCCL = b"libnccl.so"


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


def nccl_use(path):
    """"links" (libnccl in DT_NEEDED), "loads" (names libnccl, but not in DT_NEEDED: it
    dlopens it), None (neither, or not a 64-bit little-endian ELF file)."""
    try:
        with open(path, "rb") as stream:
            if stream.read(6) != b"\x7fELF\x02\x01":
                return None
            with mmap.mmap(stream.fileno(), 0, access=mmap.ACCESS_READ) as data:
                if any(name.startswith(_NCCL.decode()) for name in _needed(data)):
                    return "links"
                return "loads" if data.find(_NCCL) >= 0 else None
    except (OSError, ValueError, struct.error):
        return None
