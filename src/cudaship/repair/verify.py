"""The repaired wheel read back before it is placed: every claim of the report checked against what was
written (issue 30).

The written file (still under its temporary name) is read by the same reader as any input
(:func:`cudaship.inspection.scan.scan`, as ``audit`` and ``repair`` read a wheel: every member streamed and
hashed against RECORD, the native ones read into records, the Python files' library loads), and each claim
of the plan is checked against that record:

- **RECORD** matches every member (hash and size), lists every member and nothing else; every member reads
  back (CRC, sizes); the ``.dist-info`` directory is the input's;
- **removed**: each member the report removes is absent (and RECORD's signatures, dropped when anything
  changed);
- **kept**: every other member of the input is present, and each one the report does not edit has the
  input's bytes (its digest in the written RECORD, verified above, equal to the input's RECORD entry, which
  the planning read verified against the input; a digest of another algorithm is computed afresh);
  nothing else is in the wheel; a wheel with nothing to change is the input's bytes;
- **DT_NEEDED / RUNPATH**: each edited library names the new entries, no longer the old ones, and has the
  search path the report gives (in the kind it gives); **imports**: each renamed PE import, likewise;
- **requires**: each added requirement is in METADATA's ``Requires-Dist`` as the email-header parser reads
  it (compared as parsed requirements), and METADATA is the input's headers, then the added entries, then
  the input's body;
- **bootstrap**: each ``__init__.py`` has a bootstrap block adding the reported directories, as repair's
  own reader of the block (:func:`cudaship.wheel.bootstrap.bootstraps`) finds it.

Records in, a :class:`~cudaship.repair.records.Verification` out; nothing printed. ``run`` places the
output only when every claim holds.
"""

from __future__ import annotations

import hashlib
from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import Path

from packaging.requirements import InvalidRequirement, Requirement

from cudaship.archive.zip import ZipArchive, ZipFile
from cudaship.errors import ArchiveError, CudashipError
from cudaship.inspection.scan import ScannedWheel, scan
from cudaship.records.binary import HostBinary, ImportKind
from cudaship.repair.records import RepairPlan, Verification
from cudaship.wheel.bootstrap import bootstraps
from cudaship.wheel.metadata import MAX_METADATA_BYTES, b64_digest, metadata_fields
from cudaship.wheel.records import RecordEntry

#: The most bytes of an ``__init__.py`` read back to find its bootstrap (the writer read it whole too).
MAX_INIT_BYTES = 64 << 20


@dataclass(frozen=True)
class Source:
    """What the planning read of the input established: its members, and its RECORD (verified then against
    every member: repair refuses a wheel whose RECORD disagrees)."""

    path: Path
    dist_dir: str
    members: tuple[str, ...]
    record: Mapping[str, RecordEntry]


@dataclass
class _Claims:
    checked: int = 0
    failed: list[str] = field(default_factory=list)

    def check(self, holds: bool, claim: str) -> None:
        self.checked += 1
        if not holds:
            self.failed.append(claim)

    def result(self) -> Verification:
        return Verification(self.checked, tuple(self.failed))


def verify_written(
    written: Path, label: str, plan: RepairPlan, source: Source, *, workers: int | None = None
) -> Verification:
    """Each claim of ``plan`` checked against the wheel at ``written`` (read as ``label``, the name it will
    have), whose input ``source`` describes."""
    claims = _Claims()
    try:
        out = scan(written, label=label, workers=workers, details=False)
    except CudashipError as e:
        claims.check(False, f"it cannot be read back: {e.message}")
        return claims.result()
    try:
        with ZipFile(written) as archive:
            _check(claims, out, archive, written, plan, source)
    except ArchiveError as e:
        claims.check(False, f"it cannot be read back: {e.message}")
    except CudashipError as e:
        claims.check(False, f"it cannot be read back: {e.message}")
    return claims.result()


