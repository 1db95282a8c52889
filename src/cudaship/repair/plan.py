"""What a repair changes, decided over the audit's view of a wheel (:class:`AuditContext`): pure, no bytes.

1. **De-vendor.** A shipped library whose name (auditwheel's hash removed) an NVIDIA wheel provides for the
   wheel's CUDA major is removed, unless the wheel is that provider itself.
2. **DT_NEEDED.** Every entry naming a removed copy (by its SONAME or file name) is set back to the library's
   own name.
3. **RUNPATH.** Each remaining ELF that needs a library an NVIDIA wheel provides gets ``$ORIGIN``-relative
   entries into those wheels' directories, at its own depth; entries that find the wheel's own remaining
   libraries (or anything outside it, such as another package's directory) stay; absolute paths (a build
   machine's) and entries into directories left holding nothing go.
4. **Requirements.** Each NVIDIA wheel a remaining library needs and no declared requirement names is added,
   with the platform marker and the version range of :func:`cudaship.knowledge.repair.provision`;
   ``cuda-toolkit`` extras of one range are merged into one requirement.
"""

from __future__ import annotations

import posixpath
from collections.abc import Iterable

from packaging.utils import canonicalize_name

from cudaship.checks import closure
from cudaship.checks.context import AuditContext
from cudaship.knowledge.libraries import OS, identify
from cudaship.knowledge.repair import Provision, provision
from cudaship.records.binary import FileFormat, ImportKind
from cudaship.records.findings import Status
from cudaship.repair.records import ElfEdit, Kept, Removed, RepairPlan
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
    """The repair of the wheel ``ctx`` audits (Linux; a Windows wheel gets a plan that changes nothing, with
    the reason)."""
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
    os: OS = "linux"
    major = train.major if train is not None else None
    minor = train.minor if train is not None else None
    member_of = {installed: member for member, installed in ctx.installed.items()}
    sizes = {m.name: m for m in scan.members}
    project = canonicalize_name(scan.dist.metadata.name or "")

    removed: list[Removed] = []
    kept: list[Kept] = []
    provided: dict[str, Provision] = {}  # installed path -> what provides it
    renamed: dict[str, str] = {}  # a removed copy's names -> the library's own name
    for path, report in sorted(ctx.libraries.items()):
        host = report.host
        if host is None or report.format is not FileFormat.ELF:
            continue
        base = posixpath.basename(path)
        name = host.soname or base
        p = provision(name, os, major, minor) or provision(base, os, major, minor)
        if p is None:
            continue
        member = member_of.get(path, path)
        if canonicalize_name(p.project) == project or posixpath.dirname(path) == p.directory:
            kept.append(Kept(member, p.library, f"the wheel is {p.project}, the library's provider"))
            continue
        facts = sizes.get(member)
        removed.append(
            Removed(
                member,
                p.library,
                facts.size if facts else 0,
                facts.compressed_size if facts else 0,
                p.project,
                p.directory,
            )
        )
        provided[path] = p
        for alias in {name, base}:
            if alias != p.library:
                renamed[alias] = p.library

    remaining = {p: r for p, r in ctx.libraries.items() if p not in provided}
    own_dir: dict[str, str] = {}  # a remaining library's names -> its directory
    own_dirs: set[str] = set()
    for path, report in sorted(remaining.items()):
        own_dir.setdefault(posixpath.basename(path), posixpath.dirname(path) or ".")
        if report.host is not None and report.host.soname:
            own_dir.setdefault(report.host.soname, posixpath.dirname(path) or ".")
        own_dirs.add(posixpath.dirname(path) or ".")
    emptied = {posixpath.dirname(p) or "." for p in provided} - own_dirs

    unused = unused_cuda(ctx) if drop_unused else {}
    edits: list[ElfEdit] = []
    needs: dict[str, tuple[Provision, list[str]]] = {}
    seen = {p.major for p in provided.values()}  # the CUDA majors of what the libraries need
    names, extras = declared_cover(ctx)
    for path, report in sorted(remaining.items()):
        host = report.host
        if host is None or report.format is not FileFormat.ELF:
            continue
        directory = posixpath.dirname(path)
        drop = tuple(sorted(unused.get(path, set())))
        needed = [i.library for i in host.imports if i.kind is ImportKind.NEEDED and i.library not in drop]
        replace = tuple((n, renamed[n]) for n in needed if n in renamed)
        after = [renamed.get(n, n) for n in needed]
        wanted: list[str] = []
        siblings: list[str] = []  # directories of the shipped libraries it needs
        for lib in after:
            if lib in own_dir:
                if own_dir[lib] not in siblings:
                    siblings.append(own_dir[lib])
                continue
            p = provision(lib, os, major, minor)
            if p is None:
                continue
            seen.add(p.major)
            if p.directory not in wanted:
                wanted.append(p.directory)
            if not covered(p, names, extras):
                needs.setdefault(p.requirement, (p, []))[1].append(lib)
        if not wanted and not replace and not drop:
            continue
        before = host.runpath or host.rpath
        was_rpath = not host.runpath and bool(host.rpath)
        # a library that had no search path found its shipped siblings through its loader's DT_RPATH; a
        # DT_RUNPATH of its own would hide that (glibc ignores the chain's RPATH then): name them here
        keep = siblings if not before else []
        entries, dropped = _runpath(before, directory, emptied, keep + wanted)
        if not replace and not drop and tuple(entries) == tuple(before):
            continue
        edits.append(
            ElfEdit(
                member_of.get(path, path),
                replace,
                tuple(before),
                tuple(entries),
                tuple(dropped),
                was_rpath,
                drop,
            )
        )
    return RepairPlan(
        scan.path,
        scan.filename,
        os_name,
        label,
        major if major is not None else one_major(seen),
        tuple(removed),
        tuple(kept),
        tuple(edits),
        merge_requirements(needs),
        (),
    )


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
