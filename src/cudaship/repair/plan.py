"""What a repair changes, decided over the audit's view of a wheel (:class:`AuditContext`): pure, no bytes.

1. **De-vendor.** A shipped library whose SONAME or name (auditwheel's hash removed; a copy named by its
   full version, ``libcudart-<hash>.so.11.8.89``, is the file it was copied from, ``libcudart.so.11.0``)
   an NVIDIA wheel checked for the wheel's platform ships for the wheel's CUDA major is removed, unless the
   wheel is that provider itself. Every other CUDA library stays, with the reason
   (:func:`~cudaship.knowledge.repair.unprovided`).
2. **DT_NEEDED.** Every entry naming a removed copy (by its SONAME or file name) is set back to the library's
   own name.
3. **RUNPATH.** Each remaining ELF that needs a library an NVIDIA wheel provides gets ``$ORIGIN``-relative
   entries into those wheels' directories, at its own depth; entries that find the wheel's own remaining
   libraries (or anything outside it, such as another package's directory) stay; absolute paths (a build
   machine's) and entries into directories left holding nothing go.
4. **Requirements.** Each NVIDIA wheel a remaining library needs, that the audit judges required (shipped,
   a requirement or missing: :mod:`cudaship.repair.judged`; an extra, a host, a variant or a preload is left
   alone with a note), and no declared requirement names is added,
   with the platform marker and the version range of :func:`cudaship.knowledge.repair.provision`;
   ``cuda-toolkit`` extras of one range are merged into one requirement.
"""

from __future__ import annotations

import posixpath
from collections.abc import Iterable
from dataclasses import dataclass, field, replace

from packaging.utils import canonicalize_name

from cudaship.checks import closure
from cudaship.checks.context import AuditContext
from cudaship.knowledge.libraries import identify
from cudaship.knowledge.repair import Provision, providers_of, provision, unhashed, unprovided
from cudaship.records.binary import FileFormat, HostBinary, ImportKind
from cudaship.records.files import FileReport
from cudaship.records.findings import Status
from cudaship.repair.judged import follow
from cudaship.repair.records import ElfEdit, Kept, Removed, RepairPlan, Unread
from cudaship.repair.requirements import covered, declared_cover, merge_requirements, one_major
from cudaship.repair.windows import plan_windows

_ORIGIN = ("$ORIGIN", "${ORIGIN}")


def _origin_target(entry: str, directory: str) -> str | None:
    """The site-packages relative directory an ``$ORIGIN`` entry of a library in ``directory`` names; None
    for an entry not relative to ``$ORIGIN``."""
    for origin in _ORIGIN:
        if entry == origin or entry.startswith(origin + "/"):
            rest = entry[len(origin) :].lstrip("/")
            return posixpath.normpath(posixpath.join(directory, rest)) if rest else (directory or ".")
    return None


def _origin_entry(target: str, directory: str) -> str:
    rel = posixpath.relpath(target, directory or ".")
    return "$ORIGIN" if rel == "." else f"$ORIGIN/{rel}"


def unused_cuda(ctx: AuditContext) -> dict[str, set[str]]:
    """Installed path -> the CUDA DT_NEEDED entries none of whose symbols it uses, as the audit's closure
    family judges them (only when the policy runs that check)."""
    if not ctx.policy.closure.unused_imports:
        return {}
    out: dict[str, set[str]] = {}
    for result in closure.run(ctx):
        if not result.name.startswith("closure: unused imports in ") or result.status is not Status.FAIL:
            continue
        for finding in result.evidence:
            found = identify(finding.symbol) if finding.symbol else None
            if finding.file and finding.symbol and found is not None and not found.driver:
                out.setdefault(finding.file, set()).add(finding.symbol)
    return out


def plan_repair(ctx: AuditContext, *, drop_unused: bool = False) -> RepairPlan:
    """The repair of the wheel ``ctx`` audits (Linux and Windows; another platform gets a plan that changes
    nothing, with the reason), naming the native members whose readers failed (:class:`Unread`)."""
    unread = tuple(
        Unread(member, report.error)
        for member, report in sorted(ctx.scan.reports.items())
        if report.error is not None
    )
    majors = tuple(sorted({v.train.major for v in ctx.variants.values() if v.train is not None}))
    return replace(_plan(ctx, drop_unused), unread=unread, variant_majors=majors)


