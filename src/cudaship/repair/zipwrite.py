"""Writing a wheel deterministically: members in the order given, every timestamp 1980-01-01 00:00, no
directory entries, no data descriptors; a member unchanged from the input is copied as its compressed bytes
(not inflated and deflated again), a new one deflated at level 6. Zip64 records only where a size, an offset
or the count needs them. The same members give the same bytes.

Memory is bounded by the block size, not by the members (issue 31, class 9): a raw copy is read from
the input file in :data:`COPY` pieces (``os.pread``: through the page cache, never a map that stays
resident), and a member given as a file (an edited library) is deflated from that file in :data:`BLOCK`
pieces, a few at a time, into a temporary file, then copied. :attr:`ZipWriter.largest` counts the
largest buffer the writer held."""

from __future__ import annotations

import os
import shutil
import struct
import tempfile
import zlib
from collections import deque
from collections.abc import Iterable
from concurrent.futures import Future, ThreadPoolExecutor
from dataclasses import dataclass
from pathlib import Path
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
class Span:
    """Compressed bytes in an open file: ``length`` bytes at ``offset`` of descriptor ``fd``."""

    fd: int
    offset: int
    length: int


@dataclass(frozen=True)
class Entry:
    """One member to write: ``raw`` (compressed bytes copied as they are, with their ``method``, ``crc`` and
    ``size``: in memory, or a :class:`Span` of the input file), ``data`` (deflated here) or ``path`` (a file
    holding the member's bytes, deflated from it piece by piece)."""

    name: str
    mode: int  #: Unix mode bits (0: 0o644)
    data: bytes | None = None
    raw: bytes | memoryview | Span | None = None
    method: int = DEFLATED
    crc: int = 0
    size: int = 0
    path: Path | None = None


#: Bytes of a raw copy read at a time.
COPY = 1 << 20


#: Members at least this large are deflated in blocks of this size on threads (pigz's scheme): each block
#: primed with the 32 KiB before it and ended by a sync flush, so the blocks join into one deflate stream.
#: The bytes depend on the block size only, never on the number of threads.
BLOCK = 8 << 20
_WINDOW = 32 << 10


def _deflate_block(data: memoryview, start: int, last: bool) -> bytes:
    end = min(start + BLOCK, len(data))
    return _deflate_piece(bytes(data[max(0, start - _WINDOW) : start]), data[start:end], last)


def _deflate_piece(prime: bytes, block: bytes | memoryview, last: bool) -> bytes:
    compressor = (
        zlib.compressobj(6, zlib.DEFLATED, -15, zdict=prime)
        if prime
        else zlib.compressobj(6, zlib.DEFLATED, -15)
    )
    return compressor.compress(block) + compressor.flush(zlib.Z_FINISH if last else zlib.Z_SYNC_FLUSH)


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


def _read_block(fd: int, start: int, size: int) -> tuple[bytes, bytes, bool]:
    """(prime, block, last) of the block at ``start`` of a file of ``size`` bytes."""
    head = max(0, start - _WINDOW)
    end = min(start + BLOCK, size)
    piece = os.pread(fd, end - head, head)
    if len(piece) != end - head:
        raise OSError(f"short read of a member being written ({len(piece)} of {end - head} bytes)")
    return piece[: start - head], piece[start - head :], end >= size


