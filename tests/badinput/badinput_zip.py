"""Hand-built zip archives for the bad-input tests: members with any header sizes, CRCs and
compression, and a deflate stream of 1 GiB of zeros that is about 1 MiB long (a zip bomb)."""

from __future__ import annotations

import struct
import zlib
from dataclasses import dataclass
from functools import cache
from pathlib import Path

STORED, DEFLATED, BZIP2 = 0, 8, 12


@dataclass(frozen=True)
class Member:
    """One archive member: `payload` as stored (compressed when `method` says so) and the
    uncompressed size and CRC its headers state (true ones by default)."""

    name: str
    payload: bytes
    method: int = STORED
    size: int | None = None
    crc: int | None = None


def stored(files: dict[str, bytes]) -> list[Member]:
    return [Member(n, d) for n, d in sorted(files.items())]


def write_zip(dest: Path, members: list[Member]) -> Path:
    """A zip of `members` with exactly the headers they state (no zip64)."""
    out, central = bytearray(), bytearray()
    for m in members:
        size = len(m.payload) if m.size is None else m.size
        crc = zlib.crc32(m.payload) if m.crc is None else m.crc
        name, offset = m.name.encode(), len(out)
        fields = (20, 0, m.method, 0, 0x21, crc, len(m.payload), size, len(name))
        out += struct.pack("<IHHHHHIIIHH", 0x04034B50, *fields, 0) + name + m.payload
        central += struct.pack("<IH", 0x02014B50, 20) + struct.pack("<HHHHHIIIH", *fields)
        central += struct.pack("<HHHHII", 0, 0, 0, 0, 0, offset) + name
    n = len(members)
    eocd = struct.pack("<IHHHHIIH", 0x06054B50, 0, 0, n, n, len(central), len(out), 0)
    dest.write_bytes(bytes(out + central + eocd))
    return dest


GIB = 1 << 30


@cache
def gib_of_zeros_deflated() -> bytes:
    """A raw deflate stream of 1 GiB of zeros (~1 MiB): one 16 MiB block, full-flushed so it
    repeats byte for byte, 64 times, then the final block."""
    c = zlib.compressobj(9, zlib.DEFLATED, -15)
    block = c.compress(bytes(16 << 20)) + c.flush(zlib.Z_FULL_FLUSH)
    return block * (GIB // (16 << 20)) + c.flush()
