"""One pass over a wheel for the audit: every member decompressed once, hashed for RECORD, and the native
ones read into :class:`FileReport` records while their bytes are at hand.

Members are spread over worker threads (zlib inflation and hashing release the GIL, so two cores overlap the
decompression of two members). A native member's bytes go to memory when small and to an anonymous temporary
file, mapped, when large, so peak memory stays bounded whatever the wheel's size. Members are handed out
largest
first so the cores finish together.
"""

from __future__ import annotations

import hashlib
import itertools
import mmap
import os
import queue
import struct
import tempfile
import threading
import zipfile
import zlib
from collections.abc import Iterator
from concurrent.futures import ThreadPoolExecutor
from contextlib import suppress
from dataclasses import dataclass, replace
from pathlib import Path
from typing import IO

from cudaship.binary.records import Buffer, DeviceCode, DeviceCodeKind
from cudaship.errors import CudashipError, WheelError
from cudaship.inspection.records import ContainerKind, FileReport
from cudaship.wheel.archive import (
    MAGIC_BYTES,
    MAX_MEMBER_SIZE,
    MAX_RATIO,
    RATIO_FLOOR,
    ZIP_OPEN_ERRORS,
    ZIP_READ_ERRORS,
    is_native_member,
    zip_open_problem,
)
from cudaship.wheel.metadata import (
    DistInfo,
    RecordProblem,
    RecordVerifier,
    TargetPlatform,
    b64_digest,
    find_dist_info,
    read_dist_info,
)

#: errors raised by a corrupt deflate stream
_INFLATE_ERRORS: tuple[type[BaseException], ...] = (zlib.error,)
try:  # ISA-L inflates about twice as fast as zlib; same API and results
    from isal import isal_zlib
    from isal.isal_zlib import decompressobj as _decompressobj

    _isal_error: object = getattr(isal_zlib, "error", None)
    if isinstance(_isal_error, type) and issubclass(_isal_error, BaseException):
        _INFLATE_ERRORS = (zlib.error, _isal_error)
except ImportError:  # pragma: no cover - platforms without an isal wheel
    from zlib import decompressobj as _decompressobj  # type: ignore[assignment]

#: what reading one member may raise besides WheelError; each becomes that member's one-line problem
_MEMBER_ERRORS: tuple[type[BaseException], ...] = (*ZIP_READ_ERRORS, *_INFLATE_ERRORS)

#: Decompressed native members held in memory at once (all workers together); a member that does not fit
#: waits for others to finish, and one larger than this goes to a temporary file, mapped.
MEMORY_BUDGET = 640 << 20
#: A native member from this size on that does not fit in the memory budget at the moment goes to a
#: temporary file, mapped, instead of waiting for memory (smaller ones wait: they do not wait long).
_SPILL_SIZE = 64 << 20
#: Members from this size on are hashed on a helper thread while the next chunks are inflated.
_THREADED_HASH = 8 << 20
_CHUNK = 1 << 20
#: Members from this size on are unpacked into populated anonymous memory (see :func:`_memory`).
_POPULATE_SIZE = 8 << 20
#: Largest dist-info file (METADATA, WHEEL, RECORD) read.
_META_LIMIT = 64 << 20


@dataclass(frozen=True)
class MemberFacts:
    name: str
    size: int  #: uncompressed size as streamed
    compressed_size: int


@dataclass(frozen=True)
class ScannedWheel:
    """Everything one pass over a wheel produced."""

    path: str
    filename: str
    dist: DistInfo
    members: tuple[MemberFacts, ...]
    reports: dict[str, FileReport]  #: native members by path inside the wheel
    record_problems: tuple[RecordProblem, ...]
    unreadable: tuple[
        tuple[str, str], ...
    ]  #: (member, one-line reason) for members that could not be streamed
    #: a program read as a container (see :mod:`cudaship.checks.programscan`): its kind, where it runs, and
    #: the CUDA train its code names; ``dist`` is then empty
    kind: ContainerKind = ContainerKind.WHEEL
    program_platform: TargetPlatform | None = None
    program_train: str | None = None
    train_evidence: str | None = None
    program_notes: tuple[str, ...] = ()

    @property
    def uncompressed_size(self) -> int:
        return sum(m.size for m in self.members)


class ScanObserver:
    """Progress hooks (do nothing by default)."""

    def planned(self, total_bytes: int) -> None:
        """Called once with the sum of compressed member sizes."""

    def advanced(self, nbytes: int) -> None:
        """Another member of ``nbytes`` compressed bytes is done."""


@dataclass
class _Result:
    name: str
    size: int
    digest: str | None
    algorithm: str
    report: FileReport | None
    error: str | None


