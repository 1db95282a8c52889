"""From a wheel to file reports: the one place inspect and audit turn wheel members into :class:`FileReport`.

Both read members through the archive layer (:mod:`cudaship.archive`), choose them the same way
(:func:`cudaship.archive.select.is_native_member` on the name and the first bytes), show their names the same
way (``\\`` as ``/``) and report a member that cannot be unpacked the same way (its one-line problem, without
the ``member NAME:`` prefix, as the report's error). inspect reads the members it chose
(:func:`inspect_wheel`); the audit's one-pass scan (:mod:`cudaship.checks.wheelscan`) streams every member
for its RECORD hash and hands the chosen ones to :func:`member_report`.
"""

from __future__ import annotations

from dataclasses import replace
from pathlib import Path
from typing import TYPE_CHECKING

from cudaship.binary.records import Buffer, DeviceCode, DeviceCodeKind
from cudaship.errors import CudashipError
from cudaship.inspection.dispatch import inspect_buffer
from cudaship.inspection.records import FileReport, WheelInfo
from cudaship.inspection.report import WheelReport

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
    ``--details``); ``toolkit_sample`` does so for one entry per arch only (the audit's check needs no more).
    """
    report = inspect_buffer(buf, shown_name(name), container=container, details=details)
    if toolkit_sample and not details and report.device_code and report.error is None:
        report = _with_toolkit_versions(buf, report)
    return report


def failed_member(name: str, size: int, container: str, message: str) -> FileReport:
    """The report of a member that could not be unpacked (a bomb, a lie about its size, a bad header)."""
    return FileReport(
        path=shown_name(name),
        format=None,
        size=size,
        container=container,
        error=message.removeprefix(f"member {name}: "),
    )


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


def inspect_wheel(path: Path, label: str, *, details: bool, hooks: InspectObserver) -> WheelReport:
    """Inspect the native members of the wheel at ``path`` (shown as ``label``); never raises for bad
    input."""
    from cudaship.archive.select import is_native_member, is_text_name
    from cudaship.safe_read import not_regular_reason
    from cudaship.wheel.archive import WheelArchive

    total = _size(path)
    try:
        reason = not_regular_reason(path)
        if reason is not None:
            raise CudashipError(reason)
        archive = WheelArchive(path)
    except CudashipError as e:
        report = FileReport(path=label, format=None, size=total, error=e.message)
        hooks.done(report)
        hooks.advanced(total)
        return WheelReport(path=label, info=None, error=e.message, files=(report,))
    files: list[FileReport] = []
    info: WheelInfo | None = None
    error: str | None = None
    advanced = 0
    with archive:
        try:
            info = archive.info()
            for member in archive.members():
                if member.size == 0 or is_text_name(member.name):
                    continue
                try:
                    if not is_native_member(member.name, archive.head(member)):
                        continue
                    hooks.reading(f"{label}!{shown_name(member.name)}")
                    with archive.member_buffer(member) as buf:
                        report = member_report(buf, member.name, container=label, details=details)
                except CudashipError as e:  # this member could not be unpacked; the others still are
                    report = failed_member(member.name, member.size, label, e.message)
                files.append(report)
                hooks.done(report)
                hooks.advanced(member.compressed_size)
                advanced += member.compressed_size
        except CudashipError as e:  # the archive itself is damaged: report it, keep what was read
            error = e.message
            files.append(FileReport(path=label, format=None, size=total, error=e.message))
            hooks.done(files[-1])
    hooks.advanced(max(total - advanced, 0))
    return WheelReport(path=label, info=info, error=error, files=tuple(files))


def _size(path: Path) -> int:
    try:
        return path.stat().st_size
    except OSError:
        return 0
