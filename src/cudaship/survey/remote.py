"""One wheel read for the survey, fetching only what its rows need, and the member cache.

:func:`read_wheel` reads a wheel named by a :class:`~cudaship.survey.records.WheelRef` (``https://``,
``http://`` or ``file://``) in this order (docs/survey.md, "Fetching"):

1. the central directory, by HTTP range requests from the end of the file
   (:class:`~cudaship.providers.lazywheel.RangeFile`, read by :func:`cudaship.archive.zip.file_directory_at`;
   a local file is read in place);
2. the dist-info files the scan reads (METADATA, WHEEL, RECORD, ``symlinks.txt``, ``variant.json``), through
   the archive layer (:func:`cudaship.archive.zip.file_member`);
3. the members the scan would read for the audit, each by its own range: those that may be native (not text by
   name, :func:`cudaship.archive.select.is_text_name`; a member not native by its name is first fetched only
   for its first bytes, and fetched whole only when they say it is a binary) and the Python files and
   library lists the audit's pyloads reads. A member's range runs from its local header to the next member's
   (or the central directory); ranges whose gap is at most :data:`GAP` bytes are fetched as one request.

A range streams into memory when small and into an anonymous temporary file when large
(:class:`cudaship.archive.spill.Sink`), and its members are read by the scan's own per-member reader
(:func:`cudaship.inspection.member.scan_member`: bounded inflation, the RECORD hash computed while the bytes
stream, the native report, the Python loads). Nothing of the wheel stays on disk.

The member cache (:class:`MemberCache`) holds a native member's facts (its
:class:`~cudaship.records.files.FileReport`, as JSON: a cache file is data, never code) under the sha256 this
run computed from the member's bytes; a member whose RECORD entry names a sha256 found there is not fetched.
Every request goes through cudaship's HTTP client (:mod:`cudaship.http`: http(s) only, the hosts allowed, a
per-read timeout and the wheel's deadline, answers capped) and is counted (:attr:`WheelRead.fetched_bytes`).
"""

from __future__ import annotations

import base64
import dataclasses
import hashlib
import json
import os
import urllib.parse
import urllib.request
from collections.abc import Collection, Iterator, Sequence
from contextlib import contextmanager, suppress
from dataclasses import dataclass, field
from pathlib import Path
from typing import IO, Any, cast

from cudaship import __version__
from cudaship.archive.select import MAGIC_BYTES, is_native_member, is_text_name, looks_native
from cudaship.archive.spill import MemoryBudget, Sink
from cudaship.archive.zip import ZipArchive, ZipMember, file_directory_at, file_member, local_member
from cudaship.errors import ArchiveError, CudashipError, WheelError
from cudaship.http import Retry, Unavailable, deadline_in, open_url
from cudaship.inspection.member import MemberResult, scan_member
from cudaship.providers.http import Client
from cudaship.providers.lazywheel import TAIL, RangeFile
from cudaship.records.buffer import Buffer
from cudaship.records.codec import from_json, to_json
from cudaship.records.files import FileReport
from cudaship.safe_write import replace_bytes
from cudaship.survey.records import SurveyOptions, WheelRef
from cudaship.wheel import pyloads
from cudaship.wheel.metadata import (
    MAX_METADATA_BYTES,
    MAX_RECORD_BYTES,
    MAX_SYMLINKS_BYTES,
    SYMLINKS_FILE,
    RecordVerifier,
    b64_digest,
    find_dist_info,
    read_dist_info,
)
from cudaship.wheel.records import DistInfo
from cudaship.wheel.variant import MAX_VARIANT_JSON, VARIANT_JSON

__all__ = ["GAP", "MemberCache", "WheelRead", "read_wheel"]