def _check_bomb(info: zipfile.ZipInfo) -> str | None:
    if info.file_size > MAX_MEMBER_SIZE:
        return f"declares {info.file_size} bytes, over the {MAX_MEMBER_SIZE} byte limit (zip bomb?)"
    if info.file_size > RATIO_FLOOR and info.file_size > MAX_RATIO * max(info.compress_size, 1):
        return f"compression ratio over {MAX_RATIO}:1 (zip bomb?)"
    return None


class _Budget:
    """Bytes of decompressed members held in memory at once, across worker threads."""

    def __init__(self, limit: int) -> None:
        self.limit = limit
        self.used = 0
        self._cond = threading.Condition()

    def acquire(self, n: int, *, wait: bool = True) -> bool:
        """Reserve ``n`` bytes, waiting for other members to finish (unless ``wait`` is False); False when
        ``n`` can never fit, or does not fit now and ``wait`` is False."""
        if n > self.limit:
            return False
        with self._cond:
            while self.used + n > self.limit:
                if not wait:
                    return False
                self._cond.wait()
            self.used += n
        return True

    def release(self, n: int) -> None:
        with self._cond:
            self.used -= n
            self._cond.notify_all()


def _memory(size: int) -> bytearray | mmap.mmap:
    """Memory for a member's bytes. On Linux, for a large member, an anonymous private map populated in one
    call (``MAP_POPULATE``): a third less CPU than a bytearray whose pages fault in one by one (0.2 s vs
    0.3 s for a 545 MB library)."""
    populate = getattr(mmap, "MAP_POPULATE", None)
    if size >= _POPULATE_SIZE and populate is not None:
        try:
            return mmap.mmap(-1, size, flags=mmap.MAP_PRIVATE | mmap.MAP_ANONYMOUS | populate)
        except (OSError, ValueError, OverflowError):  # pragma: no cover - the bytearray will say why
            pass
    return bytearray(size)


class _Sink:
    """Where a native member's bytes go: a preallocated buffer within the memory budget, else a temp file."""

    def __init__(self, size: int, budget: _Budget) -> None:
        self.size = size
        self.budget = budget
        # A large member that does not fit now goes to a temporary file rather than waiting: two large
        # libraries (a wheel's .so and .dll) then unpack on two cores at once instead of one after the other
        # (audit of the benchmark wheel 3.1-3.4 s instead of 4.5-5.0 s; peak RSS 830 MB instead of 660 MB).
        self.reserved = size if size and budget.acquire(size, wait=size < _SPILL_SIZE) else 0
        self.memory: bytearray | mmap.mmap | None = _memory(size) if self.reserved or not size else None
        self.file: IO[bytes] | None = None
        if self.memory is None:
            self.file = tempfile.TemporaryFile(prefix="cudaship-audit-")  # noqa: SIM115 - closed in close()
        self.pos = 0
        self.map: mmap.mmap | None = None

    def write(self, chunk: bytes) -> None:
        end = self.pos + len(chunk)
        if self.memory is not None:
            self.memory[self.pos : end] = chunk
        else:
            assert self.file is not None
            self.file.write(chunk)
        self.pos = end

    def buffer(self) -> Buffer:
        if self.memory is not None:
            return memoryview(self.memory)[: self.pos]
        assert self.file is not None
        self.file.flush()
        if self.pos == 0:
            return b""
        self.map = mmap.mmap(self.file.fileno(), 0, access=mmap.ACCESS_READ)
        return self.map

    def close(self) -> None:
        if self.map is not None:
            with suppress(BufferError):  # a view outlived the report; the map goes when it does
                self.map.close()
        if self.file is not None:
            self.file.close()
        if isinstance(self.memory, mmap.mmap):
            with suppress(BufferError):  # a view outlived the report; the map goes when it does
                self.memory.close()
        self.memory = None
        if self.reserved:
            self.budget.release(self.reserved)
            self.reserved = 0


class _Hasher:
    """Hashes chunks on a helper thread while the caller decompresses the next ones (both release the GIL)."""

    def __init__(self, algorithm: str, threaded: bool) -> None:
        self.hash = hashlib.new(algorithm)
        self._queue: queue.Queue[bytes | None] | None = None
        self._thread: threading.Thread | None = None
        if threaded:
            self._queue = queue.Queue(maxsize=16)
            self._thread = threading.Thread(target=self._loop, name="cudaship-hash", daemon=True)
            self._thread.start()

    def _loop(self) -> None:
        assert self._queue is not None
        while True:
            chunk = self._queue.get()
            if chunk is None:
                return
            self.hash.update(chunk)

    def update(self, chunk: bytes) -> None:
        if self._queue is not None:
            self._queue.put(chunk)
        else:
            self.hash.update(chunk)

    def digest(self) -> str:
        self.finish()
        return b64_digest(self.hash.digest())

    def finish(self) -> None:
        if self._queue is not None and self._thread is not None:
            self._queue.put(None)
            self._thread.join()
            self._queue = None


