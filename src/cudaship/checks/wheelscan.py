"""One pass over a wheel for the audit: every member decompressed once, hashed for RECORD, and the native
ones read into :class:`FileReport` records while their bytes are at hand.

The zip mechanics are the archive layer's (:mod:`cudaship.archive`: local headers, overlap refusal, bounded
inflation for every method, budgets, spill); turning a member into a report is inspect's
(:func:`cudaship.inspection.wheel.member_report`), so inspect and audit read wheels identically. Members are
spread over the command's workers (:mod:`cudaship.archive.pool`; inflation and hashing release the GIL,
so the cores overlap the decompression of several members, of one wheel or of several). A native member's
bytes go to memory when they fit the workers' shared budget and to an anonymous temporary file, mapped,
otherwise, so peak memory stays bounded whatever the wheel's size. Members are handed out largest first so
the cores finish together.
"""

from __future__ import annotations

import hashlib
import itertools
import os
from collections.abc import Callable
from contextlib import suppress
from dataclasses import dataclass
from pathlib import Path

from cudaship.archive.pool import (
    SPILL_SIZE,
    WORKER_DIED,
    ArchiveRef,
    CompressedPages,
    WorkerBudget,
    Workers,
    shared_archive,
    worker_count,
)
from cudaship.archive.select import MAGIC_BYTES, is_native_member
from cudaship.archive.spill import Budget, Hasher, Sink, released
from cudaship.archive.zip import ZipArchive, ZipFile, ZipMember
from cudaship.errors import ArchiveError, WheelError
from cudaship.records.files import ContainerKind, FileReport
from cudaship.records.platform import TargetPlatform
from cudaship.wheel import pyloads
from cudaship.wheel.metadata import (
    MAX_METADATA_BYTES,
    MAX_RECORD_BYTES,
    RecordVerifier,
    b64_digest,
    find_dist_info,
    read_dist_info,
)
from cudaship.wheel.records import DistInfo, LibraryList, PythonLoads, RecordProblem

#: Members from this size on are hashed on a helper thread while the next chunks are inflated.
_THREADED_HASH = 8 << 20


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
    #: the package's Python files that load native libraries themselves (ctypes.CDLL, add_dll_directory,
    #: a helper), and shipped lists of library names (see :mod:`cudaship.wheel.pyloads`)
    python_loads: tuple[PythonLoads, ...] = ()
    library_lists: tuple[LibraryList, ...] = ()

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
    loads: PythonLoads | LibraryList | None = None


def _scan_member(
    path: str,
    archive: ZipArchive,
    member: ZipMember,
    algorithm: str,
    budget: Budget,
    details: bool,
) -> _Result:
    from cudaship.inspection.wheel import member_report

    name = member.name
    report: FileReport | None = None
    whole = archive.small(member)
    if whole is not None:  # thousands of small members: one step each (a bad one goes the long way below)
        if is_native_member(name, whole[:MAGIC_BYTES]):
            with released(memoryview(whole)) as view:
                report = member_report(view, name, container=path, toolkit_sample=details)
        digest = b64_digest(hashlib.new(algorithm, whole).digest())
        loads: PythonLoads | LibraryList | None = None
        if report is None:
            if pyloads.is_python_source(name):
                loads = pyloads.python_loads(name, whole)
            elif pyloads.is_library_list(name):
                loads = pyloads.library_list(name, whole)
        return _Result(name, len(whole), digest, algorithm, report, None, loads)
    hasher: Hasher | None = None
    size = 0
    sink: Sink | None = None
    try:
        archive.check(member)
        hasher = Hasher(algorithm, threaded=member.size >= _THREADED_HASH)
        chunks = archive.chunks(member, verify_crc=False)  # the RECORD hash is the stronger check
        first = next(chunks, b"")
        if is_native_member(name, first[:MAGIC_BYTES]):
            sink = Sink(member.size, budget, spill_size=SPILL_SIZE)
        pages = CompressedPages(archive.buf, member.data_offset, member.compressed_size, member.size)
        for chunk in itertools.chain((first,), chunks):
            size += len(chunk)
            hasher.update(chunk)
            if sink is not None:
                sink.write(chunk)
            pages.produced(len(chunk))
        pages.finished()
        digest = b64_digest(hasher.digest())
        if sink is not None:
            buf = sink.buffer()
            report = member_report(buf, name, container=path, toolkit_sample=details)
            if isinstance(buf, memoryview):
                # a view still exported (a search's ctypes buffer awaiting garbage collection) keeps the
                # memory alive until it goes; never an error (it was an intermittent exit 70)
                with suppress(BufferError):
                    buf.release()
    except ArchiveError as e:
        return _Result(name, size, None, algorithm, None, e.message.removeprefix(f"member {name}: "))
    finally:
        if hasher is not None:
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
    pool: Workers | None = None,
    on_dist: Callable[[DistInfo, str], None] | None = None,
) -> ScannedWheel:
    """Read the wheel at ``path`` once: dist-info, every member hashed, native members inspected.

    Members are read on ``pool`` when given (shared with other wheels read at the same time), else on
    ``workers`` threads of its own (default: the usable CPUs, at most 4). ``on_dist`` is called with the
    dist-info and the file name as soon as they are read, before any member is: work that needs only them
    (the requirements' resolution) can start then and overlap the members' reading."""
    label = str(path)
    hooks = observer or ScanObserver()
    try:
        opened = ZipFile(path)
    except ArchiveError as e:
        raise WheelError(e.message, path=label) from None
    with opened as archive:
        try:
            ref: ArchiveRef | None = ArchiveRef.of(path, opened.fileno())
        except OSError:
            ref = None
        return _scan(label, archive, workers, details, hooks, pool, ref, on_dist)


