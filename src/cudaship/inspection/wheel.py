"""From a wheel to file reports: the one place inspect and audit turn wheel members into :class:`FileReport`.

Both read members through the archive layer (:mod:`cudaship.archive`), choose them the same way
(:func:`cudaship.archive.select.is_native_member` on the name and the first bytes), show their names the same
way (``\\`` as ``/``) and report a member that cannot be unpacked the same way (its one-line problem, without
the ``member NAME:`` prefix, as the report's error). inspect reads the members it chose
(:func:`inspect_wheel`); the one scan (:mod:`cudaship.inspection.scan`) streams every member for its
RECORD hash and hands the chosen ones to :func:`member_report`. Both hand members to the one dispatcher,
:meth:`cudaship.archive.pool.Workers.dispatch`.
"""

from __future__ import annotations

import threading
from collections.abc import Callable
from pathlib import Path
from typing import TYPE_CHECKING

from cudaship.archive.pool import ArchiveRef, Pending, Workers
from cudaship.archive.select import is_native_member, is_text_name
from cudaship.archive.spill import Budget
from cudaship.archive.zip import ZipArchive
from cudaship.errors import CudashipError
from cudaship.inspection.dispatch import inspect_buffer
from cudaship.inspection.report import WheelReport
from cudaship.records.buffer import Buffer
from cudaship.records.files import FileReport, WheelInfo
from cudaship.safe_read import file_size, not_regular_reason
from cudaship.wheel.archive import Member, WheelArchive

if TYPE_CHECKING:
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
    (:meth:`~cudaship.archive.pool.Workers.dispatch`: largest first, so the longest inflations start first
    and the workers finish together; on worker processes for a large wheel)."""
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
    try:
        ref: ArchiveRef | None = archive.ref()
    except OSError:
        ref = None

    def reading(member: Member) -> None:
        hooks.reading(f"{label}!{shown_name(member.name)}")

    def done(member: Member, report: FileReport | None, remote: bool) -> None:
        # only members that were read move the progress on; the rest of the wheel's bytes are accounted for
        # when it is finished
        if report is not None:
            if remote:  # a worker process cannot call the hooks: the member is named now
                reading(member)
            hooks.advanced(member.compressed_size)

    def failed(member: Member, message: str) -> FileReport | None:
        return failed_member(member.name, member.size, label, message)

    pending = workers.dispatch(
        archive.zip,
        ref,
        candidates,
        _read_member,
        lambda member: (label, details),
        failed=failed,
        on_done=done,
        announce=reading,
        unpacked_bytes=sum(m.size for m in members),
    )
    job.pending = list(zip(candidates, pending, strict=True))
    return job


def _read_member(
    zip_archive: ZipArchive,
    member: Member,
    budget: Budget,
    announce: Callable[[Member], None] | None,
    label: str,
    details: bool,
) -> FileReport | None:
    """The report of one member, or None when it is not native (then only its first bytes were inflated);
    a :data:`~cudaship.archive.pool.MemberReader`."""
    archive = WheelArchive(label, archive=zip_archive)
    try:
        if not is_native_member(member.name, archive.head(member)):
            return None
        if announce is not None:
            announce(member)
        with archive.member_buffer(member, budget=budget) as buf:
            return member_report(buf, member.name, container=label, details=details)
    except CudashipError as e:  # this member could not be unpacked; the others still are
        return failed_member(member.name, member.size, label, e.message)