_LOCAL = struct.Struct("<4sHHHHHIIIHH")


def _chunks(fp: IO[bytes], zf: zipfile.ZipFile, info: zipfile.ZipInfo) -> Iterator[bytes]:
    """The member's uncompressed bytes in chunks of at most 1 MiB, never more than it declares.

    Stored and deflated members are read straight from the archive (raw zlib, no CRC: the RECORD hash is the
    stronger check); other methods go through :mod:`zipfile`.
    """
    if info.compress_type not in (zipfile.ZIP_STORED, zipfile.ZIP_DEFLATED) or info.flag_bits & 0x1:
        with zf.open(info) as src:
            while chunk := src.read(_CHUNK):
                yield chunk
        return
    fp.seek(info.header_offset)
    header = fp.read(_LOCAL.size)
    if len(header) != _LOCAL.size or header[:4] != b"PK\x03\x04":
        raise WheelError("bad local file header")
    fields = _LOCAL.unpack(header)
    fp.seek(info.header_offset + _LOCAL.size + fields[9] + fields[10])
    left = info.compress_size
    if info.compress_type == zipfile.ZIP_STORED:
        while left:
            chunk = fp.read(min(left, _CHUNK))
            if not chunk:
                raise WheelError("data ends early (truncated wheel?)")
            left -= len(chunk)
            yield chunk
        return
    inflater = _decompressobj(-15)
    data = b""
    while not inflater.eof:
        if not data:
            if not left:
                raise WheelError("compressed data ends early (truncated wheel?)")
            data = fp.read(min(left, _CHUNK))
            if not data:
                raise WheelError("data ends early (truncated wheel?)")
            left -= len(data)
        out = inflater.decompress(data, _CHUNK)
        data = inflater.unconsumed_tail
        if out:
            yield out


def _with_toolkit_versions(buf: Buffer, report: FileReport) -> FileReport:
    """Fill in the toolkit version of one SASS entry per arch (decompressing a sample, not every cubin)."""
    from cudaship.binary.cubin import entry_details

    sampled: dict[str, DeviceCode] = {}
    for entry in report.device_code:
        if entry.kind is DeviceCodeKind.SASS and entry.toolkit_version is None and entry.arch not in sampled:
            try:
                sampled[entry.arch] = entry_details(buf, entry)
            except CudashipError:
                continue
    if not sampled:
        return report
    by_offset = {e.offset: e for e in sampled.values()}
    code = tuple(by_offset.get(e.offset, e) for e in report.device_code)
    containers = tuple(
        replace(c, entries=tuple(by_offset.get(e.offset, e) for e in c.entries)) for c in report.containers
    )
    return replace(report, device_code=code, containers=containers)


def _scan_member(
    path: str,
    zf: zipfile.ZipFile,
    fp: IO[bytes],
    info: zipfile.ZipInfo,
    algorithm: str,
    budget: _Budget,
    details: bool,
) -> _Result:
    from cudaship.inspection.dispatch import inspect_buffer

    name = info.filename
    bomb = _check_bomb(info)
    if bomb is not None:
        return _Result(name, info.file_size, None, algorithm, None, bomb)
    hasher = _Hasher(algorithm, threaded=info.file_size >= _THREADED_HASH)
    size = 0
    report: FileReport | None = None
    sink: _Sink | None = None
    try:
        chunks = _chunks(fp, zf, info)
        first = next(chunks, b"")
        if is_native_member(name, first[:MAGIC_BYTES]):
            sink = _Sink(info.file_size, budget)
        for chunk in itertools.chain((first,), chunks):
            size += len(chunk)
            if size > info.file_size:
                raise WheelError(f"more data than the declared {info.file_size} bytes")
            hasher.update(chunk)
            if sink is not None:
                sink.write(chunk)
        if size != info.file_size:
            raise WheelError(f"{size} bytes unpacked, the archive declares {info.file_size}")
        digest = hasher.digest()
        if sink is not None:
            buf = sink.buffer()
            report = inspect_buffer(buf, name, container=path)
            if details and report.device_code and report.error is None:
                report = _with_toolkit_versions(buf, report)
            if isinstance(buf, memoryview):
                buf.release()
    except WheelError as e:
        return _Result(name, size, None, algorithm, None, e.message)
    except _MEMBER_ERRORS as e:
        first_line = (str(e).strip().splitlines() or [""])[0]
        return _Result(name, size, None, algorithm, None, f"{type(e).__name__}: {first_line}".rstrip(": "))
    finally:
        hasher.finish()
        if sink is not None:
            sink.close()
    return _Result(name, size, digest, algorithm, report, None)


