"""Byte sizes with binary suffixes: "8M" is 8 MiB, as the library and nccl-tests count."""

import re

_MULTIPLIERS = {"": 1, "K": 1 << 10, "M": 1 << 20, "G": 1 << 30}
_SIZE = re.compile(r"(\d+)\s*([KMG]?)(?:I?B)?")


def parse_size(text):
    """Returns the number of bytes in "1024", "512K", "8M", "1G", "8MiB" or "8MB".

    Raises ValueError for anything else (negative numbers, fractions, unknown suffixes)."""
    match = _SIZE.fullmatch(text.strip().upper())
    if match is None:
        raise ValueError(f"invalid size '{text}': expected a whole number of bytes, "
                         "optionally followed by K, M or G (binary: 1K = 1024)")
    return int(match.group(1)) * _MULTIPLIERS[match.group(2)]


def format_size(size):
    """"8 MiB", "512 KiB", "100 B"; one decimal when not a whole number of units."""
    for unit, factor in (("GiB", 1 << 30), ("MiB", 1 << 20), ("KiB", 1 << 10)):
        if size >= factor:
            value = size / factor
            return f"{value:.0f} {unit}" if size % factor == 0 else f"{value:.1f} {unit}"
    return f"{size} B"


def short_size(size):
    """Axis labels: "1K", "16M", "512"; exact for powers of two."""
    for unit, factor in (("G", 1 << 30), ("M", 1 << 20), ("K", 1 << 10)):
        if size >= factor and size % factor == 0:
            return f"{size // factor}{unit}"
    return str(size)