#: Neighbouring ranges whose gap is at most this many bytes are fetched in one request (the gap's bytes are
#: fetched and dropped). Measured on real wheels (docs/survey.md, "Fetching"): see the numbers there.
GAP = 256 << 10
#: Bytes fetched after a member's local header to learn whether a member not native by its name is a binary
#: (its first :data:`~cudaship.archive.select.MAGIC_BYTES` inflated; a deflate block header is far smaller)
HEAD = 4096
#: Most bytes of one fetched range held in memory; a larger range streams into an anonymous temporary file
SPAN_MEMORY = 64 << 20
#: Most bytes of one member's uncompressed bytes held in memory while it is read (larger: a temporary file)
MEMBER_MEMORY = 256 << 20
#: Retries of a range request the server answered with 408, 429 or 5xx, or that broke off
RANGE_RETRY = Retry(2, 0.5)
#: Bytes received per step of a range's answer
_STEP = 1 << 20

#: The dist-info files the scan reads, with their size caps (as :func:`cudaship.inspection.scan.start`)
DIST_FILES: tuple[tuple[str, int], ...] = (
    ("METADATA", MAX_METADATA_BYTES),
    ("WHEEL", MAX_METADATA_BYTES),
    ("RECORD", MAX_RECORD_BYTES),
    (VARIANT_JSON, MAX_VARIANT_JSON),
    (SYMLINKS_FILE, MAX_SYMLINKS_BYTES),
)

CACHE_VERSION = 1


@dataclass
class WheelRead:
    """What :func:`read_wheel` read of one wheel: the pieces the scan's record is built from."""

    ref: WheelRef
    size: int  #: the wheel file's size
    members: tuple[ZipMember, ...]  #: the central directory's files (directories left out), archive order
    dist_dir: str
    meta: dict[str, bytes]  #: the dist-info files read, by member name
    dist: DistInfo
    verifier: RecordVerifier
    results: list[MemberResult] = field(default_factory=list)  #: every member fetched and read whole
    #: native members whose reports came from the member cache (not fetched), by member name
    cached: dict[str, FileReport] = field(default_factory=dict)
    #: members not read whole (RECORD unverified for them): cached natives, members only whose first bytes
    #: were fetched, every other member
    unfetched: list[str] = field(default_factory=list)
    #: the sha256 (hex) of each native member: computed from its bytes, or RECORD's claim for a cached one
    sha256: dict[str, str] = field(default_factory=dict)
    #: native members whose bytes hash to something other than RECORD's claim: the one-line error
    hash_errors: dict[str, str] = field(default_factory=dict)
    fetched_bytes: int = 0
    requests: int = 0
    cache_reads: int = 0  #: cache entries read (hits)
    cache_writes: int = 0
    cache_failed: int = 0  #: entries that could not be written (the cache full or read-only)
    cache_corrupt: int = 0  #: entries found unreadable (read again from the wheel and written anew)


# --- the member cache -------------------------------------------------------------------------------------


class MemberCache:
    """A native member's facts (its :class:`FileReport`) by the sha256 of its bytes, as JSON files under
    ``root/members/<2 hex>/<64 hex>.json``, written atomically (:func:`cudaship.safe_write.replace_bytes`).
    An entry written by another cudaship version, read without ``details`` when they are wanted, or
    unreadable is absent (the member is read again and the entry written anew)."""

    def __init__(self, root: str | os.PathLike[str]) -> None:
        self.root = Path(root) / "members"

    def path(self, sha256: str) -> Path:
        return self.root / sha256[:2] / f"{sha256}.json"

    def get(self, sha256: str, details: bool) -> tuple[FileReport | None, bool]:
        """The facts stored for ``sha256`` (None when absent), and whether an entry was there but unusable
        (corrupt, another version)."""
        path = self.path(sha256)
        try:
            raw = path.read_bytes()
        except OSError:
            return None, False
        try:
            doc = json.loads(raw)
            if not isinstance(doc, dict) or doc.get("sha256") != sha256:
                raise ValueError("another member's entry")
            if doc.get("version") != CACHE_VERSION or doc.get("cudaship") != __version__:
                return None, True
            if details and not doc.get("details"):
                return None, False
            return from_json(FileReport, doc.get("report")), False
        except (ValueError, TypeError, RecursionError):
            return None, True

    def put(self, sha256: str, report: FileReport, details: bool) -> None:
        doc = {
            "version": CACHE_VERSION,
            "cudaship": __version__,
            "sha256": sha256,
            "details": details,
            "report": to_json(report),
        }
        path = self.path(sha256)
        path.parent.mkdir(parents=True, exist_ok=True)
        replace_bytes(path, json.dumps(doc, separators=(",", ":")).encode("utf-8"), error=WheelError)


