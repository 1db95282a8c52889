"""From the paths a user names to file reports: files, directories (walked) and wheels (opened in place).

A file named explicitly is always reported, also when it is not a binary cudaship reads (that is an error).
Inside a directory, files are chosen by name and first bytes and the rest is skipped quietly; wheels and
exported programs (``.pt2``, ``.pte``) found there are opened too. A wheel is read by the one scan
(:func:`cudaship.inspection.scan.start` for :attr:`~cudaship.inspection.scan.Purpose.INSPECT`: members chosen
the same way, by name and first bytes), several at once, and its report built from the
:class:`~cudaship.inspection.scan.ScannedWheel`; inside a program, its libraries and cubins (see
:mod:`cudaship.inspection.program`). Members are reported with ``container`` = the wheel's or program's path.

Progress goes to an :class:`InspectObserver`; its hooks do nothing unless the caller (the CLI) overrides them.
"""

from __future__ import annotations

import mmap
import os
import stat
from collections import deque
from collections.abc import Iterator, Sequence
from contextlib import contextmanager, suppress
from dataclasses import dataclass, replace
from pathlib import Path
from typing import TYPE_CHECKING

from cudaship import tree, words
from cudaship.archive.pool import Pending, Workers, worker_count
from cudaship.archive.select import looks_native
from cudaship.errors import CudashipError
from cudaship.inspection.dispatch import inspect_buffer, stored_library_names
from cudaship.inspection.inputs import PROGRAM_SUFFIXES, InspectObserver, head, is_program
from cudaship.inspection.report import InspectReport, WheelReport
from cudaship.records.buffer import Buffer
from cudaship.records.files import ContainerKind, FileReport
from cudaship.safe_read import file_size, is_dir, kind_of, not_regular_reason, open_regular
from cudaship.wheel.archive import is_wheel

if TYPE_CHECKING:
    from cudaship.inspection.scan import ScanJob

__all__ = [
    "MAX_WALK_ENTRIES",
    "PROGRAM_SUFFIXES",
    "InspectObserver",
    "inspect_file",
    "inspect_paths",
    "is_program",
    "walk_entries",
    "walk_files",
]


@dataclass(frozen=True)
class _Input:
    path: Path
    label: str  #: the path as the user gave it (or as found under a directory the user gave)
    explicit: bool  #: named by the user, not found by walking


@dataclass(frozen=True)
class _Wheel:
    """A wheel whose scan is under way (:func:`cudaship.inspection.scan.start`)."""

    item: _Input
    job: ScanJob


