"""One wheel in, one repaired wheel out: read it the way ``audit`` does, plan, write.

The input is never written. The output goes to ``<directory>/<the input's file name>`` through a temporary
file created exclusively (unpredictable name, ``O_EXCL|O_NOFOLLOW``) in that directory, renamed into place
only when complete and read back (:mod:`.verify`: every claim of the plan holds in what was written, else
nothing is placed: :class:`Unverified`, exit 70). No partial wheel on failure; a link at the output name is
replaced, not followed. A wheel with nothing to change is copied byte for byte, so repairing a repaired wheel
gives the same bytes.
"""

from __future__ import annotations

import dataclasses
import hashlib
import os
import shutil
import tempfile
from dataclasses import dataclass, field
from pathlib import Path

from cudaship import safe_write
from cudaship.archive.zip import ZipArchive, ZipFile, ZipMember
from cudaship.checks.context import AuditContext
from cudaship.checks.table import default_policy
from cudaship.errors import ArchiveError, CudashipError, WheelError
from cudaship.inspection.scan import scan
from cudaship.records.files import ContainerKind
from cudaship.repair import elfedit, verify, windows
from cudaship.repair.plan import plan_repair
from cudaship.repair.records import EditedSize, RecordFix, RepairPlan, Verification, WheelRepair
from cudaship.repair.zipwrite import COPY, DEFLATED, STORED, Entry, Span, write_zip
from cudaship.wheel.metadata import b64_digest
from cudaship.wheel.write import record_bytes, with_requirements


def plan_wheel(
    path: Path, *, workers: int | None = None, drop_unused: bool = False, fix_record: bool = False
) -> tuple[RepairPlan, int]:
    """The plan for the wheel at ``path`` and its uncompressed size. Raises :class:`CudashipError` (with the
    path) for a wheel repair cannot rewrite faithfully. A RECORD that disagrees with the members is refused,
    unless ``fix_record``: then the plan names each disagreeing row, and the output's RECORD is the members'
    (as for every repaired wheel)."""
    plan, uncompressed, _ = _plan(path, workers=workers, drop_unused=drop_unused, fix_record=fix_record)
    return plan, uncompressed


def _plan(
    path: Path, *, workers: int | None, drop_unused: bool, fix_record: bool = False
) -> tuple[RepairPlan, int, verify.Source]:
    """:func:`plan_wheel`, and what the read established about the input for :mod:`.verify`."""
    scanned = scan(path, workers=workers)
    if scanned.kind is not ContainerKind.WHEEL:
        raise WheelError("not a wheel (repair reads wheels only)", path=str(path))
    if scanned.unreadable:
        member, why = scanned.unreadable[0]
        raise WheelError(f"member {member}: {why}", path=str(path))
    if not scanned.dist.directory:
        raise WheelError("no .dist-info directory: not a wheel repair can rewrite", path=str(path))
    named = [p for p in scanned.record_problems if p.kind == "name"]
    if named:  # before the others: such a name is also unlisted, or forged RECORD's row
        raise WheelError(f"member {named[0].message} (repair refuses such a wheel)", path=str(path))
    if scanned.record_problems and not fix_record:
        first = scanned.record_problems[0]
        raise WheelError(
            f"RECORD disagrees with the wheel ({first.message}); repair rewrites RECORD only for a wheel "
            "that matches it (--fix-record rewrites it from the members, naming each row it changes)",
            path=str(path),
        )
    ctx = AuditContext(
        scan=scanned, policy=default_policy(), platform=scanned.platform, notes=list(scanned.platform_notes)
    )
    plan = plan_repair(ctx, drop_unused=drop_unused)
    wrong = {p.path for p in scanned.record_problems}
    if scanned.record_problems:
        fixes = tuple(RecordFix(p.path, p.kind, p.message) for p in scanned.record_problems)
        plan = dataclasses.replace(plan, record_fixes=fixes)
    source = verify.Source(
        path,
        scanned.dist.directory,
        tuple(m.name for m in scanned.members),
        # the rows --fix-record rewrites say nothing true of the input's bytes: not compared with the output
        {e.path: e for e in scanned.dist.record if e.path not in wrong},
    )
    return plan, scanned.uncompressed_size, source


