"""From a wheel to file reports: the one place inspect and audit turn wheel members into :class:`FileReport`.

Both read members through the archive layer (:mod:`cudaship.archive`), choose them the same way
(:func:`cudaship.archive.select.is_native_member` on the name and the first bytes), show their names the same
way (``\\`` as ``/``) and report a member that cannot be unpacked the same way (its one-line problem, without
the ``member NAME:`` prefix, as the report's error). inspect reads the members it chose
(:func:`inspect_wheel`); the audit's one-pass scan (:mod:`cudaship.checks.wheelscan`) streams every member
for its RECORD hash and hands the chosen ones to :func:`member_report`.
"""

from __future__ import annotations

import threading
from pathlib import Path
from typing import TYPE_CHECKING

from cudaship.archive.pool import Pending, Workers
from cudaship.errors import CudashipError
from cudaship.inspection.dispatch import inspect_buffer
from cudaship.inspection.report import WheelReport
from cudaship.records.buffer import Buffer
from cudaship.records.files import FileReport, WheelInfo
from cudaship.safe_read import file_size
from cudaship.wheel.archive import Member, WheelArchive

if TYPE_CHECKING:
    from concurrent.futures import Future

    from cudaship.archive.pool import ArchiveRef
    from cudaship.archive.spill import Budget
    from cudaship.inspection.walk import InspectObserver


def shown_name(name: str) -> str:
    """A member's name as reports show it (wheels made on Windows may use backslashes)."""
    return name.replace("\\", "/")


def member_report(
    buf: Buffer, name: str, *, container: str, details: bool = False, toolkit_sample: bool = False
) -> FileReport:
    """The report of one wheel member whose bytes are ``buf``.

    ``details`` decompresses every SASS entry for the toolkit version its cubin records (inspect
    ``--details``); ``toolkit_sample`` keeps those of the entries the kernel sample reads (about one per arch:
    the audit's check needs no more).
    """
    return inspect_buffer(
        buf, shown_name(name), container=container, details=details, toolkit_sample=toolkit_sample
    )


def failed_member(name: str, size: int, container: str, message: str) -> FileReport:
    """The report of a member that could not be unpacked (a bomb, a lie about its size, a bad header)."""
    return FileReport(
        path=shown_name(name),
        format=None,
        size=size,
        container=container,
        error=message.removeprefix(f"member {name}: "),
    )


def inspect_wheel(
    path: Path, label: str, *, details: bool, hooks: InspectObserver, workers: Workers | None = None
) -> WheelReport:
    """Inspect the native members of the wheel at ``path`` (shown as ``label``); never raises for bad
    input. Members are read on ``workers`` (one at a time without)."""
    if workers is None:
        with Workers(1) as own:
            return start_wheel(path, label, details=details, hooks=hooks, workers=own).finish()
    return start_wheel(path, label, details=details, hooks=hooks, workers=workers).finish()


class WheelJob:
    """A wheel being inspected: opened, its facts read, its members handed to the workers
    (:func:`start_wheel`); :meth:`finish` waits for them and gives the report, members in archive order."""

    def __init__(
        self,
        label: str,
        total: int,
        hooks: InspectObserver,
        lock: threading.Lock,
        archive: WheelArchive | None = None,
    ) -> None:
        self.label = label
        self.total = total
        self.hooks = hooks
        self.lock = lock
        self.archive = archive
        self.info: WheelInfo | None = None
        self.error: str | None = None
        self.pending: list[tuple[Member, Pending[FileReport | None]]] = []

    def finish(self) -> WheelReport:
        files: list[FileReport] = []
        advanced = 0
        for member, future in self.pending:
            report = future.result()
            if report is None:
                continue
            files.append(report)
            with self.lock:
                self.hooks.done(report)
            advanced += member.compressed_size
        if self.archive is not None:
            self.archive.close()
        if self.error is not None:
            files.append(FileReport(path=self.label, format=None, size=self.total, error=self.error))
        with self.lock:
            if self.error is not None:
                self.hooks.done(files[-1])
            self.hooks.advanced(max(self.total - advanced, 0))
        return WheelReport(path=self.label, info=self.info, error=self.error, files=tuple(files))


def start_wheel(
    path: Path, label: str, *, details: bool, hooks: InspectObserver, workers: Workers
) -> WheelJob:
    """Open the wheel at ``path``, read its facts and hand every member that may be native to ``workers``
    (largest first, so the longest inflations start first and the workers finish together)."""
    from cudaship.archive.select import is_text_name
    from cudaship.safe_read import not_regular_reason

    total = file_size(path)
    lock = workers.hooks_lock
    try:
        reason = not_regular_reason(path)
        if reason is not None:
            raise CudashipError(reason)
        archive = WheelArchive(path)
    except CudashipError as e:
        job = WheelJob(label, total, hooks, lock)
        job.error = e.message
        return job
    job = WheelJob(label, total, hooks, lock, archive)
    try:
        job.info = archive.info()
    except CudashipError as e:  # the archive itself is damaged: report it
        job.error = e.message
        return job
    members = archive.members()
    candidates = [m for m in members if m.size != 0 and not is_text_name(m.name)]
    if workers.use_processes(sum(m.size for m in members)):
        try:
            ref = archive.ref()
        except OSError:
            pass
        else:
            job.pending = _on_processes(ref, candidates, label, details, hooks, workers)
            return job
    futures: dict[int, Pending[FileReport | None]] = {}
    for index in sorted(range(len(candidates)), key=lambda i: candidates[i].compressed_size, reverse=True):
        futures[index] = workers.submit(
            _read_member, archive, candidates[index], label, details, hooks, workers
        )
    job.pending = [(m, futures[i]) for i, m in enumerate(candidates)]
    return job