def inspect_paths(
    paths: Sequence[str | os.PathLike[str]],
    *,
    details: bool = False,
    observer: InspectObserver | None = None,
    workers: int | None = None,
) -> InspectReport:
    """Inspect every file, directory and wheel in ``paths``. Never raises for bad input.

    Files and wheel members are read on ``workers`` threads at once (default: the usable CPUs, at most 4;
    1 reads them one after the other); the report is the same whatever the number. Observer hooks are
    called one at a time (never concurrently), ``done`` in report order."""
    hooks = observer or InspectObserver()
    plan: list[_Input | FileReport] = []  # in the order the user named them
    for raw in paths:
        label = os.fspath(raw)
        path = Path(label)
        if is_dir(path):
            try:
                found = list(_walk(path, label))
            except CudashipError as e:
                plan.append(FileReport(path=label, format=None, size=0, error=e.message))
                continue
            plan.extend(found)
            if not found:  # nothing checked is not a pass: the directory is the problem (exit 2)
                plan.append(FileReport(path=label, format=None, size=0, error=_nothing_under(path)))
        elif path.exists():
            reason = not_regular_reason(path)
            if reason is None:
                plan.append(_Input(path, label, explicit=True))
            else:  # a FIFO would block, a device never end: refused, not read
                plan.append(FileReport(path=label, format=None, size=0, error=reason))
        else:
            plan.append(FileReport(path=label, format=None, size=0, error="no such file or directory"))
    hooks.planned(sum(file_size(i.path) for i in plan if isinstance(i, _Input)))
    files: list[FileReport] = []
    wheels: list[WheelReport] = []
    items: list[FileReport | WheelReport] = []
    inputs = [i for i in plan if isinstance(i, _Input)]
    count = worker_count(workers)
    if len(inputs) <= 1 and not any(is_wheel(i.path) for i in inputs):
        count = 1  # one plain file: nothing to overlap (its scan has threads of its own)
    with Workers(count) as pool:
        # worker processes for large wheels start now, while the wheels' directories are read
        pool.prestart_for([file_size(i.path) for i in inputs if is_wheel(i.path)])
        # Every file and wheel member is handed to the workers as soon as it is planned; reports are collected
        # in the order the user named the inputs. At most _OPEN_WHEELS_PER_WORKER wheels per worker are open
        # at once: a directory of thousands of wheels does not hold thousands of maps.
        pending: deque[FileReport | _Wheel | Pending[FileReport] | Pending[WheelReport]] = deque()
        open_wheels = 0

        def collect() -> None:
            nonlocal open_wheels
            entry = pending.popleft()
            if isinstance(entry, FileReport):
                with pool.hooks_lock:
                    hooks.done(entry)
                files.append(entry)
                items.append(entry)
            elif isinstance(entry, _Wheel):
                open_wheels -= 1
                wheel = _wheel_report(entry, hooks, pool)
                wheels.append(wheel)
                files.extend(wheel.files)
                items.append(wheel)
            else:
                result = entry.result()
                if isinstance(result, WheelReport):  # a program read as a container
                    wheels.append(result)
                    files.extend(result.files)
                    items.append(result)
                    return
                with pool.hooks_lock:
                    hooks.done(result)
                files.append(result)
                items.append(result)

        for item in plan:
            if isinstance(item, FileReport):
                pending.append(item)
            elif is_wheel(item.path):
                while open_wheels >= _OPEN_WHEELS_PER_WORKER * pool.count:
                    collect()
                pending.append(_start_wheel(item, details, hooks, pool))
                open_wheels += 1
            elif is_program(item.path):
                pending.append(pool.submit(_inspect_program, item, details, hooks, pool))
            else:
                pending.append(pool.submit(_read_file, item, details, hooks, pool))
        while pending:
            collect()
    return InspectReport(
        inputs=tuple(os.fspath(p) for p in paths),
        files=tuple(files),
        wheels=tuple(wheels),
        items=tuple(items),
    )


#: Wheels open at once, per worker (see :func:`inspect_paths`).
_OPEN_WHEELS_PER_WORKER = 2


def _start_wheel(item: _Input, details: bool, hooks: InspectObserver, pool: Workers) -> _Wheel:
    """The wheel's scan for inspect started: its members handed to ``pool``, collected later."""
    # the scan imports the dist-info parsers (packaging): only when a wheel is read, for the start-up time of
    # inspecting a library
    from cudaship.inspection.scan import Purpose, start

    job = start(
        item.path, purpose=Purpose.INSPECT, label=item.label, details=details, observer=hooks, pool=pool
    )
    return _Wheel(item, job)


def _wheel_report(wheel: _Wheel, hooks: InspectObserver, pool: Workers) -> WheelReport:
    """The wheel's inspect report, from its scan: its facts, its native members' reports and, when it could
    not be read, one report with the reason."""
    scanned = wheel.job.finish()
    files = scanned.files
    if scanned.error is not None:
        failure = FileReport(
            path=wheel.item.label, format=None, size=file_size(wheel.item.path), error=scanned.error
        )
        with pool.hooks_lock:
            hooks.done(failure)
        files = (*files, failure)
    return WheelReport(
        path=wheel.item.label,
        info=scanned.info,
        error=scanned.error,
        files=files,
        variant=scanned.variant,
        variant_error=scanned.variant_error,
    )


def _read_file(item: _Input, details: bool, hooks: InspectObserver, pool: Workers) -> FileReport:
    with pool.hooks_lock:
        hooks.reading(item.label)
    report = inspect_file(item.path, item.label, details=details)
    with pool.hooks_lock:
        hooks.advanced(report.size)
    return report


def inspect_file(path: Path, label: str, *, details: bool = False, device: bool = True) -> FileReport:
    """Map one file and inspect it (``device=False``: host-side facts only)."""
    try:
        with _mapped(path) as buf:
            return inspect_buffer(buf, label, details=details, device=device)
    except CudashipError as e:
        return FileReport(path=label, format=None, size=file_size(path), error=e.message)
    except OSError as e:
        reason = f"cannot read: {e.strerror or e}"
        return FileReport(path=label, format=None, size=file_size(path), error=reason)