def _plan(ctx: AuditContext, drop_unused: bool) -> RepairPlan:
    scan = ctx.scan
    train = ctx.train
    label = f"{train.version} ({ctx.train_source})" if train is not None else ctx.train_source
    os_name = ctx.os
    if os_name == "windows":
        return plan_windows(ctx, label)
    if os_name != "linux":
        note = f"a {os_name} wheel: cudaship repair edits Linux and Windows wheels only; nothing changed"
        return RepairPlan(
            scan.path, scan.filename, os_name, label, train.major if train else None, notes=(note,)
        )
    linux = _Linux(ctx)
    vendored = _devendor(ctx, linux)
    remaining = {p: r for p, r in ctx.libraries.items() if p not in vendored.provided}
    own_dir, emptied = _own_directories(remaining, vendored.provided)
    unused = unused_cuda(ctx) if drop_unused else {}
    names, extras = declared_cover(ctx)
    audit = follow(ctx)  # the audit's classification decides what becomes a requirement
    edits: list[ElfEdit] = []
    needs: dict[str, tuple[Provision, list[str]]] = {}
    seen = {p.major for p in vendored.provided.values()}  # the CUDA majors of what the libraries need
    for path, report in sorted(remaining.items()):
        host = report.host
        if host is None or report.format is not FileFormat.ELF:
            continue
        drop = tuple(sorted(unused.get(path, set())))
        needed = [i.library for i in host.imports if i.kind is ImportKind.NEEDED and i.library not in drop]
        replace = tuple((n, vendored.renamed[n]) for n in needed if n in vendored.renamed)
        after = [vendored.renamed.get(n, n) for n in needed]
        siblings = _sibling_dirs(after, own_dir)  # directories of the shipped libraries it needs
        wanted: list[str] = []
        original = {vendored.renamed.get(n, n): n for n in needed}
        for lib, p in _provided(after, own_dir, linux):
            seen.add(p.major)
            if p.directory not in wanted:
                wanted.append(p.directory)
            if not covered(p, names, extras) and audit.required(path, original.get(lib, lib)):
                needs.setdefault(p.requirement, (p, []))[1].append(lib)
        if wanted or replace or drop:
            edit = _edit(
                linux.member(path), host, posixpath.dirname(path), emptied, siblings, wanted, replace, drop
            )
            if edit is not None:
                edits.append(edit)
    return RepairPlan(
        scan.path,
        scan.filename,
        os_name,
        label,
        linux.major if linux.major is not None else one_major(seen),
        tuple(vendored.removed),
        tuple(vendored.kept),
        tuple(edits),
        merge_requirements(needs),
        audit.notes(),
    )


class _Linux:
    """What the Linux plan looks libraries up with: the train's major and minor, the wheel's members."""

    def __init__(self, ctx: AuditContext) -> None:
        train = ctx.train
        self.major = train.major if train is not None else None
        self.minor = train.minor if train is not None else None
        self.machine = ctx.platform.machine
        self._member_of = {installed: member for member, installed in ctx.installed.items()}

    def provision(self, name: str) -> Provision | None:
        return provision(name, "linux", self.major, self.minor, self.machine)

    def unprovided(self, name: str) -> str | None:
        return unprovided(name, "linux", self.major, self.machine)

    def member(self, installed: str) -> str:
        return self._member_of.get(installed, installed)


@dataclass
class _Vendored:
    """The shipped libraries an NVIDIA wheel provides: removed, or kept (with why), and their names."""

    removed: list[Removed] = field(default_factory=list)
    kept: list[Kept] = field(default_factory=list)
    provided: dict[str, Provision] = field(default_factory=dict)  #: installed path -> what provides it
    renamed: dict[str, str] = field(default_factory=dict)  #: a removed copy's names -> the library's own name