# --- where the bytes come from ----------------------------------------------------------------------------


class _Source:
    """A wheel's bytes by ranges: ``size``, a seekable file for the directory and dist-info, and
    :meth:`span` (a range streamed into a :class:`Sink`); counts bytes and requests."""

    size: int
    fetched: int = 0
    requests: int = 0

    def file(self) -> IO[bytes]:
        raise NotImplementedError

    def span(self, lo: int, hi: int) -> Sink:
        raise NotImplementedError

    def close(self) -> None:
        pass

    def counted(self) -> tuple[int, int]:
        return self.fetched, self.requests


class _LocalSource(_Source):
    """A wheel of a local wheelhouse (``file://``): read in place, ranges by ``pread``."""

    def __init__(self, path: str) -> None:
        self._file = open(path, "rb")  # noqa: SIM115 (closed by close())
        self.size = os.fstat(self._file.fileno()).st_size

    def file(self) -> IO[bytes]:
        return self._file

    def span(self, lo: int, hi: int) -> Sink:
        sink = Sink(hi - lo, MemoryBudget(SPAN_MEMORY), spill_size=0)
        try:
            pos = lo
            while pos < hi:
                chunk = os.pread(self._file.fileno(), min(_STEP, hi - pos), pos)
                if not chunk:
                    raise WheelError(f"file ends at {pos} bytes, before {hi}")
                sink.write(chunk)
                pos += len(chunk)
            self.fetched += hi - lo
            self.requests += 1
        except BaseException:
            sink.close()
            raise
        return sink

    def close(self) -> None:
        self._file.close()


class _HttpSource(_Source):
    """A wheel at an http(s) URL: the directory and dist-info through :class:`RangeFile` (its own cap),
    every member range by a request of its own, streamed."""

    def __init__(self, url: str, size: int | None, hosts: Collection[str], deadline: float, seconds: float):
        self.url = url
        self.hosts = hosts
        self.deadline = deadline
        self.client = Client(deadline=seconds)
        self._known = size
        self._raw: RangeFile | None = None

    @property
    def size(self) -> int:  # type: ignore[override]
        if self._known is None:
            self._known = self._size()
        return self._known

    @property
    def raw(self) -> RangeFile:
        """The wheel's bytes through RangeFile, its end fetched on first use (inside :func:`read_wheel`'s
        counting)."""
        if self._raw is None:
            self._raw = RangeFile(self.client, self.url, self.size, self.hosts)
        return self._raw

    def _size(self) -> int:
        """The file's size from a one-byte range's ``Content-Range`` (the index did not give it)."""
        resp = self.client.get(self.url, byte_range="bytes=0-0", limit=1 << 16, hosts=self.hosts)
        total = (resp.content_range or "").rpartition("/")[2]
        if resp.status != 206 or not total.isdigit():
            raise WheelError(f"{self.url}: the server gives no size for a range request (HTTP {resp.status})")
        return int(total)

    def file(self) -> IO[bytes]:
        return cast(IO[bytes], self.raw)

    def counted(self) -> tuple[int, int]:
        return self.fetched + self.client.fetched.bytes, self.requests + self.client.fetched.requests

    def span(self, lo: int, hi: int) -> Sink:
        whole = self.raw.whole()
        if whole is not None:  # the tail was the whole file (a small wheel, or ranges ignored)
            sink = Sink(hi - lo, MemoryBudget(SPAN_MEMORY), spill_size=0)
            sink.write(whole[lo:hi])
            return sink
        # the end of the file was fetched with the directory: only what lies before it is asked for
        tail_lo = max(lo, self.size - TAIL)
        held = self.raw.held(tail_lo, hi) if hi > tail_lo else None
        ask = tail_lo if held is not None else hi
        if ask == lo and held is not None:
            sink = Sink(hi - lo, MemoryBudget(SPAN_MEMORY), spill_size=0)
            sink.write(held)
            return sink
        sink = RANGE_RETRY.run(lambda: self._attempt(lo, ask, hi - lo), deadline=self.deadline)
        if held is not None:
            try:
                sink.write(held)
            except BaseException:
                sink.close()
                raise
        return sink

    def _attempt(self, lo: int, hi: int, total: int) -> Sink:
        """Bytes ``lo`` to ``hi`` by one request, into a sink of ``total`` bytes (the rest: the caller)."""
        sink = Sink(total, MemoryBudget(SPAN_MEMORY), spill_size=0)
        try:
            self.requests += 1
            with open_url(
                self.url,
                headers={"Range": f"bytes={lo}-{hi - 1}"},
                hosts=self.hosts,
                timeout=self.client.timeout,
                deadline=self.deadline,
            ) as stream:
                if stream.status != 206 or not (stream.content_range or "").startswith(f"bytes {lo}-"):
                    raise Unavailable(
                        f"{self.url}: range {lo}-{hi - 1} answered with HTTP {stream.status} "
                        f"({stream.content_range or 'no Content-Range'})",
                        transient=False,
                    )
                received = 0
                try:
                    for chunk in stream.chunks(hi - lo):
                        received += len(chunk)
                        sink.write(chunk)
                finally:
                    self.fetched += received
                if received != hi - lo:
                    raise Unavailable(f"{self.url}: range {lo}-{hi - 1} cut short at {received} bytes")
        except BaseException:
            sink.close()
            raise
        return sink


