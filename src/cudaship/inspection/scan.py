"""One scan: a wheel or an exported program turned into records, once, for every command that reads it.

:func:`scan` reads a wheel in one pass: the dist-info, every member decompressed once (hashed for RECORD
unless the caller needs no hashes), the native ones read into :class:`FileReport` records while their
bytes are at hand (:func:`cudaship.inspection.wheel.member_report`, as inspect reads them), and the Python
files that load libraries themselves (:mod:`cudaship.wheel.pyloads`). An exported program (``.pt2``,
``.pte``) gives the same record through the same entry point (its libraries and cubins as the members, read
by :mod:`cudaship.inspection.program`). The record (:class:`ScannedWheel`) carries what the checks need and
would otherwise parse: each member's installed path, and the target platform, worked out once.

The scan reads for a :class:`Purpose`: :attr:`~Purpose.AUDIT` (above; ``audit`` and ``repair``) or
:attr:`~Purpose.INSPECT` (``inspect`` and ``gpus``: only the members that may be native, nothing hashed, the
wheel's facts read leniently, never raising for a damaged wheel, as those commands report one). :func:`start`
opens the input and hands its members to the workers; :meth:`ScanJob.finish` collects them: a command that
reads many wheels starts the next ones before it finishes the first (:mod:`cudaship.inspection.walk`), and
:func:`scan` is both at once.

The zip mechanics are the archive layer's (:mod:`cudaship.archive`: local headers, overlap refusal, bounded
inflation for every method, budgets, spill). Members are spread over the command's workers
(:meth:`cudaship.archive.pool.Workers.dispatch`; inflation and hashing release the GIL, so the cores overlap
the decompression of several members, of one wheel or of several). A native member's bytes go to memory
when they fit the workers' shared budget and to an anonymous temporary file, mapped, otherwise, so peak
memory stays bounded whatever the wheel's size. Members are handed out largest first so the cores finish
together.
"""

from __future__ import annotations

import hashlib
import os
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from enum import Enum
from pathlib import Path
from typing import ParamSpec

from cudaship.archive.pool import (
    WORKER_DIED,
    ArchiveRef,
    Pending,
    Workers,
    worker_count,
)
from cudaship.archive.select import is_text_name
from cudaship.archive.zip import ZipArchive, ZipFile, ZipMember
from cudaship.errors import ArchiveError, CudashipError, WheelError
from cudaship.inspection.inputs import InspectObserver, ScanObserver, is_program
from cudaship.inspection.member import MemberResult, inspect_member, scan_member
from cudaship.inspection.wheel import failed_member, shown_name
from cudaship.knowledge.platforms import platforms_of_tags
from cudaship.records.files import ContainerKind, FileReport, WheelInfo
from cudaship.records.platform import TargetPlatform
from cudaship.safe_read import file_size, not_regular_reason
from cudaship.wheel.archive import WheelArchive
from cudaship.wheel.metadata import (
    MAX_METADATA_BYTES,
    MAX_RECORD_BYTES,
    MAX_SYMLINKS_BYTES,
    SYMLINKS_FILE,
    RecordVerifier,
    b64_digest,
    find_dist_info,
    install_path,
    read_dist_info,
    requirements_for,
    tags_from_filename,
)
from cudaship.wheel.records import (
    DeclaredRequirement,
    DistInfo,
    LibraryList,
    Metadata,
    PythonLoads,
    RecordProblem,
    WheelFile,
    WheelVariant,
)
from cudaship.wheel.variant import MAX_VARIANT_JSON, VARIANT_JSON

__all__ = [
    "DeclaredFor",
    "MemberFacts",
    "Purpose",
    "ScanJob",
    "ScanObserver",
    "ScannedWheel",
    "Workers",
    "assemble",
    "declared_requirements",
    "scan",
    "start",
    "target_platform",
    "worker_count",
]

_P = ParamSpec("_P")


@dataclass(frozen=True)
class MemberFacts:
    name: str
    size: int  #: uncompressed size as streamed
    compressed_size: int
    #: where the member lands, relative to site-packages and ``/``-separated (``.data/purelib|platlib/x``
    #: as ``x``); a member of another ``.data`` scheme, and a program's member, keep their name
    installed: str


