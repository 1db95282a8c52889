"""Repairing a Windows wheel: the CUDA DLLs delvewheel (or a build) copied in that an NVIDIA wheel publishes
for Windows are removed; each import naming a removed copy is set back to the DLL's own name, in place (the
own name, ``cudart64_13.dll``, is shorter than delvewheel's mangled ``cudart64_13-<32 hex>.dll``); the
package's ``__init__.py`` gets a few lines that add the NVIDIA wheel's DLL directory with
``os.add_dll_directory`` before its extensions load (Windows searches no RUNPATH; delvewheel patches
``__init__.py`` the same way for its ``<pkg>.libs``). A CUDA DLL that NVIDIA publishes no Windows wheel for
(NCCL, cuFile), or that no package ``__init__.py`` could bootstrap, stays, and the plan says why."""

from __future__ import annotations

import mmap
import os
import posixpath

from cudaship.binary.pe import import_name_offsets
from cudaship.checks.context import AuditContext
from cudaship.errors import CudashipError
from cudaship.knowledge.repair import Provision, provision, unhashed, unprovided
from cudaship.records.binary import FileFormat
from cudaship.repair.judged import follow
from cudaship.repair.records import Bootstrap, Kept, PeEdit, Removed, RepairPlan
from cudaship.repair.requirements import covered, declared_cover, merge_requirements, one_major
from cudaship.wheel import bootstrap

#: The first line of the bootstrap (the block itself: :mod:`cudaship.wheel.bootstrap`).
MARKER = bootstrap.MARKER


def plan_windows(ctx: AuditContext, label: str) -> RepairPlan:
    scan = ctx.scan
    train = ctx.train
    major, minor = (train.major, train.minor) if train else (None, None)
    machine = ctx.platform.machine
    member_of = {installed: member for member, installed in ctx.installed.items()}
    facts = {m.name: m for m in scan.members}
    files = set(ctx.installed.values())
    removable: dict[str, Provision] = {}
    kept: list[Kept] = []
    for path, report in sorted(ctx.libraries.items()):
        if report.format is not FileFormat.PE:
            continue
        base = posixpath.basename(path)
        plain = unhashed(base, "windows")
        p = provision(base, "windows", major, minor, machine)
        if p is None:
            why = unprovided(base, "windows", major, machine)
            if why is not None:
                kept.append(Kept(member_of.get(path, path), plain, why))
            continue
        removable[path] = p

    # a removable DLL stays when one of its importers is in no package whose __init__.py could add the
    # NVIDIA wheel's directory
    shipped = {posixpath.basename(p).lower() for p in ctx.libraries}
    for path in sorted(removable):
        base = posixpath.basename(path).lower()
        users = [
            u
            for u, r in ctx.libraries.items()
            if r.host and any(i.library.lower() == base for i in r.host.imports)
        ]
        if any(_init_of(u) not in files for u in users):
            p = removable.pop(path)
            why = "a library importing it is in no package with an __init__.py to add the DLL directory from"
            kept.append(Kept(member_of.get(path, path), p.library, why))
    renamed = {posixpath.basename(p).lower(): prov.library for p, prov in removable.items()}
    shipped -= set(renamed)
    removed = []
    for path, p in sorted(removable.items()):
        member = member_of.get(path, path)
        m = facts.get(member)
        size, packed = (m.size, m.compressed_size) if m else (0, 0)
        removed.append(Removed(member, p.library, size, packed, p.project, p.directory))

    existing = {pl.file: set(pl.strings) for pl in scan.python_loads}
    renames: dict[str, list[tuple[str, str]]] = {}
    dirs: dict[str, set[str]] = {}  # __init__.py -> directories
    needs: dict[str, tuple[Provision, list[str]]] = {}
    names_declared, extras = declared_cover(ctx)
    audit = follow(ctx)  # the audit's classification decides what is required (repair/judged.py)
    seen = {p.major for p in removable.values()}
    for path, report in sorted(ctx.libraries.items()):
        if report.host is None or report.format is not FileFormat.PE or path in removable:
            continue
        for imp in report.host.imports:
            own = renamed.get(imp.library.lower())
            if own is not None and own != imp.library:
                renames.setdefault(member_of.get(path, path), []).append((imp.library, own))
            name = own or imp.library
            if name.lower() in shipped:
                continue
            p = provision(name, "windows", major, minor, machine)
            init = _init_of(path)
            if p is None:
                continue
            seen.add(p.major)
            if init not in files or not audit.required(path, imp.library):
                continue
            rel = posixpath.relpath(p.directory, posixpath.dirname(init))
            if rel not in existing.get(member_of.get(init, init), set()):
                dirs.setdefault(init, set()).add(rel)
            if not covered(p, names_declared, extras):
                needs.setdefault(p.requirement, (p, []))[1].append(p.library)
    bootstraps = tuple(Bootstrap(member_of.get(i, i), tuple(sorted(d))) for i, d in sorted(dirs.items()))
    return RepairPlan(
        scan.path,
        scan.filename,
        "windows",
        label,
        major if major is not None else one_major(seen),
        tuple(removed),
        tuple(kept),
        (),
        merge_requirements(needs),
        audit.notes(),
        tuple(PeEdit(m, tuple(sorted(set(r)))) for m, r in sorted(renames.items())),
        bootstraps,
    )