def _open(ref: WheelRef, options: SurveyOptions, deadline: float) -> _Source:
    parts = urllib.parse.urlsplit(ref.url)
    if parts.scheme == "file":
        if parts.netloc not in ("", "localhost"):
            raise WheelError(f"{ref.url}: a file URL on another host ({parts.netloc})")
        return _LocalSource(urllib.request.url2pathname(parts.path))
    hosts = options.hosts if options.hosts is not None else ((parts.hostname or "").lower(),)
    return _HttpSource(ref.url, ref.size, hosts, deadline, options.deadline_s)


# --- reading ----------------------------------------------------------------------------------------------


@dataclass(frozen=True)
class _Span:
    lo: int
    hi: int
    members: tuple[tuple[ZipMember, int], ...]  #: (member, end of its range): the members it covers


def ranges(members: Sequence[tuple[ZipMember, int]], gap: int, head: bool = False) -> list[_Span]:
    """The requests for ``members`` (each with the end of its range), sorted by offset, neighbours whose gap
    is at most ``gap`` merged; ``head``: only each member's first bytes (:data:`HEAD` past its name)."""
    spans: list[_Span] = []
    for member, end in sorted(members, key=lambda pair: pair[0].header_offset):
        lo = member.header_offset
        hi = min(end, lo + 30 + len(member.name.encode()) + HEAD) if head else end
        if spans and lo - spans[-1].hi <= gap:
            last = spans[-1]
            spans[-1] = _Span(last.lo, max(last.hi, hi), (*last.members, (member, end)))
        else:
            spans.append(_Span(lo, hi, ((member, end),)))
    return spans


def wanted_python(member: ZipMember) -> bool:
    """A member the audit's pyloads reads: a Python file or a list of library names, small enough to be
    read (:data:`cudaship.wheel.pyloads.MAX_SOURCE`, :data:`~cudaship.wheel.pyloads.MAX_LIST`)."""
    if pyloads.is_python_source(member.name):
        return member.size <= pyloads.MAX_SOURCE
    return pyloads.is_library_list(member.name) and member.size <= pyloads.MAX_LIST