@dataclass(frozen=True)
class DeclaredFor:
    """The Requires-Dist entries whose markers hold on one target (``os``, ``machine``; extras not selected),
    or why they could not be read (an entry that is not a valid requirement)."""

    os: str
    machine: str | None
    requirements: tuple[DeclaredRequirement, ...]
    error: str | None = None


#: The target OSes the audit policy may name requirements for (``[audit.requirements]``), each read for the
#: wheel's own machine when it is the wheel's OS, else for x86_64 (see :func:`declared_requirements`).
POLICY_OSES = ("linux", "windows", "macos")


class Purpose(Enum):
    """What a scan reads a wheel for."""

    #: every member streamed and hashed against RECORD, the native ones read, the Python files' library loads;
    #: the dist-info is required (a wheel without one, or with a damaged one, raises :class:`WheelError`)
    AUDIT = "audit"
    #: only the members that may be native (chosen by name, then by their first bytes), nothing hashed; never
    #: raises for the wheel: its facts from the lenient reader (:func:`cudaship.wheel.archive.wheel_info`),
    #: what could not be read as ``error`` and as members' reports with their errors
    INSPECT = "inspect"


@dataclass(frozen=True)
class ScannedWheel:
    """Everything one pass over a wheel produced.

    A scan for :attr:`Purpose.INSPECT` parses no dist-info strictly: ``dist`` is empty, ``platform`` comes
    from the lenient reader's tags, nothing is hashed (no ``record_problems``) and no Python file is read;
    what it read is in ``info``, ``error`` and ``files``."""

    path: str
    filename: str
    dist: DistInfo
    members: tuple[MemberFacts, ...]
    reports: dict[str, FileReport]  #: native members by path inside the wheel
    record_problems: tuple[RecordProblem, ...]
    unreadable: tuple[
        tuple[str, str], ...
    ]  #: (member, one-line reason) for members that could not be streamed
    #: where it runs (see :func:`target_platform`; a program's from its metadata or library format), and
    #: notes when a wheel's tags disagree
    platform: TargetPlatform
    platform_notes: tuple[str, ...] = ()
    #: the Requires-Dist entries that hold on the wheel's own platform, and on each of :data:`POLICY_OSES`
    declared: tuple[DeclaredFor, ...] = ()
    #: a program read as a container: its kind and the CUDA train its code names; ``dist`` is then empty
    kind: ContainerKind = ContainerKind.WHEEL
    program_train: str | None = None
    train_evidence: str | None = None
    program_notes: tuple[str, ...] = ()
    #: the package's Python files that load native libraries themselves (ctypes.CDLL, add_dll_directory,
    #: a helper), and shipped lists of library names (see :mod:`cudaship.wheel.pyloads`)
    python_loads: tuple[PythonLoads, ...] = ()
    library_lists: tuple[LibraryList, ...] = ()
    purpose: Purpose = Purpose.AUDIT
    #: :attr:`Purpose.INSPECT`: the wheel's facts from its file name, METADATA and WHEEL read leniently (None
    #: when the archive could not be opened); why the wheel could not be read (not opened, a damaged archive)
    info: WheelInfo | None = None
    error: str | None = None
    #: :attr:`Purpose.INSPECT`: the reports of the native members, in archive order, a member that could not
    #: be unpacked as a report with its one-line problem as the error
    files: tuple[FileReport, ...] = ()
    #: :attr:`Purpose.INSPECT`: the wheel's variant (label and ``variant.json``), None for a non-variant;
    #: why it could not be read (a malformed ``variant.json``): ``inspect`` reads on, ``gpus`` and ``doctor``
    #: refuse the wheel when they answer which variant a machine gets
    variant: WheelVariant | None = None
    variant_error: str | None = None
    #: members this scan did not read (``cudaship survey`` fetches only the dist-info, the members that may
    #: be native and the Python files, and takes a native member's facts from its cache by RECORD's hash):
    #: RECORD's hashes and sizes of these are not verified (the ``record`` family says so)
    unfetched: tuple[str, ...] = ()

    @property
    def uncompressed_size(self) -> int:
        return sum(m.size for m in self.members)