def _scan(
    label: str,
    archive: ZipArchive,
    workers: int | None,
    details: bool,
    hooks: ScanObserver,
    pool: Workers | None,
    ref: ArchiveRef | None = None,
    on_dist: Callable[[DistInfo, str], None] | None = None,
) -> ScannedWheel:
    infos = archive.files()
    names = [i.name for i in infos]
    seen: set[str] = set()
    for n in names:
        if n in seen:
            raise WheelError(f"member {n} appears twice in the archive", path=label)
        seen.add(n)
    meta: dict[str, bytes] = {}
    try:
        dist_dir = find_dist_info(names, Path(label).name)
        for leaf, limit in (
            ("METADATA", MAX_METADATA_BYTES),
            ("WHEEL", MAX_METADATA_BYTES),
            ("RECORD", MAX_RECORD_BYTES),
        ):
            member = archive.get(f"{dist_dir}/{leaf}")
            if member is not None:
                meta[member.name] = archive.read(member, limit)
        dist = read_dist_info(dist_dir, meta)
    except WheelError as e:
        raise e.with_path(label) from None
    except ArchiveError as e:
        raise WheelError(f"cannot read .dist-info: {e.message}", path=label) from None
    if on_dist is not None:
        on_dist(dist, Path(label).name)

    verifier = RecordVerifier(dist.record)
    hooks.planned(sum(i.compressed_size for i in infos))
    # the dist-info files were read above: hash them now rather than reading them a second time
    done: list[_Result] = []
    for name, data in meta.items():
        algorithm = verifier.algorithm_for(name)
        digest = b64_digest(hashlib.new(algorithm, data).digest())
        done.append(_Result(name, len(data), digest, algorithm, None, None))
        found = archive.get(name)
        hooks.advanced(found.compressed_size if found is not None else 0)
    order = sorted((i for i in infos if i.name not in meta), key=lambda i: i.compressed_size, reverse=True)
    total = sum(i.size for i in infos)
    small = total < (8 << 20) or len(order) < 2  # not worth a thread: read in the calling one
    if pool is not None:
        results = done + _run(label, archive, order, verifier, pool, details, hooks, inline=small, ref=ref)
    else:
        with Workers(1 if small else worker_count(workers)) as own:
            results = done + _run(label, archive, order, verifier, own, details, hooks, inline=False, ref=ref)

    reports: dict[str, FileReport] = {}
    python: list[PythonLoads] = []
    lists: list[LibraryList] = []
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
        if isinstance(res.loads, PythonLoads):
            python.append(res.loads)
        elif isinstance(res.loads, LibraryList):
            lists.append(res.loads)
    members = tuple(MemberFacts(i.name, sizes.get(i.name, i.size), i.compressed_size) for i in infos)
    return ScannedWheel(
        path=label,
        filename=Path(label).name,
        dist=dist,
        members=members,
        reports=dict(sorted(reports.items())),
        record_problems=verifier.problems(),
        unreadable=tuple(sorted(unreadable)),
        python_loads=tuple(sorted(python, key=lambda p: p.file)),
        library_lists=tuple(sorted(lists, key=lambda p: p.file)),
    )


def _run(
    label: str,
    archive: ZipArchive,
    order: list[ZipMember],
    verifier: RecordVerifier,
    pool: Workers,
    details: bool,
    hooks: ScanObserver,
    *,
    inline: bool,
    ref: ArchiveRef | None = None,
) -> list[_Result]:
    if ref is not None and pool.use_processes(sum(m.size for m in order)):
        return _run_processes(label, ref, order, verifier, pool, details, hooks)

    def work(member: ZipMember) -> _Result:
        algorithm = verifier.algorithm_for(member.name)
        result = _scan_member(label, archive, member, algorithm, pool.budget, details)
        with pool.hooks_lock:
            hooks.advanced(member.compressed_size)
        return result

    if inline:
        return [work(member) for member in order]
    futures = [pool.submit(work, member) for member in order]
    return [future.result() for future in futures]


def _run_processes(
    label: str,
    ref: ArchiveRef,
    order: list[ZipMember],
    verifier: RecordVerifier,
    pool: Workers,
    details: bool,
    hooks: ScanObserver,
) -> list[_Result]:
    """The members on the worker processes, in batches (largest members first, each alone). A worker that
    dies makes the wheel unreadable (one line, exit 2), never an internal error."""
    from concurrent.futures import BrokenExecutor, as_completed

    try:
        submitted = pool.submit_batches(
            order,
            _scan_batch,
            label,
            ref,
            per_batch=lambda batch: ([verifier.algorithm_for(m.name) for m in batch], details),
        )
        pending = {future: batch for batch, future in submitted}
        results: list[_Result] = []
        for future in as_completed(pending):
            results.extend(future.result())
            with pool.hooks_lock:
                hooks.advanced(sum(m.compressed_size for m in pending[future]))
    except BrokenExecutor:
        raise WheelError(WORKER_DIED, path=label) from None
    return results


def _scan_batch(
    label: str,
    ref: ArchiveRef,
    members: list[ZipMember],
    algorithms: list[str],
    details: bool,
    large_in_memory: bool = False,
) -> list[_Result]:
    """In a worker process: :func:`_scan_member` for each member of a batch."""
    try:
        archive = shared_archive(ref)
    except ArchiveError as e:
        return [
            _Result(m.name, 0, None, a, None, e.message) for m, a in zip(members, algorithms, strict=True)
        ]
    budget = WorkerBudget(large_in_memory)
    return [
        _scan_member(label, archive, member, algorithm, budget, details)
        for member, algorithm in zip(members, algorithms, strict=True)
    ]