def read_wheel(ref: WheelRef, options: SurveyOptions, *, gap: int = GAP) -> WheelRead:
    """Read ``ref`` as the module says. Raises :class:`~cudaship.errors.CudashipError` (one line) when the
    wheel cannot be read at all: not reachable, not a zip, no dist-info, a range the server will not give;
    its ``fetched_bytes`` attribute counts the bytes received before that (0 when none)."""
    deadline = deadline_in(options.deadline_s)
    source = _open(ref, options, deadline)
    try:
        return _read(ref, options, source, gap)
    except CudashipError as e:
        e.fetched_bytes = source.counted()[0]  # type: ignore[attr-defined]
        raise
    finally:
        source.close()


def _read(ref: WheelRef, options: SurveyOptions, source: _Source, gap: int) -> WheelRead:
    label = ref.filename
    try:
        listed, directory_start = file_directory_at(source.file())
    except ArchiveError as e:
        raise WheelError(e.message) from None
    members = tuple(m for m in listed if not m.is_dir)
    seen: set[str] = set()
    for m in members:
        if m.name in seen:
            raise WheelError(f"member {m.name} appears twice in the archive")
        seen.add(m.name)
    dist_dir = find_dist_info([m.name for m in members], ref.filename)
    meta: dict[str, bytes] = {}
    by_name = {m.name: m for m in members}
    try:
        for leaf, limit in DIST_FILES:
            member = by_name.get(f"{dist_dir}/{leaf}")
            if member is not None:
                meta[member.name] = file_member(source.file(), member, limit)
    except ArchiveError as e:
        raise WheelError(f"cannot read .dist-info: {e.message}") from None
    dist = read_dist_info(dist_dir, meta, ref.filename)
    verifier = RecordVerifier(dist.record)
    read = WheelRead(ref, source.size, members, dist_dir, meta, dist, verifier)
    for name, data in meta.items():
        algorithm = verifier.algorithm_for(name)
        read.results.append(
            MemberResult(name, len(data), hashlib.new(algorithm, data).digest(), algorithm, None, None)
        )

    # where each member's bytes end: the next local header, else the central directory
    starts = sorted({m.header_offset for m in listed})
    if len(starts) != len(listed):
        raise WheelError("two members share one local header (overlapped entries: a zip bomb?)")
    end_of_data = directory_start if directory_start is not None else source.size
    ends = {start: following for start, following in zip(starts, [*starts[1:], end_of_data], strict=True)}

    cache = MemberCache(options.cache_dir)
    claims = {e.path: e for e in dist.record}
    whole: list[tuple[ZipMember, int]] = []
    heads: list[tuple[ZipMember, int]] = []
    for m in members:
        if m.name in meta:
            continue
        end = ends[m.header_offset]
        if m.size != 0 and not is_text_name(m.name):
            claim = claims.get(m.name)
            if claim is not None and claim.algorithm == "sha256" and claim.digest:
                hexed = _hex(claim.digest)
                if hexed is not None:
                    found, corrupt = cache.get(hexed, options.details)
                    read.cache_corrupt += corrupt
                    if found is not None:
                        read.cached[m.name] = dataclasses.replace(found, path=m.name, container=label)
                        read.sha256[m.name] = hexed
                        read.cache_reads += 1
                        continue
            (whole if looks_native(m.name, b"") else heads).append((m, end))
        elif wanted_python(m):
            whole.append((m, end))

    done: set[str] = set(meta)
    member_budget = MemoryBudget(MEMBER_MEMORY)
    # round 1: whole members (native by name, Python files) and the heads of the others
    later: list[tuple[ZipMember, int]] = []
    named = {m.name for m, _ in whole}
    for span in _merge(ranges(whole, gap), ranges(heads, gap, head=True), gap):
        with _fetched(source, span) as buf:
            for member, end in span.members:
                local = local_member(buf, member, span.lo)
                covered = span.lo + len(buf) >= end
                if covered or member.name in named:
                    _read_member(read, buf, local, end - span.lo, label, options, member_budget, cache)
                    done.add(member.name)
                    continue
                head = _head(buf, local)
                if head is None or is_native_member(member.name, head):
                    later.append((member, end))
    # round 2: the members whose first bytes say they are binaries
    for span in ranges(later, gap):
        with _fetched(source, span) as buf:
            for member, end in span.members:
                local = local_member(buf, member, span.lo)
                _read_member(read, buf, local, end - span.lo, label, options, member_budget, cache)
                done.add(member.name)
    read.unfetched = sorted(m.name for m in members if m.name not in done)
    read.fetched_bytes, read.requests = source.counted()
    return read