class ScanJob:
    """A scan started (:func:`start`): the input opened, its facts read, its members handed to the workers.
    :meth:`finish` (once) waits for the members and gives the record; the input is closed then, also when it
    raises. A caller reading many inputs starts several before it finishes the first, so the workers always
    have members to read."""

    def __init__(
        self, collect: Callable[[], ScannedWheel], closing: Sequence[Callable[[], None]] = ()
    ) -> None:
        self._collect = collect
        self._closing = closing

    def finish(self) -> ScannedWheel:
        try:
            return self._collect()
        finally:
            for close in self._closing:
                close()


def start(
    path: str | os.PathLike[str],
    *,
    purpose: Purpose = Purpose.AUDIT,
    label: str | None = None,
    workers: int | None = None,
    details: bool = True,
    observer: ScanObserver | None = None,
    pool: Workers | None = None,
    on_dist: Callable[[DistInfo, TargetPlatform], None] | None = None,
) -> ScanJob:
    """Start reading the wheel or exported program (``.pt2``, ``.pte``) at ``path`` (shown as ``label``,
    default ``path``) for ``purpose``.

    A wheel for :attr:`Purpose.AUDIT`: its dist-info, every member hashed (for RECORD), the native members
    inspected (``details``: the toolkit versions of the kernel sample's cubins), its Python files' library
    loads. ``on_dist`` is called with the dist-info and the target platform as soon as they are read, before
    any member is: work that needs only them (the requirements' resolution) can start then and overlap the
    members' reading. Raises :class:`~cudaship.errors.WheelError` or :class:`~cudaship.errors.ProgramError`
    (naming ``path``) for an input that cannot be read at all; a program's libraries and cubins are
    inspected as the members (``on_dist`` is not called: it has no dist-info).

    A wheel for :attr:`Purpose.INSPECT`: as ``inspect`` reads it (see :class:`Purpose`; ``details``: every
    cubin's toolkit version), never raising for bad input; an :class:`InspectObserver` is told each member it
    reads and each report, in archive order. Wheels only: inspect reads a program as
    :mod:`cudaship.inspection.walk` says.

    Members are read on ``pool`` when given (shared with other inputs read at the same time), else on
    ``workers`` threads of its own (default: the usable CPUs, at most 4; one for inspect)."""
    hooks = observer or ScanObserver()
    shown = str(path) if label is None else label
    if purpose is Purpose.INSPECT:
        told = hooks if isinstance(hooks, InspectObserver) else InspectObserver()
        return _start_inspect(Path(path), shown, details, told, pool)
    if is_program(Path(path)):
        record = _scan_program(os.fspath(path), hooks)
        return ScanJob(lambda: record)
    try:
        opened = ZipFile(path)
    except ArchiveError as e:
        raise WheelError(e.message, path=shown) from None
    try:
        try:
            ref: ArchiveRef | None = ArchiveRef.of(path, opened.fileno())
        except OSError:
            ref = None
        return _start_audit(shown, opened, workers, details, hooks, pool, ref, on_dist)
    except BaseException:
        opened.close()
        raise


def _at_once(begin: Callable[_P, ScanJob]) -> Callable[_P, ScannedWheel]:
    """``begin`` and its job's :meth:`ScanJob.finish` in one call, with ``begin``'s parameters."""

    def at_once(*args: _P.args, **kwargs: _P.kwargs) -> ScannedWheel:
        return begin(*args, **kwargs).finish()

    return at_once


#: Read the wheel or exported program (``.pt2``, ``.pte``) at ``path`` once into one record: :func:`start`
#: (the same parameters) and :meth:`ScanJob.finish` at once.
scan = _at_once(start)


def target_platform(dist: DistInfo, filename: str) -> tuple[TargetPlatform, tuple[str, ...]]:
    """A wheel's target platform: the first specific one of its WHEEL tags, else of its file name's tags
    (WHEEL without tags); notes when the tags name several platforms."""
    platforms = platforms_of_tags(dist.wheel.tags) or platforms_of_tags(tags_from_filename(filename))
    specific = [p for p in platforms if p.os not in ("any", "other")]
    first = _first_specific(platforms)
    if len({(p.os, p.machine) for p in specific}) > 1:
        labels = ", ".join(sorted({p.label for p in specific}))
        return first, (f"the wheel's tags name several platforms ({labels}); audited for {first.label}",)
    return first, ()


def _first_specific(platforms: Sequence[TargetPlatform]) -> TargetPlatform:
    """The first of ``platforms`` that names an OS, else the first, else ``any``."""
    specific = [p for p in platforms if p.os not in ("any", "other")]
    if specific:
        return specific[0]
    return platforms[0] if platforms else TargetPlatform("any", None, "any")


