"""From a wheel member to a file report: the one place the scan (:mod:`cudaship.inspection.scan`) turns a
member's bytes into a :class:`FileReport`, for inspect and audit alike.

Both purposes of the scan choose members the same way (:func:`cudaship.archive.select.is_native_member` on
the name and the first bytes), show their names the same way (``\\`` as ``/``, :func:`shown_name`) and report
a member that cannot be unpacked the same way (:func:`failed_member`: its one-line problem, without the
``member NAME:`` prefix, as the report's error).
"""

from __future__ import annotations

from cudaship.inspection.dispatch import inspect_buffer
from cudaship.records.buffer import Buffer
from cudaship.records.files import FileReport


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
