"""From the paths a user names to file reports: files, directories (walked) and wheels (opened in place).

A file named explicitly is always reported, also when it is not a binary cudaship reads (that is an error).
Inside a directory, files are chosen by name and first bytes and the rest is skipped quietly; wheels and
exported programs (``.pt2``, ``.pte``) found there are opened too. Inside a wheel, members are chosen the same
way (see :mod:`cudaship.wheel.archive`); inside a program, its libraries and cubins (see
:mod:`cudaship.program`). Members are reported with ``container`` = the wheel's or program's path.

Progress goes to an :class:`InspectObserver`; its hooks do nothing unless the caller (the CLI) overrides them.
"""

from __future__ import annotations

import mmap
import os
from collections.abc import Iterator, Sequence
from contextlib import contextmanager, suppress
from dataclasses import dataclass, replace
from pathlib import Path

from cudaship.binary.records import Buffer
from cudaship.errors import CudashipError
from cudaship.inspection.dispatch import inspect_buffer
from cudaship.inspection.records import ContainerKind, FileReport, WheelInfo
from cudaship.inspection.report import InspectReport, WheelReport, train_from_ptx
from cudaship.wheel.archive import MAGIC_BYTES, WheelArchive, is_wheel, looks_native


class InspectObserver:
    """Progress hooks. The defaults do nothing; library code never prints."""

    def planned(self, total_bytes: int) -> None:
        """Called once, before any file is read, with the byte count of all inputs (files and wheels)."""

    def reading(self, label: str) -> None:
        """A file (or wheel member, ``wheel!member``) is about to be read."""

    def done(self, report: FileReport) -> None:
        """A file (or wheel member) is read, or could not be."""

    def advanced(self, nbytes: int) -> None:
        """``nbytes`` more of the planned total are done (a file's size, a wheel member's compressed size)."""


@dataclass(frozen=True)
class _Input:
    path: Path
    label: str  #: the path as the user gave it (or as found under a directory the user gave)
    explicit: bool  #: named by the user, not found by walking


def inspect_paths(
    paths: Sequence[str | os.PathLike[str]],
    *,
    details: bool = False,
    observer: InspectObserver | None = None,
) -> InspectReport:
    """Inspect every file, directory and wheel in ``paths``. Never raises for bad input."""
    hooks = observer or InspectObserver()
    plan: list[_Input | FileReport] = []  # in the order the user named them
    for raw in paths:
        label = os.fspath(raw)
        path = Path(label)
        if path.is_dir():
            found = list(_walk(path, label))
            plan.extend(found)
            if not found:  # nothing checked is not a pass: the directory is the problem (exit 2)
                plan.append(FileReport(path=label, format=None, size=0, error=_nothing_under(path)))
        elif path.exists():
            plan.append(_Input(path, label, explicit=True))
        else:
            plan.append(FileReport(path=label, format=None, size=0, error="no such file or directory"))
    hooks.planned(sum(_size(i.path) for i in plan if isinstance(i, _Input)))
    files: list[FileReport] = []
    wheels: list[WheelReport] = []
    items: list[FileReport | WheelReport] = []
    for item in plan:
        if isinstance(item, FileReport):
            hooks.done(item)
            files.append(item)
            items.append(item)
        elif is_wheel(item.path) or is_program(item.path):
            if is_wheel(item.path):
                wheel = _inspect_wheel(item, details=details, hooks=hooks)
            else:
                wheel = _inspect_program(item, details=details, hooks=hooks)
            wheels.append(wheel)
            files.extend(wheel.files)
            items.append(wheel)
        else:
            hooks.reading(item.label)
            report = inspect_file(item.path, item.label, details=details)
            hooks.done(report)
            hooks.advanced(report.size)
            files.append(report)
            items.append(report)
    return InspectReport(
        inputs=tuple(os.fspath(p) for p in paths),
        files=tuple(files),
        wheels=tuple(wheels),
        items=tuple(items),
    )


def inspect_file(path: Path, label: str, *, details: bool = False) -> FileReport:
    """Map one file and inspect it."""
    try:
        with _mapped(path) as buf:
            return inspect_buffer(buf, label, details=details)
    except OSError as e:
        return FileReport(path=label, format=None, size=_size(path), error=f"cannot read: {e.strerror or e}")


