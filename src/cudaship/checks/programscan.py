"""An exported program (AOTInductor ``.pt2``, ExecuTorch ``.pte``) scanned for the audit like a wheel.

The program's libraries and cubins are the members (read by :mod:`cudaship.program`, each once); its target
platform comes from the package's metadata or its library's format, and its CUDA train from the newest PTX
ISA its device code carries. A program has no dist-info: the families that read one (``record``,
``requirements``) do not run on it (:data:`WHEEL_ONLY`), and the report says so.
"""

from __future__ import annotations

import os
from pathlib import Path

from cudaship.checks.wheelscan import MemberFacts, ScannedWheel, ScanObserver
from cudaship.program.reader import read_program
from cudaship.program.records import ProgramKind
from cudaship.records.files import ContainerKind, FileReport
from cudaship.records.platform import TargetPlatform
from cudaship.wheel.records import DistInfo, Metadata, WheelFile

#: Check families that read a wheel's dist-info (RECORD, Requires-Dist): not run on a program.
WHEEL_ONLY: tuple[str, ...] = ("record", "requirements")

#: how a member error reads when the archive layer could not give the member's bytes back (program.pt2 reads
#: members through :mod:`cudaship.archive`; its messages, without the ``member NAME:`` prefix)
_DAMAGED = (
    "corrupt member",
    "corrupt compressed data",
    "compressed stream",
    "more data than the declared",
    "stored member with different sizes",
    "lzma member",
)


def scan_program(path: str | os.PathLike[str], *, observer: ScanObserver | None = None) -> ScannedWheel:
    """Read the program at ``path``: its libraries and cubins inspected, as a wheel scan reports members.
    Raises :class:`~cudaship.errors.ProgramError` (naming ``path``) when it is not a program."""
    label = os.fspath(path)
    hooks = observer or ScanObserver()
    size = Path(label).stat().st_size if Path(label).exists() else 0
    hooks.planned(size)
    program = read_program(label, details=True)  # as a wheel scan: the cubins' toolkits, for consistency
    reports: dict[str, FileReport] = {}
    unreadable: list[tuple[str, str]] = []
    for member in program.members:
        report = member.report
        if report is None:
            continue
        if report.error is not None and (
            report.error.startswith(_DAMAGED) or "bytes unpacked, the archive declares" in report.error
        ):
            unreadable.append((member.name, report.error))
            continue
        reports[member.name] = report
    hooks.advanced(size)
    platform = _platform(program.platform, program.machine)
    train = program.train
    name = Path(label).name
    empty = DistInfo(
        directory="",
        metadata=Metadata(name=name, version="", local=None, requires_dist=()),
        wheel=WheelFile(wheel_version=None, root_is_purelib=False, tags=()),
        record=(),
        record_path="",
    )
    return ScannedWheel(
        path=label,
        filename=name,
        dist=empty,
        members=tuple(MemberFacts(m.name, m.size, m.size) for m in program.members),
        reports=dict(sorted(reports.items())),
        record_problems=(),
        unreadable=tuple(sorted(unreadable)),
        kind=ContainerKind.PTE if program.kind is ProgramKind.PTE else ContainerKind.PT2,
        program_platform=platform,
        program_train=train.version,
        train_evidence=train.source if train.version else None,
        program_notes=program.notes,
    )


def _platform(os_name: str | None, machine: str | None) -> TargetPlatform:
    if os_name in ("linux", "windows", "macos"):
        return TargetPlatform(os_name, machine, f"{os_name}_{machine}" if machine else os_name)
    return TargetPlatform("other", machine, os_name or "unknown")
