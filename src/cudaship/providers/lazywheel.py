"""A remote wheel read through HTTP range requests, as pip's "lazy wheel" does: only the end of the file
(the zip's central directory, which names every member) and the few members asked for are fetched, so the
file list and METADATA of a 2 GB wheel cost kilobytes.

:class:`RangeFile` is a read-only, seekable file object over a URL whose size is known; the archive layer
reads its central directory like a local file's (:func:`cudaship.archive.zip.file_directory`), and every read
that is not already fetched becomes one range request (at least :data:`CHUNK` bytes, so small reads do not
each cost a round trip).

The remote wheel is input like a local one: every range goes only to the hosts the index allows, all of them
together are capped (:data:`MAX_FETCHED`: a central directory that claims gigabytes is refused, not fetched),
and METADATA is inflated by the archive layer (:func:`cudaship.archive.zip.file_member`: encrypted members,
unknown methods, bombs past the ratio caps and METADATA over its size cap are refused), never by
:mod:`zipfile`'s own reader, whose bzip2 and LZMA paths inflate without a bound.
"""

from __future__ import annotations

import bisect
import hashlib
import io
import threading
from collections.abc import Collection
from typing import IO, cast

from cudaship.archive.zip import SeekableReader, file_directory, file_member
from cudaship.errors import ArchiveError, WheelError
from cudaship.providers.distinfo import from_wheel_names
from cudaship.providers.http import Client, IndexUnavailable
from cudaship.providers.records import Distribution
from cudaship.wheel.metadata import MAX_METADATA_BYTES, find_dist_info

CHUNK = 16 * 1024  #: the smallest range fetched
#: fetched first from the end: the end-of-central-directory record, usually the whole directory and the
#: dist-info members (written last by every wheel builder)
TAIL = 64 * 1024
#: Most bytes fetched from one remote wheel in all (its central directory and METADATA): torch's directory of
#: 13,000 members is 1.5 MB
MAX_FETCHED = 32 << 20


class RangeFile(SeekableReader):
    """Bytes of ``url`` (``size`` long) fetched on demand in ranges; fetched ranges are kept."""

    def __init__(self, client: Client, url: str, size: int, hosts: Collection[str] | None = None) -> None:
        super().__init__()
        self._client = client
        self._url = url
        self._size = size
        self._hosts = hosts
        self.fetched = 0  #: bytes fetched so far, held to :data:`MAX_FETCHED`
        self._pos = 0
        self._starts: list[int] = []  # sorted starts of fetched, non-overlapping spans
        self._spans: dict[int, bytes] = {}
        self._lock = threading.Lock()
        tail = min(size, TAIL)
        if tail:
            self._fetch(size - tail, size)

    # --- io protocol (readable, seekable, tell: SeekableReader) ---------------------------------------------

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
        if self.fetched + (hi - lo) > MAX_FETCHED:
            raise WheelError(
                f"{self._url}: reading its directory and metadata would fetch more than {MAX_FETCHED} bytes"
            )
        resp = self._client.get(
            self._url, byte_range=f"bytes={lo}-{hi - 1}", limit=MAX_FETCHED - self.fetched, hosts=self._hosts
        )
        self.fetched += len(resp.body)
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

    def held(self, start: int, end: int) -> bytes | None:
        """Bytes ``start`` to ``end`` when already fetched (nothing is fetched); else None."""
        with self._lock:
            return self._covering(start, end)

    def whole(self) -> bytes | None:
        """The whole file, when every byte of it has been fetched (a wheel no larger than :data:`TAIL`); else
        None."""
        with self._lock:
            found = self._covering(0, self._size) if self._size else b""
            return found

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


def remote_distribution(
    client: Client,
    url: str,
    size: int,
    filename: str,
    source: str,
    metadata: bytes | None = None,
    hosts: Collection[str] | None = None,
) -> Distribution:
    """The distribution of the wheel at ``url``: its member names from the central directory, its METADATA
    (unless given: PEP 658) through the archive layer. A malformed or hostile wheel raises
    :class:`~cudaship.errors.WheelError`; an index that cannot answer, IndexUnavailable."""
    return remote_wheel(client, url, size, filename, source, metadata, hosts)[0]


def remote_wheel(
    client: Client,
    url: str,
    size: int,
    filename: str,
    source: str,
    metadata: bytes | None = None,
    hosts: Collection[str] | None = None,
    sha256: str | None = None,
) -> tuple[Distribution, bool]:
    """:func:`remote_distribution`, and whether its bytes were verified against ``sha256`` (the index's
    hash): only when the whole file was fetched (a wheel no larger than :data:`TAIL`) can it be; then a
    mismatch is :class:`~cudaship.errors.WheelError`. A larger wheel is read in ranges and stays unverified
    (False): its reading must not be cached under the hash the index claimed for it."""
    raw = RangeFile(client, url, size, hosts)
    verified = False
    if sha256:
        whole = raw.whole()
        if whole is not None:
            if hashlib.sha256(whole).hexdigest() != sha256.lower():
                raise WheelError(f"{url}: sha256 does not match the index's (the file served is another)")
            verified = True
    try:
        members = file_directory(cast(IO[bytes], raw))
    except ArchiveError as e:
        raise WheelError(f"{url}: {e.message}") from None
    names = [m.name for m in members]
    if metadata is None:
        directory = find_dist_info(names, filename)
        wanted = f"{directory}/METADATA"
        member = next((m for m in members if m.name == wanted), None)
        if member is None:
            raise WheelError(f"{wanted} is missing")
        try:
            metadata = file_member(cast(IO[bytes], raw), member, MAX_METADATA_BYTES)
        except ArchiveError as e:
            raise WheelError(e.message) from None
    return from_wheel_names(names, filename, source, metadata), verified
