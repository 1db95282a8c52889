"""Writing a wheel deterministically: members in the order given, every timestamp 1980-01-01 00:00, no
directory entries, no data descriptors; a member unchanged from the input is copied as its compressed bytes
(not inflated and deflated again), a new one deflated at level 6. Zip64 records only where a size, an offset
or the count needs them. The same members give the same bytes."""

from __future__ import annotations

import struct
import zlib
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass
from typing import BinaryIO

from cudaship.archive.pool import usable_cpus

_LOCAL = struct.Struct("<IHHHHHIIIHH")
_CENTRAL = struct.Struct("<IHHHHHHIIIHHHHHII")
_EOCD = struct.Struct("<IHHHHIIH")
_EOCD64 = struct.Struct("<IQHHIIQQQQ")
_LOCATOR = struct.Struct("<IIQI")
_DOS_DATE = (0 << 9) | (1 << 5) | 1  # 1980-01-01
_MAX32 = 0xFFFFFFFF
_UTF8 = 0x800
STORED, DEFLATED = 0, 8


@dataclass(frozen=True)
class Entry:
    """One member to write: either ``raw`` (compressed bytes copied as they are, with their ``method``,
    ``crc`` and ``size``) or ``data`` (deflated here)."""

    name: str
    mode: int  #: Unix mode bits (0: 0o644)
    data: bytes | None = None
    raw: bytes | memoryview | None = None
    method: int = DEFLATED
    crc: int = 0
    size: int = 0


#: Members at least this large are deflated in blocks of this size on threads (pigz's scheme): each block
#: primed with the 32 KiB before it and ended by a sync flush, so the blocks join into one deflate stream.
#: The bytes depend on the block size only, never on the number of threads.
BLOCK = 8 << 20
_WINDOW = 32 << 10


def _deflate_block(data: memoryview, start: int, last: bool) -> bytes:
    end = min(start + BLOCK, len(data))
    prime = bytes(data[max(0, start - _WINDOW) : start])
    compressor = (
        zlib.compressobj(6, zlib.DEFLATED, -15, zdict=prime)
        if prime
        else zlib.compressobj(6, zlib.DEFLATED, -15)
    )
    return compressor.compress(data[start:end]) + compressor.flush(
        zlib.Z_FINISH if last else zlib.Z_SYNC_FLUSH
    )


def deflate(data: bytes) -> bytes:
    """Raw deflate of ``data`` at level 6; large data in :data:`BLOCK` pieces on threads (zlib releases the
    GIL)."""
    if len(data) < 2 * BLOCK:
        compressor = zlib.compressobj(6, zlib.DEFLATED, -15)
        return compressor.compress(data) + compressor.flush()
    view = memoryview(data)
    starts = range(0, len(data), BLOCK)
    with ThreadPoolExecutor(max_workers=usable_cpus()) as pool:
        blocks = pool.map(lambda s: _deflate_block(view, s, s + BLOCK >= len(data)), starts)
        return b"".join(blocks)


def _prepared(e: Entry) -> tuple[bytes | memoryview, int, int, int]:
    if e.raw is not None:
        return e.raw, e.method, e.crc, e.size
    assert e.data is not None
    body = deflate(e.data)
    if len(body) >= len(e.data):
        return e.data, STORED, zlib.crc32(e.data), len(e.data)
    return body, DEFLATED, zlib.crc32(e.data), len(e.data)


def write_zip(out: BinaryIO, entries: list[Entry]) -> int:
    """Write ``entries`` to ``out`` as a zip; the number of bytes written."""
    central: list[bytes] = []
    offset = 0
    for e in entries:
        body, method, crc, size = _prepared(e)
        name = e.name.encode("utf-8")
        flags = _UTF8 if not e.name.isascii() else 0
        csize = len(body)
        big = size >= _MAX32 or csize >= _MAX32
        local_extra = struct.pack("<HHQQ", 1, 16, size, csize) if big else b""
        version = 45 if big or offset >= _MAX32 else 20
        # the fields the local and the central header share: version needed .. name length (time 0)
        shared = (
            version,
            flags,
            method,
            0,
            _DOS_DATE,
            crc,
            _MAX32 if big else csize,
            _MAX32 if big else size,
        )
        header = _LOCAL.pack(0x04034B50, *shared, len(name), len(local_extra))
        out.write(header + name + local_extra)
        out.write(body)
        extra_fields = b""
        if big:
            extra_fields += struct.pack("<QQ", size, csize)
        if offset >= _MAX32:
            extra_fields += struct.pack("<Q", offset)
        central_extra = struct.pack("<HH", 1, len(extra_fields)) + extra_fields if extra_fields else b""
        mode = e.mode or 0o100644
        if not mode & 0o170000:
            mode |= 0o100000
        central.append(
            _CENTRAL.pack(
                0x02014B50,
                (3 << 8) | version,
                *shared,
                len(name),
                len(central_extra),
                0,
                0,
                0,
                (mode & 0xFFFF) << 16,
                min(offset, _MAX32),
            )
            + name
            + central_extra
        )
        offset += len(header) + len(name) + len(local_extra) + csize
    start = offset
    blob = b"".join(central)
    out.write(blob)
    offset += len(blob)
    count = len(central)
    if count >= 0xFFFF or start >= _MAX32 or len(blob) >= _MAX32:
        out.write(_EOCD64.pack(0x06064B50, 44, 45, 45, 0, 0, count, count, len(blob), start))
        out.write(_LOCATOR.pack(0x07064B50, 0, offset, 1))
        offset += _EOCD64.size + _LOCATOR.size
    out.write(
        _EOCD.pack(
            0x06054B50,
            0,
            0,
            min(count, 0xFFFF),
            min(count, 0xFFFF),
            min(len(blob), _MAX32),
            min(start, _MAX32),
            0,
        )
    )
    return offset + _EOCD.size