def _init_of(path: str) -> str:
    """The ``__init__.py`` of the top-level package holding ``path`` (a top-level module has none)."""
    return f"{path.split('/', 1)[0]}/__init__.py" if "/" in path else ""


def rename_imports(data: bytes, renames: tuple[tuple[str, str], ...]) -> bytes:
    """``data`` (a PE file) with each imported DLL name ``old`` written as ``new`` in place, NUL-padded;
    ``new`` must not be longer than ``old``."""
    out = bytearray(data)
    wanted = {old.lower(): new for old, new in renames}
    done: set[str] = set()
    for name, offset in import_name_offsets(data):
        new = wanted.get(name.lower())
        if new is None:
            continue
        raw = new.encode("ascii")
        if len(raw) > len(name.encode("ascii", "replace")):
            raise CudashipError(f"import {name}: the name {new} does not fit in its place")
        out[offset : offset + len(name)] = raw + b"\0" * (len(name) - len(raw))
        done.add(name.lower())
    missing = sorted(set(wanted) - done)
    if missing:
        raise CudashipError(f"no import named {missing[0]} to rename")
    return bytes(out)


def rename_imports_file(path: os.PathLike[str] | str, renames: tuple[tuple[str, str], ...]) -> None:
    """:func:`rename_imports` on the PE file at ``path``, in place (read through a map, written at the few
    name offsets: the file is never whole in memory)."""
    with open(path, "r+b") as f, mmap.mmap(f.fileno(), 0) as m:
        wanted = {old.lower(): new for old, new in renames}
        done: set[str] = set()
        for name, offset in import_name_offsets(m):
            new = wanted.get(name.lower())
            if new is None:
                continue
            raw = new.encode("ascii")
            if len(raw) > len(name.encode("ascii", "replace")) or offset + len(name) > len(m):
                raise CudashipError(f"import {name}: the name {new} does not fit in its place")
            m[offset : offset + len(name)] = raw + b"\0" * (len(name) - len(raw))
            done.add(name.lower())
        m.flush()
    missing = sorted(set(wanted) - done)
    if missing:
        raise CudashipError(f"no import named {missing[0]} to rename")


def with_bootstrap(source: bytes, directories: tuple[str, ...], label: str = "__init__.py") -> bytes:
    """A package's ``__init__.py`` with the lines that add ``directories`` (relative to the package) as DLL
    directories on Windows, placed after its docstring and ``from __future__`` imports; unchanged when a
    bootstrap there adds them already (:func:`cudaship.wheel.bootstrap.with_bootstrap`)."""
    return bootstrap.with_bootstrap(source, directories, label)