def declared_requirements(dist: DistInfo, platform: TargetPlatform) -> tuple[DeclaredFor, ...]:
    """The wheel's Requires-Dist read for its own platform (first) and for each OS a policy may name (the
    wheel's machine on its own OS, else x86_64)."""
    targets = [(platform.os, platform.machine)]
    for os_name in POLICY_OSES:
        target = (os_name, (platform.machine if os_name == platform.os else None) or "x86_64")
        if target not in targets:
            targets.append(target)
    out: list[DeclaredFor] = []
    for os_name, machine in targets:
        try:
            found = requirements_for(dist.metadata.requires_dist, os_name, machine)
        except WheelError as e:
            out.append(DeclaredFor(os_name, machine, (), e.message))
            continue
        out.append(DeclaredFor(os_name, machine, found))
    return tuple(out)


def _start_audit(
    label: str,
    opened: ZipFile,
    workers: int | None,
    details: bool,
    hooks: ScanObserver,
    pool: Workers | None,
    ref: ArchiveRef | None,
    on_dist: Callable[[DistInfo, TargetPlatform], None] | None,
) -> ScanJob:
    archive = opened.archive
    infos = archive.files()
    names = [i.name for i in infos]
    seen: set[str] = set()
    for n in names:
        if n in seen:
            raise WheelError(f"member {n} appears twice in the archive", path=label)
        seen.add(n)
    meta: dict[str, bytes] = {}
    filename = Path(label).name
    try:
        dist_dir = find_dist_info(names, filename)
        for leaf, limit in (
            ("METADATA", MAX_METADATA_BYTES),
            ("WHEEL", MAX_METADATA_BYTES),
            ("RECORD", MAX_RECORD_BYTES),
            (VARIANT_JSON, MAX_VARIANT_JSON),
            (SYMLINKS_FILE, MAX_SYMLINKS_BYTES),  # wheel-axle-runtime's links, made at install time
        ):
            member = archive.get(f"{dist_dir}/{leaf}")
            if member is not None:
                meta[member.name] = archive.read(member, limit)
        dist = read_dist_info(dist_dir, meta, filename)
    except WheelError as e:
        raise e.with_path(label) from None
    except ArchiveError as e:
        raise WheelError(f"cannot read .dist-info: {e.message}", path=label) from None
    platform, platform_notes = target_platform(dist, filename)
    if on_dist is not None:
        on_dist(dist, platform)

    verifier = RecordVerifier(dist.record)
    hooks.planned(sum(i.compressed_size for i in infos))
    # the dist-info files were read above: hash them now rather than reading them a second time
    done: list[MemberResult] = []
    for name, data in meta.items():
        algorithm = verifier.algorithm_for(name)
        done.append(
            MemberResult(name, len(data), hashlib.new(algorithm, data).digest(), algorithm, None, None)
        )
        found = archive.get(name)
        hooks.advanced(found.compressed_size if found is not None else 0)
    order = sorted((i for i in infos if i.name not in meta), key=lambda i: i.compressed_size, reverse=True)
    total = sum(i.size for i in infos)
    small = total < (8 << 20) or len(order) < 2  # not worth a thread: read in the calling one
    closing: list[Callable[[], None]] = []
    if pool is None:
        pool = Workers(1 if small else worker_count(workers))
        closing.append(pool.close)
        small = False
    closing.append(opened.close)
    try:
        pending = _run(label, archive, order, verifier, pool, details, hooks, inline=small, ref=ref)
    except BaseException:
        for close in closing[:-1]:  # the archive is closed by the caller
            close()
        raise

    def collect() -> ScannedWheel:
        results = done + [p.result() for p in pending]
        return assemble(label, filename, dist, dist_dir, infos, verifier, results, platform, platform_notes)

    return ScanJob(collect, closing)