def _check(
    claims: _Claims, out: ScannedWheel, archive: ZipArchive, written: Path, plan: RepairPlan, source: Source
) -> None:
    dist = source.dist_dir
    claims.check(out.dist.directory == dist, f"its .dist-info is {out.dist.directory}, not {dist}")
    for name, why in out.unreadable:
        claims.check(False, f"member {name} cannot be read back: {why}")
    problems = out.record_problems
    claims.check(
        not problems, f"RECORD does not match the members: {problems[0].message}" if problems else ""
    )
    names = {m.name for m in out.members}

    removed = {r.member for r in plan.removed}
    for member in sorted(removed):
        claims.check(member not in names, f"{member} is reported removed but is in the wheel")
    signatures = {f"{dist}/RECORD.jws", f"{dist}/RECORD.p7s"} if plan.changed else set()
    for member in sorted(signatures & set(source.members)):
        claims.check(member not in names, f"{member} (a signature RECORD no longer matches) is still there")
    expected = set(source.members) - removed - signatures
    for member in sorted(expected - names):
        claims.check(False, f"member {member} is missing (the report keeps it)")
    for member in sorted(names - expected):
        claims.check(False, f"member {member} is in the wheel, but neither in the input nor in the report")

    metadata = f"{dist}/METADATA"
    edited = {e.member for e in plan.edits} | {e.member for e in plan.pe_edits}
    edited |= {b.member for b in plan.bootstraps}
    if plan.requirements:
        edited.add(metadata)
    if plan.changed:
        edited.add(f"{dist}/RECORD")
    _kept(claims, out, archive, sorted((expected & names) - edited), source)
    if not plan.changed:
        claims.check(
            _file_digest(written) == _file_digest(source.path),
            "the copy is not the input's bytes (nothing was to change)",
        )

    for e in plan.edits:
        host = _host(claims, out, e.member)
        if host is None:
            continue
        needed = {i.library for i in host.imports if i.kind is ImportKind.NEEDED}
        for old, new in e.replace_needed:
            claims.check(new in needed, f"{e.member}: DT_NEEDED {new} is reported but absent")
            claims.check(
                old not in needed, f"{e.member}: DT_NEEDED {old} is reported replaced but is still there"
            )
        for gone in e.remove_needed:
            claims.check(
                gone not in needed, f"{e.member}: DT_NEEDED {gone} is reported removed but is still there"
            )
        if e.runpath_changed:
            kind, got = ("DT_RPATH", host.rpath) if e.was_rpath else ("DT_RUNPATH", host.runpath)
            claims.check(
                tuple(got) == e.runpath_after,
                f"{e.member}: {kind} is {':'.join(got) or '(none)'}, "
                f"the report says {':'.join(e.runpath_after) or '(none)'}",
            )
    for pe in plan.pe_edits:
        host = _host(claims, out, pe.member)
        if host is None:
            continue
        imported = {i.library.lower() for i in host.imports}
        for old, new in pe.replace_imports:
            claims.check(new.lower() in imported, f"{pe.member}: import {new} is reported but absent")
            claims.check(
                old.lower() not in imported,
                f"{pe.member}: import {old} is reported renamed but is still there",
            )

    requires = {_normal(t) for t in out.dist.metadata.requires_dist}
    for q in plan.requirements:
        claims.check(_normal(q.text) in requires, f"requirement {q.text} is not in METADATA's Requires-Dist")
    if plan.requirements and metadata in names:
        _metadata_kept(claims, archive, metadata, plan, source)

    for b in plan.bootstraps:
        init = archive.get(b.member)
        if init is None:
            continue  # reported missing above
        if init.size > MAX_INIT_BYTES:
            claims.check(False, f"{b.member}: {init.size} bytes, too large to read its bootstrap back")
            continue
        found = {d for block in bootstraps(archive.read(init, MAX_INIT_BYTES), b.member) for d in block}
        missing = sorted(set(b.directories) - found)
        claims.check(
            not missing,
            f"{b.member}: no bootstrap adds {', '.join(missing)} (the report says one does)",
        )


def _host(claims: _Claims, out: ScannedWheel, member: str) -> HostBinary | None:
    report = out.reports.get(member)
    host = report.host if report is not None else None
    if host is None and member in {m.name for m in out.members}:
        why = report.error if report is not None and report.error else "not read as a native library"
        claims.check(False, f"{member}: its edits cannot be read back ({why})")
    return host


def _kept(claims: _Claims, out: ScannedWheel, archive: ZipArchive, kept: list[str], source: Source) -> None:
    """Each of ``kept`` has the input's bytes: the written RECORD's digest (verified against the bytes by the
    scan) equal to the input's RECORD digest; computed afresh where the input's RECORD used another
    algorithm. Entries without a digest (RECORD itself, its signatures) are covered by the copy's check."""
    written = {e.path: e for e in out.dist.record}
    for name in kept:
        was = source.record.get(name)
        if was is None or was.algorithm is None or was.digest is None:
            continue
        now = written.get(name)
        if now is not None and now.algorithm == was.algorithm and now.digest is not None:
            same = now.digest == was.digest and (was.size is None or now.size == was.size)
        else:
            digest = hashlib.new(was.algorithm)
            size = 0
            member = archive.get(name)
            for chunk in archive.chunks(member) if member is not None else ():
                digest.update(chunk)
                size += len(chunk)
            same = b64_digest(digest.digest()) == was.digest and (was.size is None or size == was.size)
        claims.check(same, f"member {name} is reported kept but its bytes changed")


def _metadata_kept(
    claims: _Claims, archive: ZipArchive, metadata: str, plan: RepairPlan, source: Source
) -> None:
    """METADATA written is the input's header fields, the added ``Requires-Dist`` entries after them, and
    the input's body."""
    with ZipFile(source.path) as original:
        member = original.get(metadata)
        before = original.read(member, MAX_METADATA_BYTES) if member is not None else b""
    written = archive.get(metadata)
    after = archive.read(written, MAX_METADATA_BYTES) if written is not None else b""
    fields_before, body_before = metadata_fields(before)
    fields_after, body_after = metadata_fields(after)
    added = tuple(("Requires-Dist", q.text) for q in plan.requirements)
    claims.check(
        fields_after == fields_before + added,
        "METADATA's header fields are not the input's followed by the added Requires-Dist entries",
    )
    claims.check(body_after == body_before, "METADATA's body is not the input's")


def _normal(text: str) -> str:
    try:
        return str(Requirement(text))
    except InvalidRequirement:
        return " ".join(text.split())


def _file_digest(path: Path) -> bytes:
    digest = hashlib.sha256()
    with path.open("rb") as f:
        for block in iter(lambda: f.read(1 << 20), b""):
            digest.update(block)
    return digest.digest()
