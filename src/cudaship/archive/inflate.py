"""Bounded streaming decompression: no call ever produces more than one chunk, whatever the method.

:mod:`zipfile` and :mod:`tarfile` hand a whole block of compressed input to bzip2 and lzma and take everything
it inflates to: a few kilobytes of bzip2 become gigabytes in one call, before any limit can apply. Here every
decompressor is driven with ``max_length``, so memory stays at one chunk and a limit applies to every chunk.
"""

from __future__ import annotations

import bz2
import lzma
import struct
import zlib
from collections.abc import Callable, Iterator
from typing import IO, Protocol

from cudaship.archive.limits import CHUNK, IN_CHUNK
from cudaship.errors import ArchiveError

#: errors a corrupt deflate stream raises
INFLATE_ERRORS: tuple[type[BaseException], ...] = (zlib.error,)
#: CRC-32 of a buffer (ISA-L's where installed: 8x zlib's speed, same values)
crc32 = zlib.crc32
try:  # ISA-L inflates about twice as fast as zlib; same API and results
    from isal import isal_zlib
    from isal.isal_zlib import decompressobj as _raw_inflater

    crc32 = isal_zlib.crc32

    _isal_error: object = getattr(isal_zlib, "error", None)
    if isinstance(_isal_error, type) and issubclass(_isal_error, BaseException):
        INFLATE_ERRORS = (zlib.error, _isal_error)
except ImportError:  # pragma: no cover - platforms without an isal wheel
    from zlib import decompressobj as _raw_inflater  # type: ignore[assignment, unused-ignore]

#: What a corrupt compressed stream of any supported kind raises.
STREAM_ERRORS: tuple[type[BaseException], ...] = (
    *INFLATE_ERRORS,
    lzma.LZMAError,
    OSError,
    EOFError,
    ValueError,
)

STORED, DEFLATED, BZIP2, LZMA = 0, 8, 12, 14
METHOD_NAMES = {STORED: "stored", DEFLATED: "deflate", BZIP2: "bzip2", LZMA: "lzma"}


class _Decompressor(Protocol):
    @property
    def eof(self) -> bool: ...

    @property
    def unused_data(self) -> bytes: ...


class _ZlibStep:
    """zlib's ``decompressobj`` behind the bz2/lzma interface (``needs_input``, ``decompress(data, max)``)."""

    def __init__(self, wbits: int, fast: bool) -> None:
        self._d = _raw_inflater(wbits) if fast else zlib.decompressobj(wbits)
        self._tail: bytes = b""

    @property
    def eof(self) -> bool:
        return bool(self._d.eof)

    @property
    def unused_data(self) -> bytes:
        return bytes(self._d.unused_data)

    @property
    def needs_input(self) -> bool:
        return not self._tail

    def decompress(self, data: bytes | memoryview, max_length: int) -> bytes:
        out: bytes = self._d.decompress(self._tail + bytes(data) if self._tail else data, max_length)
        self._tail = bytes(self._d.unconsumed_tail)
        return out


def inflate_whole(raw: bytes | memoryview, size: int) -> bytes | None:
    """A deflate stream of a small member inflated in one call, when it is exactly ``size`` bytes and ends
    where its data ends; None for anything else (a corrupt stream, a size that disagrees, trailing data),
    so the caller reads it the bounded, chunked way, which says what is wrong. Never more than ``size + 1``
    bytes are produced."""
    d = _raw_inflater(-15)
    try:
        out: bytes = d.decompress(raw, size + 1)
    except INFLATE_ERRORS:
        return None
    if len(out) != size or not d.eof or d.unconsumed_tail or d.unused_data:
        return None
    return out


def _zip_lzma(raw: memoryview) -> tuple[lzma.LZMADecompressor, int]:
    """A raw LZMA1 decoder for a zip member (header: version, properties size, properties) and where its
    data starts."""
    if len(raw) < 4:
        raise ArchiveError("lzma member too short for its header")
    (props_size,) = struct.unpack_from("<H", raw, 2)
    if 4 + props_size > len(raw):
        raise ArchiveError("lzma member header runs past its data")
    helper = "_decode_filter_properties"  # the stdlib's zipfile uses the same private helper
    decode = getattr(lzma, helper)
    try:
        filt = decode(lzma.FILTER_LZMA1, bytes(raw[4 : 4 + props_size]))
        return lzma.LZMADecompressor(lzma.FORMAT_RAW, filters=[filt]), 4 + props_size
    except (lzma.LZMAError, ValueError, TypeError) as e:
        raise ArchiveError(f"lzma member has bad properties: {e}") from None