def assemble(
    label: str,
    filename: str,
    dist: DistInfo,
    dist_dir: str,
    infos: Sequence[ZipMember],
    verifier: RecordVerifier,
    results: list[MemberResult],
    platform: TargetPlatform,
    platform_notes: tuple[str, ...],
    *,
    unfetched: Sequence[str] = (),
    known: dict[str, FileReport] | None = None,
) -> ScannedWheel:
    """The record of a wheel read for :attr:`Purpose.AUDIT` from its members' results (``results``: each
    member hashed, and read when native or a Python file). A reader that did not read every member (the
    survey) names the others in ``unfetched`` (in the wheel, unverified, never "missing") and gives the
    reports it has without reading (``known``, by member name)."""
    reports: dict[str, FileReport] = dict(known or {})
    for name in unfetched:
        verifier.not_read(name)
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
        verifier.observe(res.name, res.algorithm, b64_digest(res.digest), res.size)
        if res.report is not None:
            reports[res.name] = res.report
        if isinstance(res.loads, PythonLoads):
            python.append(res.loads)
        elif isinstance(res.loads, LibraryList):
            lists.append(res.loads)
    members = tuple(
        MemberFacts(
            i.name, sizes.get(i.name, i.size), i.compressed_size, install_path(i.name, dist_dir) or i.name
        )
        for i in sorted(infos, key=lambda i: i.name)  # by path, not the zip's order
    )
    return ScannedWheel(
        path=label,
        filename=filename,
        dist=dist,
        members=members,
        reports=dict(sorted(reports.items())),
        record_problems=verifier.problems(),
        unreadable=tuple(sorted(unreadable)),
        platform=platform,
        platform_notes=platform_notes,
        declared=declared_requirements(dist, platform),
        python_loads=tuple(sorted(python, key=lambda p: p.file)),
        library_lists=tuple(sorted(lists, key=lambda p: p.file)),
        unfetched=tuple(sorted(unfetched)),
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
) -> list[Pending[MemberResult]]:
    """Every member in ``order`` handed to the pool's dispatcher. A worker process that dies makes the wheel
    unreadable (one line, exit 2), never an internal error."""

    def failed(member: ZipMember, message: str) -> MemberResult:
        if message == WORKER_DIED:
            raise WheelError(WORKER_DIED, path=label)
        return MemberResult(member.name, 0, None, verifier.algorithm_for(member.name), None, message)

    def advanced(member: ZipMember, _result: MemberResult, _remote: bool) -> None:
        hooks.advanced(member.compressed_size)

    return pool.dispatch(
        archive,
        ref,
        order,
        scan_member,
        lambda member: (label, verifier.algorithm_for(member.name), details),
        failed=failed,
        on_done=advanced,
        inline=inline,
    )


def _start_inspect(
    path: Path, label: str, details: bool, hooks: InspectObserver, pool: Workers | None
) -> ScanJob:
    """Open the wheel at ``path``, read its facts leniently and hand every member that may be native to the
    workers (:meth:`~cudaship.archive.pool.Workers.dispatch`: largest first, so the longest inflations start
    first and the workers finish together; on worker processes for a large wheel). Never raises for bad
    input."""
    closing: list[Callable[[], None]] = []
    if pool is None:
        pool = Workers(1)
        closing.append(pool.close)
    total = file_size(path)
    lock = pool.hooks_lock
    archive: WheelArchive | None = None
    info: WheelInfo | None = None
    error: str | None = None
    members: tuple[ZipMember, ...] = ()
    candidates: list[ZipMember] = []
    pending: list[Pending[FileReport | None]] = []
    try:
        reason = not_regular_reason(path)
        if reason is not None:
            raise CudashipError(reason)
        archive = WheelArchive(path)
        closing.append(archive.close)
        info = archive.info()
    except CudashipError as e:  # not opened, or the archive itself is damaged: reported
        error = e.message
    variant: WheelVariant | None = None
    variant_error: str | None = None
    if archive is not None and error is None:
        try:
            variant = archive.variant()
        except CudashipError as e:
            variant_error = str(e)  # with the wheel's path
    if archive is not None and error is None:
        members = archive.members()
        candidates = [m for m in members if m.size != 0 and not is_text_name(m.name)]
        try:
            pending = _dispatch_native(archive, label, candidates, details, hooks, pool, members)
        except BaseException:
            for close in closing:
                close()
            raise

    def collect() -> ScannedWheel:
        files: list[FileReport] = []
        advanced = 0
        for member, future in zip(candidates, pending, strict=True):
            report = future.result()
            if report is None:
                continue
            files.append(report)
            with lock:
                hooks.done(report)
            advanced += member.compressed_size
        with lock:
            hooks.advanced(max(total - advanced, 0))
        return ScannedWheel(
            path=label,
            filename=path.name,
            dist=_no_dist(path.name),
            members=tuple(
                MemberFacts(m.name, m.size, m.compressed_size, m.name)
                for m in sorted(members, key=lambda m: m.name)
            ),
            reports={},
            record_problems=(),
            unreadable=(),
            platform=_first_specific(platforms_of_tags(info.tags) if info else ()),
            purpose=Purpose.INSPECT,
            info=info,
            error=error,
            files=tuple(sorted(files, key=lambda f: f.path)),  # by path, not the zip's order
            variant=variant,
            variant_error=variant_error,
        )

    return ScanJob(collect, closing)