def repair_wheel(
    path: Path,
    directory: Path | None,
    *,
    dry_run: bool = False,
    workers: int | None = None,
    drop_unused: bool = False,
    fix_record: bool = False,
) -> WheelRepair:
    """Repair one wheel into ``directory`` (the plan only when ``dry_run``); a problem becomes the result's
    ``error``, never an exception."""
    label = str(path)
    try:
        size = path.stat().st_size
        plan, uncompressed, source = _plan(
            path, workers=workers, drop_unused=drop_unused, fix_record=fix_record
        )
    except OSError as e:
        return WheelRepair(label, None, error=f"{label}: {e.strerror or e}")
    except CudashipError as e:
        return WheelRepair(label, None, error=str(e.with_path(label)))
    if dry_run or directory is None:
        return WheelRepair(label, plan, size, uncompressed)
    target = directory / plan.filename
    try:
        if _same_file(target, path):
            raise CudashipError("the output would replace the input: give -w another directory", path=label)
        directory.mkdir(parents=True, exist_ok=True)
        after, checked, edited = _write(path, plan, target, source, workers)
        out_size = target.stat().st_size
    except OSError as e:
        return WheelRepair(label, plan, size, uncompressed, error=f"{label}: {e.strerror or e}")
    except Unverified as e:
        return WheelRepair(
            label, plan, size, uncompressed, error=str(e.with_path(label)), verification=e.verification
        )
    except CudashipError as e:
        return WheelRepair(label, plan, size, uncompressed, error=str(e.with_path(label)))
    return WheelRepair(
        label,
        plan,
        size,
        uncompressed,
        str(target),
        out_size,
        after,
        unchanged_copy=not plan.changed,
        verification=checked,
        edited=edited,
    )


class Unverified(WheelError):
    """The written wheel does not hold a claim of its report (:mod:`.verify`): it was not placed. A bug in
    the writer (or in patchelf), never bad input: exit 70."""

    def __init__(self, target: Path, verification: Verification) -> None:
        more = len(verification.failed) - 1
        tail = f" (and {more} more)" if more > 0 else ""
        super().__init__(
            f"the repaired wheel does not match its report, so it was not written to {target}: "
            f"{verification.failed[0]}{tail}"
        )
        self.verification = verification


def _same_file(target: Path, path: Path) -> bool:
    """Whether ``target`` names the input itself (a link at ``target`` is replaced, never followed, so a
    link to the input is not the input)."""
    try:
        return not target.is_symlink() and os.path.samefile(target, path)
    except OSError:
        return False


def _write(
    path: Path, plan: RepairPlan, target: Path, source: verify.Source, workers: int | None
) -> tuple[int, Verification, tuple[EditedSize, ...]]:
    """Write the repaired wheel to ``target``; its uncompressed size and its verification. The bytes go to a
    file created exclusively under an unpredictable name in ``target``'s directory
    (:func:`safe_write.new_file`), read back and checked against every claim of the plan
    (:func:`verify.verify_written`), and renamed into place only when complete and every claim holds
    (else :class:`Unverified`): whatever is at ``target`` (a link included) is replaced, never written
    through; on failure only that temporary file is removed."""
    edited: list[EditedSize] = []
    with safe_write.new_file(target, error=WheelError) as out:
        if not plan.changed:
            with path.open("rb") as src:
                shutil.copyfileobj(src, out.file, COPY)
            total = _uncompressed(path)
        else:
            try:
                opened = ZipFile(path)
                with (
                    opened as archive,
                    tempfile.TemporaryDirectory(dir=target.parent, prefix=".cudaship-repair-") as tmp,
                ):
                    # raw copies are read from the very file the archive maps (not the path opened again)
                    work = _Work(opened.fileno(), Path(tmp), edited)
                    entries, total = _entries(archive, plan, work)
                    write_zip(out.file, entries)
            except ArchiveError as e:
                raise WheelError(e.message) from None
        out.file.flush()
        checked = verify.verify_written(out.tmp, str(target), plan, source, workers=workers)
        if not checked.holds:
            raise Unverified(target, checked)
        out.place()
    return total, checked, tuple(edited)


@dataclass
class _Work:
    """Where the writer reads and spills: the input's descriptor (raw copies are read from it, not from the
    map), a scratch directory beside the output (edited libraries are unpacked there, edited as files,
    and deflated from there), and each library's edit as it is made."""

    fd: int
    scratch: Path
    edited: list[EditedSize] = field(default_factory=list)
    unpacked: int = 0  #: members unpacked so far (each file's name)

    def unpack(self, archive: ZipArchive, member: ZipMember) -> Path:
        """``member``'s bytes in a file of the scratch directory, streamed (never whole in memory)."""
        self.unpacked += 1
        target = self.scratch / f"member-{self.unpacked}"
        with open(target, "wb") as f:
            for chunk in archive.chunks(member):
                f.write(chunk)
        return target