def _inspect_wheel(item: _Input, *, details: bool, hooks: InspectObserver) -> WheelReport:
    total = _size(item.path)
    try:
        archive = WheelArchive(item.path)
    except CudashipError as e:
        report = FileReport(path=item.label, format=None, size=total, error=e.message)
        hooks.done(report)
        hooks.advanced(total)
        return WheelReport(path=item.label, info=None, error=e.message, files=(report,))
    files: list[FileReport] = []
    info: WheelInfo | None = None
    error: str | None = None
    advanced = 0
    with archive:
        try:
            info = archive.info()
            for member in archive.native_members():
                shown = member.name.replace("\\", "/")  # wheels made on Windows may use backslashes
                hooks.reading(f"{item.label}!{shown}")
                try:
                    with archive.member_buffer(member) as buf:
                        report = inspect_buffer(buf, shown, container=item.label, details=details)
                except CudashipError as e:  # the member could not be unpacked (a bomb, a lie, a bad header)
                    message = e.message.removeprefix(f"member {member.name}: ")
                    report = FileReport(
                        path=shown, format=None, size=member.size, container=item.label, error=message
                    )
                files.append(report)
                hooks.done(report)
                hooks.advanced(member.compressed_size)
                advanced += member.compressed_size
        except CudashipError as e:  # the archive itself is damaged: report it, keep what was read
            error = e.message
            files.append(FileReport(path=item.label, format=None, size=total, error=e.message))
            hooks.done(files[-1])
    hooks.advanced(max(total - advanced, 0))
    return WheelReport(path=item.label, info=info, error=error, files=tuple(files))


#: file name suffixes of exported programs
PROGRAM_SUFFIXES = (".pt2", ".pte")


def is_program(path: Path) -> bool:
    """An exported program, by name (``.pt2``, ``.pte``) or, for a ``.pte`` named otherwise, by content
    (``ET`` and two digits at offset 4)."""
    if path.suffix.lower() in PROGRAM_SUFFIXES:
        return True
    from cudaship.program.pte import is_pte

    return is_pte(_head(path))


def _inspect_program(item: _Input, *, details: bool, hooks: InspectObserver) -> WheelReport:
    """An AOTInductor package or ExecuTorch program: its libraries and cubins as members."""
    from cudaship.program.reader import read_program
    from cudaship.program.records import ProgramKind

    total = _size(item.path)
    hooks.reading(item.label)
    kind = ContainerKind.PTE if item.path.suffix.lower() == ".pte" else ContainerKind.PT2
    try:
        program = read_program(item.path, details=details)
    except CudashipError as e:
        message = e.message
        report = FileReport(path=item.label, format=None, size=total, error=message)
        hooks.done(report)
        hooks.advanced(total)
        return WheelReport(path=item.label, info=None, error=message, files=(report,), kind=kind)
    kind = ContainerKind.PTE if program.kind is ProgramKind.PTE else ContainerKind.PT2
    files: list[FileReport] = []
    for member in program.members:
        if member.report is None:
            continue
        report = replace(member.report, path=member.name, container=item.label)
        files.append(report)
        hooks.done(report)
    hooks.advanced(total)
    train = train_from_ptx(d for f in files for d in f.device_code)
    return WheelReport(
        path=item.label,
        info=None,
        error=None,
        files=tuple(files),
        kind=kind,
        cuda_train=train[0] if train else None,
        train_evidence=train[1] if train else None,
        notes=program.notes,
    )


def _walk(root: Path, label: str) -> Iterator[_Input]:
    """Files under ``root`` worth reading, in a stable order; symlinked directories are not followed."""
    for directory, dirnames, filenames in os.walk(root):
        dirnames.sort()
        for name in sorted(filenames):
            path = Path(directory) / name
            if path.is_symlink() and not path.exists():
                continue
            if not path.is_file():
                continue
            shown = os.path.join(label, os.path.relpath(path, root))
            if is_wheel(path) or path.suffix.lower() in PROGRAM_SUFFIXES or looks_native(name, _head(path)):
                yield _Input(path, shown, explicit=False)


def _nothing_under(root: Path) -> str:
    """Why a directory gave nothing to read: empty, or only files that are not binaries."""
    count = sum(len(names) for _, _, names in os.walk(root))
    if count == 0:
        return "empty directory: nothing to check"
    return f"no binary or wheel in this directory ({count} file(s), none cudaship reads): nothing to check"


def _head(path: Path) -> bytes:
    try:
        with path.open("rb") as f:
            return f.read(MAGIC_BYTES)
    except OSError:
        return b""


def _size(path: Path) -> int:
    try:
        return path.stat().st_size
    except OSError:
        return 0


@contextmanager
def _mapped(path: Path) -> Iterator[Buffer]:
    with path.open("rb") as f:
        size = os.fstat(f.fileno()).st_size
        if size == 0:
            yield b""
            return
        mapped = mmap.mmap(f.fileno(), 0, access=mmap.ACCESS_READ)
        try:
            yield mapped
        finally:
            with suppress(BufferError):  # a record kept a view; the map is freed with it
                mapped.close()
