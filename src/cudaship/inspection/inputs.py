"""What the walk (:mod:`cudaship.inspection.walk`) and the scan (:mod:`cudaship.inspection.scan`) share
without importing the scan's dist-info parsers (start-up time): which inputs are exported programs, and the
progress hooks a scan calls.
"""

from __future__ import annotations

from pathlib import Path

from cudaship.archive.select import MAGIC_BYTES
from cudaship.errors import CudashipError
from cudaship.records.files import FileReport
from cudaship.safe_read import open_regular

#: file name suffixes of exported programs
PROGRAM_SUFFIXES = (".pt2", ".pte")


def is_program(path: Path) -> bool:
    """An exported program, by name (``.pt2``, ``.pte``) or, for a ``.pte`` named otherwise, by content
    (``ET`` and two digits at offset 4)."""
    if path.suffix.lower() in PROGRAM_SUFFIXES:
        return True
    from cudaship.inspection.pte import is_pte  # program readers when asked: start-up time

    return is_pte(head(path))


def head(path: Path) -> bytes:
    """The first bytes of the file at ``path`` (empty when it cannot be read)."""
    try:
        with open_regular(path) as f:
            return f.read(MAGIC_BYTES)
    except (CudashipError, OSError):
        return b""


class ScanObserver:
    """Progress hooks of a scan (do nothing by default; library code never prints)."""

    def planned(self, total_bytes: int) -> None:
        """Called once with the sum of compressed member sizes."""

    def advanced(self, nbytes: int) -> None:
        """Another member of ``nbytes`` compressed bytes is done."""


class InspectObserver(ScanObserver):
    """Progress hooks of an inspect run (:func:`cudaship.inspection.walk.inspect_paths`) and of each wheel's
    scan for it. The defaults do nothing; library code never prints."""

    def planned(self, total_bytes: int) -> None:
        """Called once, before any file is read, with the byte count of all inputs (files and wheels)."""

    def reading(self, label: str) -> None:
        """A file (or wheel member, ``wheel!member``) is about to be read."""

    def done(self, report: FileReport) -> None:
        """A file (or wheel member) is read, or could not be."""

    def advanced(self, nbytes: int) -> None:
        """``nbytes`` more of the planned total are done (a file's size, a wheel member's compressed size)."""