def _dispatch_native(
    archive: WheelArchive,
    label: str,
    candidates: list[ZipMember],
    details: bool,
    hooks: InspectObserver,
    pool: Workers,
    members: Sequence[ZipMember],
) -> list[Pending[FileReport | None]]:
    try:
        ref: ArchiveRef | None = archive.ref()
    except OSError:
        ref = None

    def reading(member: ZipMember) -> None:
        hooks.reading(f"{label}!{shown_name(member.name)}")

    def done(member: ZipMember, report: FileReport | None, remote: bool) -> None:
        # only members that were read move the progress on; the rest of the wheel's bytes are accounted for
        # when it is finished
        if report is not None:
            if remote:  # a worker process cannot call the hooks: the member is named now
                reading(member)
            hooks.advanced(member.compressed_size)

    def failed(member: ZipMember, message: str) -> FileReport | None:
        return failed_member(member.name, member.size, label, message)

    return pool.dispatch(
        archive.zip,
        ref,
        candidates,
        inspect_member,
        lambda member: (label, details),
        failed=failed,
        on_done=done,
        announce=reading,
        unpacked_bytes=sum(m.size for m in members),
    )


def _no_dist(name: str) -> DistInfo:
    """The dist-info of an input that was read without one (a program, a wheel read for inspect)."""
    return DistInfo(
        directory="",
        metadata=Metadata(name=name, version="", local=None, requires_dist=()),
        wheel=WheelFile(wheel_version=None, root_is_purelib=False, tags=()),
        record=(),
        record_path="",
    )


#: how a member error reads when the archive layer could not give the member's bytes back (inspection.pt2
#: reads members through :mod:`cudaship.archive`; its messages, without the ``member NAME:`` prefix)
_DAMAGED = (
    "corrupt member",
    "corrupt compressed data",
    "compressed stream",
    "more data than the declared",
    "stored member with different sizes",
    "lzma member",
)


def _scan_program(label: str, hooks: ScanObserver) -> ScannedWheel:
    """The program at ``label``: its libraries and cubins inspected, as a wheel scan reports members; its
    target platform from the package's metadata or its library's format, its CUDA train from the newest PTX
    ISA its device code carries. Raises :class:`~cudaship.errors.ProgramError` (naming ``label``) when it is
    not a program."""
    size = Path(label).stat().st_size if Path(label).exists() else 0
    hooks.planned(size)
    # the program readers only for a program: start-up time of inspect and audit of wheels
    from cudaship.inspection.program import read_program
    from cudaship.inspection.program_records import ProgramKind

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
    platform = _program_platform(program.platform, program.machine)
    train = program.train
    name = Path(label).name
    empty = _no_dist(name)
    return ScannedWheel(
        path=label,
        filename=name,
        dist=empty,
        members=tuple(
            MemberFacts(m.name, m.size, m.size, m.name) for m in sorted(program.members, key=lambda m: m.name)
        ),
        reports=dict(sorted(reports.items())),
        record_problems=(),
        unreadable=tuple(sorted(unreadable)),
        platform=platform,
        declared=declared_requirements(empty, platform),
        kind=ContainerKind.PTE if program.kind is ProgramKind.PTE else ContainerKind.PT2,
        program_train=train.version,
        train_evidence=train.source if train.version else None,
        program_notes=program.notes,
    )


def _program_platform(os_name: str | None, machine: str | None) -> TargetPlatform:
    if os_name in ("linux", "windows", "macos"):
        return TargetPlatform(os_name, machine, f"{os_name}_{machine}" if machine else os_name)
    return TargetPlatform("other", machine, os_name or "unknown")