def _read_member(
    archive: WheelArchive, member: Member, label: str, details: bool, hooks: InspectObserver, workers: Workers
) -> FileReport | None:
    """The report of one member, or None when it is not native (then only its first bytes were inflated)."""
    report = _member_or_none(archive, member, label, details, workers.budget, hooks, workers.hooks_lock)
    if report is not None:  # the rest of the wheel's bytes are accounted for when it is finished
        with workers.hooks_lock:
            hooks.advanced(member.compressed_size)
    return report


def _member_or_none(
    archive: WheelArchive,
    member: Member,
    label: str,
    details: bool,
    budget: Budget,
    hooks: InspectObserver | None = None,
    lock: threading.Lock | None = None,
) -> FileReport | None:
    from cudaship.archive.select import is_native_member

    try:
        if not is_native_member(member.name, archive.head(member)):
            return None
        if hooks is not None and lock is not None:
            with lock:
                hooks.reading(f"{label}!{shown_name(member.name)}")
        with archive.member_buffer(member, budget=budget) as buf:
            return member_report(buf, member.name, container=label, details=details)
    except CudashipError as e:  # this member could not be unpacked; the others still are
        return failed_member(member.name, member.size, label, e.message)


class _BatchItem:
    """One member's report, out of a batch read on a worker process (:func:`_on_processes`); a member whose
    worker died is reported unreadable (:data:`~cudaship.archive.pool.WORKER_DIED`)."""

    def __init__(
        self, batch: Pending[list[FileReport | None]], index: int, member: Member, label: str
    ) -> None:
        self._batch = batch
        self._index = index
        self._member = member
        self._label = label

    def result(self) -> FileReport | None:
        from concurrent.futures import BrokenExecutor

        from cudaship.archive.pool import WORKER_DIED

        try:
            return self._batch.result()[self._index]
        except BrokenExecutor:
            return failed_member(self._member.name, self._member.size, self._label, WORKER_DIED)


class _Advance:
    """When a batch is done on a worker process: tells the progress display which of its members were read
    (native ones) and moves it on by their compressed bytes (the rest of the wheel's bytes are accounted for
    when it is finished, as with threads)."""

    def __init__(self, label: str, batch: list[Member], hooks: InspectObserver, lock: threading.Lock) -> None:
        self._label = label
        self._batch = batch
        self._hooks = hooks
        self._lock = lock

    def __call__(self, future: Future[list[FileReport | None]]) -> None:
        reports: list[FileReport | None] = [] if future.cancelled() or future.exception() else future.result()
        with self._lock:
            for member, report in zip(self._batch, reports, strict=False):
                if report is not None:
                    self._hooks.reading(f"{self._label}!{shown_name(member.name)}")
                    self._hooks.advanced(member.compressed_size)


def _on_processes(
    ref: ArchiveRef,
    candidates: list[Member],
    label: str,
    details: bool,
    hooks: InspectObserver,
    workers: Workers,
) -> list[tuple[Member, Pending[FileReport | None]]]:
    """Hand the candidates to the worker processes in batches (largest first); one pending report each, in
    archive order."""
    order = sorted(candidates, key=lambda m: m.compressed_size, reverse=True)
    by_member: dict[int, Pending[FileReport | None]] = {}
    for batch, future in workers.submit_batches(
        order, _read_batch, label, ref, per_batch=lambda batch: (details,)
    ):
        future.add_done_callback(_Advance(label, batch, hooks, workers.hooks_lock))
        for i, member in enumerate(batch):
            by_member[id(member)] = _BatchItem(future, i, member, label)
    return [(m, by_member[id(m)]) for m in candidates]


def _read_batch(
    label: str, ref: ArchiveRef, members: list[Member], details: bool, large_in_memory: bool = False
) -> list[FileReport | None]:
    """In a worker process: the report of each member of a batch (None: not native); a member over
    ``SPILL_SIZE`` is held in memory when the command reserved it (``large_in_memory``), else in a temporary
    file."""
    from cudaship.archive.pool import WorkerBudget, shared_archive

    try:
        archive = WheelArchive(ref.path, archive=shared_archive(ref))
    except CudashipError as e:
        return [failed_member(m.name, m.size, label, e.message) for m in members]
    budget = WorkerBudget(large_in_memory)
    return [_member_or_none(archive, member, label, details, budget) for member in members]