def _file_digest(path: Path) -> str:
    digest = hashlib.sha256()
    with open(path, "rb") as f:
        while chunk := f.read(COPY):
            digest.update(chunk)
    return "sha256=" + b64_digest(digest.digest())


def _uncompressed(path: Path) -> int:
    with ZipFile(path) as archive:
        return sum(m.size for m in archive.files())


def _whole(archive: ZipArchive, member: ZipMember) -> bytes:
    return b"".join(archive.chunks(member))


def _dist_info(plan_filename: str, names: list[str]) -> str:
    found = sorted({n.split("/", 1)[0] for n in names if n.split("/", 1)[0].endswith(".dist-info")})
    if len(found) != 1:
        raise WheelError(f"{len(found)} .dist-info directories at top level: expected one")
    return found[0]


def _entries(archive: ZipArchive, plan: RepairPlan, work: _Work) -> tuple[list[Entry], int]:
    """The entries of the repaired wheel, in the input's order, and its uncompressed size. Nothing large is
    held: an unchanged member is a :class:`Span` of the input file, an edited library or DLL a file of the
    scratch directory; only METADATA and ``__init__.py`` files are edited in memory."""
    members = list(archive.files())
    dist = _dist_info(plan.filename, [m.name for m in members])
    record_path = f"{dist}/RECORD"
    skip = {record_path, f"{dist}/RECORD.jws", f"{dist}/RECORD.p7s"}
    removed = {r.member for r in plan.removed}
    edits = {e.member: e for e in plan.edits}
    pe_edits = {e.member: e for e in plan.pe_edits}
    bootstraps = {b.member: b for b in plan.bootstraps}
    metadata = f"{dist}/METADATA"
    entries: list[Entry] = []
    record: list[tuple[str, str, str | int]] = []
    total = 0
    for m in members:
        if m.name in removed or m.name in skip:
            continue
        if m.name in edits or m.name in pe_edits:
            unpacked = work.unpack(archive, m)
            if m.name in pe_edits:
                windows.rename_imports_file(unpacked, pe_edits[m.name].replace_imports)
            else:
                e = edits[m.name]
                runpath = e.runpath_after if e.runpath_changed else None
                how = elfedit.edit_file(
                    unpacked, e.replace_needed, runpath, rpath=e.was_rpath, remove_needed=e.remove_needed
                )
                work.edited.append(EditedSize(m.name, how, m.size, unpacked.stat().st_size))
            size = unpacked.stat().st_size
            entries.append(Entry(m.name, m.mode, path=unpacked))
            record.append((m.name, _file_digest(unpacked), size))
            total += size
            continue
        if m.name in bootstraps or (m.name == metadata and plan.requirements):
            data = _whole(archive, m)
            if m.name == metadata:
                data = with_requirements(data, tuple(r.text for r in plan.requirements))
            else:
                data = windows.with_bootstrap(data, bootstraps[m.name].directories, m.name)
            entries.append(Entry(m.name, m.mode, data=data))
            record.append((m.name, "sha256=" + b64_digest(hashlib.sha256(data).digest()), len(data)))
            total += len(data)
            continue
        archive.check(m)
        digest = hashlib.sha256()
        if m.method in (STORED, DEFLATED):
            for chunk in archive.chunks(m):  # verifies the CRC the copy carries, and hashes for RECORD
                digest.update(chunk)
            raw = Span(work.fd, m.data_offset, m.compressed_size)
            entries.append(Entry(m.name, m.mode, raw=raw, method=m.method, crc=m.crc, size=m.size))
        else:
            unpacked = work.unpack(archive, m)
            with open(unpacked, "rb") as f:
                while chunk := f.read(COPY):
                    digest.update(chunk)
            entries.append(Entry(m.name, m.mode, path=unpacked))
        record.append((m.name, "sha256=" + b64_digest(digest.digest()), m.size))
        total += m.size
    record.append((record_path, "", ""))
    blob = record_bytes(record)
    entries.append(Entry(record_path, 0o644, data=blob))
    return entries, total + len(blob)