def _devendor(ctx: AuditContext, linux: _Linux) -> _Vendored:
    sizes = {m.name: m for m in ctx.scan.members}
    project = canonicalize_name(ctx.scan.dist.metadata.name or "")
    out = _Vendored()
    for path, report in sorted(ctx.libraries.items()):
        host = report.host
        if host is None or report.format is not FileFormat.ELF:
            continue
        base = posixpath.basename(path)
        name = host.soname or base
        p = linux.provision(name) or linux.provision(base)
        member = linux.member(path)
        if p is None:
            why = linux.unprovided(name) or linux.unprovided(base)
            if why is not None:  # a CUDA library that stays: say why (CUDA 10, NVRTC's builtins, no version)
                out.kept.append(Kept(member, unhashed(name, "linux"), why))
            continue
        if canonicalize_name(p.project) == project or posixpath.dirname(path) == p.directory:
            out.kept.append(Kept(member, p.library, f"the wheel is {p.project}, the library's provider"))
            continue
        # the NVIDIA wheel of another major shipping its own library (nvidia-cufile, CUDA 13, read as 12.x):
        # the audit's rule too (checks.judgement.vendored_copies)
        owner = next(
            (
                o
                for n in dict.fromkeys((name, base))
                for o, d in providers_of(n, "linux")
                if canonicalize_name(o) == project or d == posixpath.dirname(path)
            ),
            None,
        )
        if owner is not None:
            out.kept.append(Kept(member, p.library, f"the wheel is {owner}, the library's provider"))
            continue
        facts = sizes.get(member)
        size, compressed = (facts.size, facts.compressed_size) if facts else (0, 0)
        out.removed.append(Removed(member, p.library, size, compressed, p.project, p.directory))
        out.provided[path] = p
        for alias in {name, base}:
            if alias != p.library:
                out.renamed[alias] = p.library
    return out


def _own_directories(
    remaining: dict[str, FileReport], provided: dict[str, Provision]
) -> tuple[dict[str, str], set[str]]:
    """A remaining library's names -> its directory, and the directories the removals leave empty."""
    own_dir: dict[str, str] = {}
    own_dirs: set[str] = set()
    for path, report in sorted(remaining.items()):
        own_dir.setdefault(posixpath.basename(path), posixpath.dirname(path) or ".")
        if report.host is not None and report.host.soname:
            own_dir.setdefault(report.host.soname, posixpath.dirname(path) or ".")
        own_dirs.add(posixpath.dirname(path) or ".")
    return own_dir, {posixpath.dirname(p) or "." for p in provided} - own_dirs


def _sibling_dirs(needed: list[str], own_dir: dict[str, str]) -> list[str]:
    siblings: list[str] = []
    for lib in needed:
        if lib in own_dir and own_dir[lib] not in siblings:
            siblings.append(own_dir[lib])
    return siblings


def _provided(needed: list[str], own_dir: dict[str, str], linux: _Linux) -> list[tuple[str, Provision]]:
    """The needed libraries not shipped that an NVIDIA wheel provides, with their provider."""
    out: list[tuple[str, Provision]] = []
    for lib in needed:
        if lib in own_dir:
            continue
        p = linux.provision(lib)
        if p is not None:
            out.append((lib, p))
    return out


def _edit(
    member: str,
    host: HostBinary,
    directory: str,
    emptied: set[str],
    siblings: list[str],
    wanted: list[str],
    replace: tuple[tuple[str, str], ...],
    drop: tuple[str, ...],
) -> ElfEdit | None:
    """One library's edit, or None when its search path already is what it needs and nothing is renamed or
    dropped."""
    before = host.runpath or host.rpath
    was_rpath = not host.runpath and bool(host.rpath)
    # a library that had no search path found its shipped siblings through its loader's DT_RPATH; a
    # DT_RUNPATH of its own would hide that (glibc ignores the chain's RPATH then): name them here
    keep = siblings if not before else []
    entries, dropped = _runpath(before, directory, emptied, keep + wanted)
    if not replace and not drop and tuple(entries) == tuple(before):
        return None
    return ElfEdit(member, replace, tuple(before), tuple(entries), tuple(dropped), was_rpath, drop)


def _runpath(
    before: Iterable[str], directory: str, emptied: set[str], wanted: list[str]
) -> tuple[list[str], list[tuple[str, str]]]:
    entries: list[str] = []
    dropped: list[tuple[str, str]] = []
    targets: set[str] = set()
    for entry in before:
        target = _origin_target(entry, directory)
        if target is None:
            dropped.append((entry, "not relative to $ORIGIN: a directory of the build machine"))
            continue
        if target in emptied:
            dropped.append((entry, "its directory held only the de-vendored libraries"))
            continue
        if target in targets:
            continue
        targets.add(target)
        entries.append(entry)
    for want in wanted:
        if want not in targets:
            targets.add(want)
            entries.append(_origin_entry(want, directory))
    return entries, dropped