def member_chunks(
    method: int, raw: memoryview, chunk: int = CHUNK, consumed: Callable[[int], None] | None = None
) -> Iterator[bytes]:
    """The uncompressed bytes of a zip member whose compressed bytes are ``raw``, ``chunk`` bytes at most per
    step. Stops at the end of the stream or of ``raw``; the caller checks the total against the declared size
    and its caps (a truncated member comes out short). ``consumed(n)`` is told how many compressed bytes have
    been taken so far (the archive drops the pages behind)."""
    if method == STORED:
        for pos in range(0, len(raw), chunk):
            yield bytes(raw[pos : pos + chunk])
            if consumed is not None:
                consumed(pos + chunk)
        return
    start = 0
    step: _ZlibStep | bz2.BZ2Decompressor | lzma.LZMADecompressor
    if method == DEFLATED:
        step = _ZlibStep(-15, fast=True)
    elif method == BZIP2:
        step = bz2.BZ2Decompressor()
    elif method == LZMA:
        step, start = _zip_lzma(raw)
    else:
        name = METHOD_NAMES.get(method, f"method {method}")
        raise ArchiveError(f"unsupported compression ({name})")
    yield from _drive(step, raw, start, chunk, consumed)


def _drive(
    step: _ZlibStep | bz2.BZ2Decompressor | lzma.LZMADecompressor,
    raw: memoryview,
    pos: int,
    chunk: int,
    consumed: Callable[[int], None] | None,
) -> Iterator[bytes]:
    idle = 0
    while not step.eof:
        if step.needs_input:
            if pos >= len(raw):
                return
            piece: bytes | memoryview = raw[pos : pos + IN_CHUNK]
            pos += len(piece)
            if consumed is not None:
                consumed(pos)
        else:
            piece = b""
        try:
            out = step.decompress(piece, chunk)
        except STREAM_ERRORS as e:
            raise ArchiveError(f"corrupt compressed data ({type(e).__name__}: {_first(e)})") from None
        if out:
            idle = 0
            yield out
        elif not piece:
            idle += 1
            if idle > 2:  # neither input taken nor output given: a decoder that cannot go on
                return


class StreamReader:
    """A read-only file over a compressed tar stream (``xz``, ``gz``, ``bz2`` or none), inflating at most
    ``n`` bytes per ``read(n)`` and at most ``cap`` bytes in all (then :class:`ArchiveError`)."""

    def __init__(self, raw: IO[bytes], kind: str, cap: int) -> None:
        self._raw = raw
        self._kind = kind
        self._cap = cap
        self.produced = 0
        self._pending = b""
        self._step: _ZlibStep | bz2.BZ2Decompressor | lzma.LZMADecompressor | None = self._new()
        self._done = False

    def _new(self) -> _ZlibStep | bz2.BZ2Decompressor | lzma.LZMADecompressor | None:
        if self._kind == "gz":
            return _ZlibStep(zlib.MAX_WBITS | 16, fast=False)
        if self._kind == "bz2":
            return bz2.BZ2Decompressor()
        if self._kind == "xz":
            return lzma.LZMADecompressor(lzma.FORMAT_AUTO)
        return None

    def readable(self) -> bool:
        return True

    def read(self, n: int = -1) -> bytes:
        want = CHUNK if n is None or n < 0 else min(n, CHUNK)
        out = self._read(want)
        self.produced += len(out)
        if self.produced > self._cap:
            raise ArchiveError(f"archive expands past {self._cap} bytes (compression bomb?)")
        return out

    def _read(self, n: int) -> bytes:
        if n == 0 or self._done:
            return b""
        if self._step is None:
            return self._raw.read(n)
        idle = 0
        while True:
            if self._step.eof:
                rest = self._step.unused_data + self._pending + self._raw.read(IN_CHUNK)
                if not rest.strip(b"\x00"):  # end, or padding after the last stream
                    self._done = True
                    return b""
                self._step = self._new()  # another stream concatenated (multi-member gzip, bzip2, xz)
                assert self._step is not None
                self._pending = rest
            if self._step.needs_input and not self._pending:
                self._pending = self._raw.read(IN_CHUNK)
                if not self._pending:
                    raise ArchiveError("compressed stream ends early (truncated archive?)")
            piece, self._pending = (self._pending, b"") if self._step.needs_input else (b"", self._pending)
            try:
                out = self._step.decompress(piece, n)
            except STREAM_ERRORS as e:
                raise ArchiveError(f"corrupt compressed data ({type(e).__name__}: {_first(e)})") from None
            if out:
                return out
            idle = 0 if piece else idle + 1
            if idle > 2:
                raise ArchiveError("compressed stream stalls (corrupt archive?)")


def _first(error: BaseException) -> str:
    lines = str(error).strip().splitlines()
    return lines[0] if lines else ""
