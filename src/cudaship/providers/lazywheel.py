"""A remote wheel read through HTTP range requests, as pip's "lazy wheel" does: only the end of the file
(the zip's central directory, which names every member) and the few members asked for are fetched, so the
file list and METADATA of a 2 GB wheel cost kilobytes.

:class:`RangeFile` is a read-only, seekable file object over a URL whose size is known; the standard
library's :mod:`zipfile` reads it like a local file, and every read it makes that is not already fetched
becomes one range request (at least :data:`CHUNK` bytes, so small reads do not each cost a round trip).
"""

from __future__ import annotations

import bisect
import io
import threading
import zipfile
from typing import IO, cast

from cudaship.providers.http import Client, IndexUnavailable

CHUNK = 16 * 1024  #: the smallest range fetched
#: fetched first from the end: the end-of-central-directory record, usually the whole directory and the
#: dist-info members (written last by every wheel builder)
TAIL = 64 * 1024


class RangeFile(io.RawIOBase):
    """Bytes of ``url`` (``size`` long) fetched on demand in ranges; fetched ranges are kept."""

    def __init__(self, client: Client, url: str, size: int) -> None:
        super().__init__()
        self._client = client
        self._url = url
        self._size = size
        self._pos = 0
        self._starts: list[int] = []  # sorted starts of fetched, non-overlapping spans
        self._spans: dict[int, bytes] = {}
        self._lock = threading.Lock()
        tail = min(size, TAIL)
        if tail:
            self._fetch(size - tail, size)

    # --- io protocol ---------------------------------------------------------------------------------------

    def readable(self) -> bool:
        return True

    def seekable(self) -> bool:
        return True

    def tell(self) -> int:
        return self._pos

    def seek(self, offset: int, whence: int = io.SEEK_SET) -> int:
        if whence == io.SEEK_SET:
            self._pos = offset
        elif whence == io.SEEK_CUR:
            self._pos += offset
        elif whence == io.SEEK_END:
            self._pos = self._size + offset
        else:
            raise ValueError(f"invalid whence {whence}")
        if self._pos < 0:
            raise ValueError("negative seek position")
        return self._pos

    def read(self, size: int | None = -1) -> bytes:
        start = self._pos
        end = self._size if size is None or size < 0 else min(self._size, start + size)
        if start >= end:
            return b""
        data = self._get(start, end)
        self._pos = end
        return data

    def readinto(self, buffer: bytearray | memoryview) -> int:  # type: ignore[override]
        data = self.read(len(buffer))
        memoryview(buffer)[: len(data)] = data
        return len(data)

    # --- spans ----------------------------------------------------------------------------------------

    def _covering(self, start: int, end: int) -> bytes | None:
        i = bisect.bisect_right(self._starts, start) - 1
        if i < 0:
            return None
        s = self._starts[i]
        data = self._spans[s]
        if s + len(data) >= end:
            return data[start - s : end - s]
        return None

    def _get(self, start: int, end: int) -> bytes:
        with self._lock:
            found = self._covering(start, end)
            if found is not None:
                return found
            # fetch the whole gap, at least CHUNK bytes, merged with what is already there
            lo = start
            hi = min(self._size, max(end, start + CHUNK))
            self._fetch(lo, hi)
            found = self._covering(start, end)
            assert found is not None
            return found

    def _fetch(self, lo: int, hi: int) -> None:
        resp = self._client.get(self._url, byte_range=f"bytes={lo}-{hi - 1}")
        body = resp.body
        if resp.status == 200:  # the server ignored the range: it sent the whole file
            if len(body) != self._size:
                raise IndexUnavailable(f"{self._url}: range request answered with {len(body)} bytes")
            self._store(0, body)
            return
        if resp.status != 206 or len(body) != hi - lo:
            raise IndexUnavailable(
                f"{self._url}: range {lo}-{hi - 1} answered with status {resp.status}, {len(body)} bytes"
            )
        self._store(lo, body)

    def _store(self, lo: int, body: bytes) -> None:
        """Insert a span, merging it with the spans it touches so that lookups need one span."""
        hi = lo + len(body)
        merged_lo, merged_hi = lo, hi
        pieces: list[tuple[int, bytes]] = [(lo, body)]
        for s in list(self._starts):
            data = self._spans[s]
            if s <= hi and s + len(data) >= lo:
                pieces.append((s, data))
                merged_lo = min(merged_lo, s)
                merged_hi = max(merged_hi, s + len(data))
                self._starts.remove(s)
                del self._spans[s]
        buf = bytearray(merged_hi - merged_lo)
        for s, data in [*pieces[1:], pieces[0]]:  # the new body last: it wins
            buf[s - merged_lo : s - merged_lo + len(data)] = data
        bisect.insort(self._starts, merged_lo)
        self._spans[merged_lo] = bytes(buf)


def remote_wheel(client: Client, url: str, size: int) -> zipfile.ZipFile:
    """The wheel at ``url`` as a :class:`zipfile.ZipFile` that fetches what it reads."""
    try:
        return zipfile.ZipFile(cast(IO[bytes], RangeFile(client, url, size)))
    except zipfile.BadZipFile as e:
        raise ValueError(f"{url}: not a readable zip: {e}") from None