def _merge(a: list[_Span], b: list[_Span], gap: int) -> list[_Span]:
    """Two sorted lists of spans as one, neighbours within ``gap`` merged (a whole member beside a head)."""
    out: list[_Span] = []
    for span in sorted([*a, *b], key=lambda s: s.lo):
        if out and span.lo - out[-1].hi <= gap:
            last = out[-1]
            out[-1] = _Span(last.lo, max(last.hi, span.hi), (*last.members, *span.members))
        else:
            out.append(span)
    return out


@contextmanager
def _fetched(source: _Source, span: _Span) -> Iterator[Buffer]:
    sink = source.span(span.lo, span.hi)
    try:
        buf = sink.buffer()
        try:
            yield buf
        finally:
            if isinstance(buf, memoryview):
                with suppress(BufferError):
                    buf.release()
    finally:
        sink.close()


def _head(buf: Buffer, local: ZipMember) -> bytes | None:
    """The first bytes of a member whose range was fetched only in part; None when they cannot be told from
    what was fetched (the whole member is fetched then)."""
    if local.problem is not None:
        return None
    try:
        head = ZipArchive(buf, members=(local,)).head(local, MAGIC_BYTES)
    except ArchiveError:
        return None
    return head if len(head) >= min(MAGIC_BYTES, local.size) else None


def _read_member(
    read: WheelRead,
    buf: Buffer,
    local: ZipMember,
    end: int,
    label: str,
    options: SurveyOptions,
    budget: MemoryBudget,
    cache: MemberCache,
) -> None:
    """One member read whole from its fetched range (``end``: where its range ends in ``buf``) by the
    scan's reader; a native one's facts cached under the sha256 computed from its bytes, unless RECORD
    claims another."""
    if local.problem is None and local.data_offset + local.compressed_size > min(end, len(buf)):
        local = local._replace(problem="data runs past the next member (truncated or overlapped?)")
    algorithm = read.verifier.algorithm_for(local.name)
    archive = ZipArchive(buf, members=(local,))
    result = scan_member(archive, local, budget, None, label, algorithm, options.details)
    read.results.append(result)
    report = result.report
    if report is None or result.digest is None:
        return
    if algorithm != "sha256":
        return
    computed = result.digest.hex()
    read.sha256[local.name] = computed
    claim = next((e for e in read.dist.record if e.path == local.name), None)
    if claim is not None and claim.digest and claim.digest != b64_digest(result.digest):
        read.hash_errors[local.name] = (
            f"sha256 of the bytes read is {computed}, RECORD claims {_hex(claim.digest) or claim.digest}: "
            "not cached"
        )
        return
    if report.error is not None:
        return  # a member the readers could not read is read again next time
    try:
        cache.put(computed, report, options.details)
    except (WheelError, OSError):  # a cache that cannot be written (full, read-only) costs speed only
        read.cache_failed += 1
        return
    read.cache_writes += 1


def _hex(digest: str) -> str | None:
    """RECORD's urlsafe-base64 sha256 as hex; None when it is not one."""
    try:
        raw = base64.urlsafe_b64decode(digest + "=" * (-len(digest) % 4))
    except (ValueError, TypeError):
        return None
    return raw.hex() if len(raw) == 32 else None


def describe(read: WheelRead) -> dict[str, Any]:
    """Counts of one read, for logs and benchmarks."""
    return {
        "size": read.size,
        "fetched_bytes": read.fetched_bytes,
        "requests": read.requests,
        "read": len(read.results),
        "cached": len(read.cached),
        "unfetched": len(read.unfetched),
    }