def scan_wheel(
    path: str | os.PathLike[str],
    *,
    workers: int | None = None,
    details: bool = True,
    observer: ScanObserver | None = None,
) -> ScannedWheel:
    """Read the wheel at ``path`` once: dist-info, every member hashed, native members inspected."""
    label = str(path)
    hooks = observer or ScanObserver()
    try:
        zf = zipfile.ZipFile(path)
    except FileNotFoundError:
        raise WheelError("no such file", path=label) from None
    except ZIP_OPEN_ERRORS as e:
        raise WheelError(f"not a readable zip archive: {zip_open_problem(e, path)}", path=label) from None
    with zf:
        infos = [i for i in zf.infolist() if not i.filename.endswith("/")]  # is_dir() fails on ""
        names = [i.filename for i in infos]
        seen: set[str] = set()
        for n in names:
            if n in seen:
                raise WheelError(f"member {n} appears twice in the archive", path=label)
            seen.add(n)
        try:
            dist_dir = find_dist_info(names, Path(label).name)
            meta: dict[str, bytes] = {}
            for leaf in ("METADATA", "WHEEL", "RECORD"):
                member = f"{dist_dir}/{leaf}"
                if member in seen:
                    info = zf.getinfo(member)
                    if info.file_size > _META_LIMIT:
                        raise WheelError(f"{member} is {info.file_size} bytes, too large")
                    meta[member] = zf.read(member)
            dist = read_dist_info(dist_dir, meta)
        except WheelError as e:
            raise e.with_path(label) from None
        except ZIP_READ_ERRORS as e:
            raise WheelError(f"cannot read .dist-info: {type(e).__name__}: {e}", path=label) from None

    verifier = RecordVerifier(dist.record)
    hooks.planned(sum(i.compress_size for i in infos))
    # the dist-info files were read above: hash them now rather than reading them a second time
    done: list[_Result] = []
    for member, data in meta.items():
        algorithm = verifier.algorithm_for(member)
        digest = b64_digest(hashlib.new(algorithm, data).digest())
        done.append(_Result(member, len(data), digest, algorithm, None, None))
        hooks.advanced(zf.getinfo(member).compress_size)
    order = sorted((i for i in infos if i.filename not in meta), key=lambda i: i.compress_size, reverse=True)
    total = sum(i.file_size for i in infos)
    n_workers = workers if workers is not None else min(4, os.cpu_count() or 1)
    if total < (8 << 20) or len(order) < 2:
        n_workers = 1
    results = done + _run(label, order, verifier, n_workers, details, hooks)

    reports: dict[str, FileReport] = {}
    unreadable: list[tuple[str, str]] = []
    sizes: dict[str, int] = {}
    for res in results:
        sizes[res.name] = res.size
        if res.error is not None:
            unreadable.append((res.name, res.error))
            verifier.unverified(res.name)
            continue
        assert res.digest is not None
        verifier.observe(res.name, res.algorithm, res.digest, res.size)
        if res.report is not None:
            reports[res.name] = res.report
    members = tuple(
        MemberFacts(i.filename, sizes.get(i.filename, i.file_size), i.compress_size) for i in infos
    )
    return ScannedWheel(
        path=label,
        filename=Path(label).name,
        dist=dist,
        members=members,
        reports=dict(sorted(reports.items())),
        record_problems=verifier.problems(),
        unreadable=tuple(sorted(unreadable)),
    )


def _run(
    label: str,
    order: list[zipfile.ZipInfo],
    verifier: RecordVerifier,
    n_workers: int,
    details: bool,
    hooks: ScanObserver,
) -> list[_Result]:
    budget = _Budget(MEMORY_BUDGET)
    local = threading.local()
    opened: list[tuple[zipfile.ZipFile, IO[bytes]]] = []
    lock = threading.Lock()

    def work(info: zipfile.ZipInfo) -> _Result:
        handles = getattr(local, "handles", None)
        if handles is None:
            fp = open(label, "rb")  # noqa: SIM115 - closed below, after the pool
            handles = (zipfile.ZipFile(fp), fp)
            local.handles = handles
            with lock:
                opened.append(handles)
        zf, fp = handles
        result = _scan_member(label, zf, fp, info, verifier.algorithm_for(info.filename), budget, details)
        hooks.advanced(info.compress_size)
        return result

    try:
        if n_workers <= 1:
            return [work(info) for info in order]
        with ThreadPoolExecutor(max_workers=n_workers, thread_name_prefix="cudaship-audit") as pool:
            return list(pool.map(work, order))
    finally:
        for zf, fp in opened:
            zf.close()
            fp.close()