def library_names_in(path: Path) -> tuple[str, ...]:
    """The library names the native file ``path`` stores for dlopen (:func:`stored_library_names`); () when it
    cannot be read or is no host binary."""
    try:
        with _mapped(path) as buf:
            return stored_library_names(buf)
    except (CudashipError, OSError):
        return ()


#: Most entries (files and directories) one directory argument may hold; a walk past it reports an error.
MAX_WALK_ENTRIES = 10_000_000


def walk_files(root: Path) -> Iterator[Path]:
    """Regular files under ``root`` (links to files included, links to directories not followed), sorted
    within each directory, depth first. Iterative: a tree 100,000 levels deep costs no recursion (``os.walk``
    recurses once per level on Python 3.11 and fails past about 1,000)."""
    for path, refused in walk_entries(root):
        if refused is None:
            yield path


def walk_entries(root: Path) -> Iterator[tuple[Path, str | None]]:
    """As :func:`walk_files`, with the entries that are not directories and not regular files too (a FIFO, a
    device, a socket, or a link to one), each with why it is not read (a dangling link is left out, as
    before); a regular file comes with None. A
    caller reports a refused entry whose name says it would have read it, instead of skipping it without a
    word."""
    visited = 0
    for _directory, entries in tree.walk(root):
        visited += len(entries)
        if visited > MAX_WALK_ENTRIES:
            raise CudashipError(f"more than {MAX_WALK_ENTRIES} entries under the directory", path=str(root))
        for entry in entries:
            try:
                if entry.is_dir(follow_symlinks=False):
                    continue
                if entry.is_file(follow_symlinks=True):
                    yield Path(entry.path), None
                    continue
            except OSError:
                pass
            try:
                mode = os.stat(entry.path).st_mode
            except OSError:  # a dangling link: nothing there to read or to report
                continue
            if not stat.S_ISDIR(mode):  # a link to a directory is not followed, and not a problem
                yield Path(entry.path), f"not a regular file ({kind_of(mode)})"


def _inspect_program(item: _Input, details: bool, hooks: InspectObserver, pool: Workers) -> WheelReport:
    """An AOTInductor package or ExecuTorch program: its libraries and cubins as members (read on a worker;
    the hooks are called under the pool's lock)."""
    # only for a program: start-up time (docs/performance.md)
    from cudaship.inspection.program import read_program
    from cudaship.inspection.program_records import ProgramKind

    total = file_size(item.path)
    with pool.hooks_lock:
        hooks.reading(item.label)
    kind = ContainerKind.PTE if item.path.suffix.lower() == ".pte" else ContainerKind.PT2
    try:
        program = read_program(item.path, details=details)
    except CudashipError as e:
        message = e.message
        report = FileReport(path=item.label, format=None, size=total, error=message)
        with pool.hooks_lock:
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
    with pool.hooks_lock:
        for report in files:
            hooks.done(report)
        hooks.advanced(total)
    train = program.train  # the same answer program inspect, program check and audit give
    return WheelReport(
        path=item.label,
        info=None,
        error=None,
        files=tuple(files),
        kind=kind,
        cuda_train=train.version,
        train_evidence=train.source if train.version else None,
        notes=program.notes,
    )


def _walk(root: Path, label: str) -> Iterator[_Input | FileReport]:
    """Files under ``root`` worth reading, in a stable order; symlinked directories are not followed. An entry
    named as one (a ``.whl``, a program, a library by name) that is not a regular file (a FIFO, a device) is
    not read but gets its line: a report, with the reason as its error."""
    for path, refused in walk_entries(root):
        shown = os.path.join(label, os.path.relpath(path, root))
        if refused is not None:
            if is_wheel(path) or path.suffix.lower() in PROGRAM_SUFFIXES or looks_native(path.name, b""):
                yield FileReport(path=shown, format=None, size=0, error=refused)
            continue
        if is_wheel(path) or path.suffix.lower() in PROGRAM_SUFFIXES or looks_native(path.name, head(path)):
            yield _Input(path, shown, explicit=False)


def _nothing_under(root: Path) -> str:
    """Why a directory gave nothing to read: empty, or only files that are not binaries."""
    count = sum(1 for _ in walk_files(root))
    if count == 0:
        return "empty directory: nothing to check"
    files = words.count(count, "file")
    return f"no binary or wheel in this directory ({files}, none cudaship reads): nothing to check"


@contextmanager
def _mapped(path: Path) -> Iterator[Buffer]:
    with open_regular(path) as f:
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