class ZipWriter:
    """Members written one at a time to ``out`` (:meth:`add`), then the central directory (:meth:`close`).
    The bytes equal :func:`write_zip`'s for the same entries, whatever form each member comes in."""

    def __init__(self, out: BinaryIO) -> None:
        self.out = out
        self.central: list[bytes] = []
        self.offset = 0
        #: the largest buffer of member bytes the writer held at once (a count for the tests: bounded by
        #: the block size and the number of threads, not by the members)
        self.largest = 0

    def _held(self, n: int) -> None:
        self.largest = max(self.largest, n)

    def add(self, e: Entry) -> None:
        if e.path is not None:
            self._add_file(e)
            return
        if e.raw is not None:
            body: bytes | memoryview | Span = e.raw
            method, crc, size = e.method, e.crc, e.size
        else:
            assert e.data is not None
            self._held(len(e.data))
            deflated = deflate(e.data)
            if len(deflated) >= len(e.data):
                body, method = e.data, STORED
            else:
                body, method = deflated, DEFLATED
            crc, size = zlib.crc32(e.data), len(e.data)
        csize = body.length if isinstance(body, Span) else len(body)
        self._header(e, method, crc, size, csize)
        if isinstance(body, Span):
            self._copy_span(body)
        else:
            self.out.write(body)

    def _copy_span(self, span: Span) -> None:
        done = 0
        while done < span.length:
            n = min(COPY, span.length - done)
            piece = os.pread(span.fd, n, span.offset + done)
            if len(piece) != n:
                raise OSError(f"short read of the input ({len(piece)} of {n} bytes)")
            self._held(n)
            self.out.write(piece)
            done += n

    def _add_file(self, e: Entry) -> None:
        """Deflate the file at ``e.path`` in :data:`BLOCK` pieces (as :func:`deflate` would the whole) into a
        temporary file beside it, then write it (stored when deflating does not shrink it)."""
        assert e.path is not None
        with open(e.path, "rb") as src, tempfile.TemporaryFile(dir=e.path.parent) as packed:
            fd = src.fileno()
            size = os.fstat(fd).st_size
            crc = 0
            if size < 2 * BLOCK:
                data = src.read()
                self._held(len(data))
                crc = zlib.crc32(data)
                packed.write(deflate(data))
            else:
                workers = usable_cpus()
                with ThreadPoolExecutor(max_workers=workers) as pool:
                    pending: deque[Future[tuple[bytes, bytes]]] = deque()

                    def job(start: int) -> tuple[bytes, bytes]:
                        prime, block, last = _read_block(fd, start, size)
                        return block, _deflate_piece(prime, block, last)

                    starts = iter(range(0, size, BLOCK))
                    for start in starts:  # at most workers + 1 blocks in flight
                        pending.append(pool.submit(job, start))
                        if len(pending) > workers:
                            break
                    while pending:
                        block, deflated = pending.popleft().result()
                        self._held((len(pending) + 1) * (BLOCK + _WINDOW) + len(deflated))
                        crc = zlib.crc32(block, crc)
                        packed.write(deflated)
                        nxt = next(starts, None)
                        if nxt is not None:
                            pending.append(pool.submit(job, nxt))
            csize = packed.tell()
            if csize >= size:
                self._header(e, STORED, crc, size, size)
                src.seek(0)
                shutil.copyfileobj(src, self.out, COPY)
            else:
                self._header(e, DEFLATED, crc, size, csize)
                packed.seek(0)
                shutil.copyfileobj(packed, self.out, COPY)
            self._held(COPY)

    def _header(self, e: Entry, method: int, crc: int, size: int, csize: int) -> None:
        offset = self.offset
        name = e.name.encode("utf-8")
        flags = _UTF8 if not e.name.isascii() else 0
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
        self.out.write(header + name + local_extra)
        extra_fields = b""
        if big:
            extra_fields += struct.pack("<QQ", size, csize)
        if offset >= _MAX32:
            extra_fields += struct.pack("<Q", offset)
        central_extra = struct.pack("<HH", 1, len(extra_fields)) + extra_fields if extra_fields else b""
        mode = e.mode or 0o100644
        if not mode & 0o170000:
            mode |= 0o100000
        self.central.append(
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
        self.offset += len(header) + len(name) + len(local_extra) + csize

    def close(self) -> int:
        """Write the central directory; the number of bytes written in all."""
        out, offset, central = self.out, self.offset, self.central
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


def write_zip(out: BinaryIO, entries: Iterable[Entry]) -> int:
    """Write ``entries`` to ``out`` as a zip; the number of bytes written."""
    writer = ZipWriter(out)
    for e in entries:
        writer.add(e)
    return writer.close()
