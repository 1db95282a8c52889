"""Bounded decompression of fatbin entry payloads (LZ4 raw blocks and ZSTD frames).

A fatbin entry records its uncompressed size in its header. That number is the hard cap on what we produce:
a payload that inflates past it, or a header that claims an absurd size for the bytes stored, is a clean
:class:`~cudaship.errors.BinaryFormatError`, never an allocation of gigabytes.
"""

from __future__ import annotations

import io

import lz4.block  # type: ignore[import-untyped]
import zstandard

from cudaship.errors import BinaryFormatError
from cudaship.records.binary import Compression

#: The largest ratio of uncompressed to stored bytes we accept. Cubins and PTX compress 3-10x in practice
#: (see docs/formats.md); ZSTD's own ceiling is far above this, so anything past it is a bomb or corruption.
MAX_RATIO = 256
#: Small payloads may legitimately compress better than MAX_RATIO (a page of zeros); allow this much always.
SLACK = 1 << 20
#: No single device-code entry is larger than this (the largest cubins in cuBLASLt are tens of MiB).
MAX_UNCOMPRESSED = 1 << 31

_ZSTD_MAGIC = b"\x28\xb5\x2f\xfd"


def output_limit(stored_size: int, recorded_size: int) -> int:
    """The output cap for a payload of ``stored_size`` bytes whose header claims ``recorded_size``.

    Raises :class:`BinaryFormatError` when the claim itself is not believable.
    """
    if recorded_size <= 0:
        raise BinaryFormatError(f"compressed entry records an uncompressed size of {recorded_size}")
    bound = min(MAX_UNCOMPRESSED, stored_size * MAX_RATIO + SLACK)
    if recorded_size > bound:
        raise BinaryFormatError(
            f"compressed entry claims {recorded_size} bytes from {stored_size} stored (limit {bound})"
        )
    return recorded_size


def decompress(data: bytes, compression: Compression, uncompressed_size: int) -> bytes:
    """Decompress ``data`` to at most ``uncompressed_size`` bytes.

    ``uncompressed_size`` is the size the fatbin entry header records; it is checked against the stored size
    by :func:`output_limit` first. A payload that is corrupt, truncated or inflates beyond the cap raises
    :class:`BinaryFormatError`.
    """
    if compression is Compression.NONE:
        return data
    limit = output_limit(len(data), uncompressed_size)
    if compression is Compression.LZ4:
        try:
            out: bytes = lz4.block.decompress(data, uncompressed_size=limit)
        except lz4.block.LZ4BlockError as e:
            raise BinaryFormatError(f"LZ4 payload is corrupt or larger than {limit} bytes") from e
        return out
    if compression is Compression.ZSTD:
        if not data.startswith(_ZSTD_MAGIC):
            raise BinaryFormatError("ZSTD payload does not start with the frame magic 28 B5 2F FD")
        try:
            reader = zstandard.ZstdDecompressor().stream_reader(io.BytesIO(data), read_across_frames=True)
            chunks: list[bytes] = []
            got = 0
            with reader:
                while got <= limit:
                    chunk = reader.read(limit + 1 - got)
                    if not chunk:
                        break
                    chunks.append(chunk)
                    got += len(chunk)
            out = b"".join(chunks)
        except zstandard.ZstdError as e:
            raise BinaryFormatError(f"ZSTD payload is corrupt: {e}") from e
        if len(out) > limit:
            raise BinaryFormatError(f"ZSTD payload inflates past its recorded size of {limit} bytes")
        return out
    raise BinaryFormatError(f"unsupported compression {compression.value!r}")  # pragma: no cover
