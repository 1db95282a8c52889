"""The audited wheel's providers as the checks see them: the closure of its declared requirements (from
:mod:`cudaship.providers`) plus the loader conventions (:mod:`cudaship.knowledge.providers`) that decide
which provided files its libraries can load, and how.
"""

from __future__ import annotations

import fnmatch
import posixpath
from dataclasses import dataclass, field
from typing import TYPE_CHECKING

from packaging.requirements import InvalidRequirement, Requirement
from packaging.utils import canonicalize_name

from cudaship.knowledge.providers import Convention, conventions_for, development_extras
from cudaship.providers.closure import wheel_extras
from cudaship.providers.options import closure_for, target_python
from cudaship.providers.records import Closure, Fetched, Provided, Reached, Target

if TYPE_CHECKING:
    from cudaship.checks.context import AuditContext

_NATIVE_SUFFIXES = (".so", ".dll", ".pyd", ".dylib")


def is_native(path: str) -> bool:
    base = posixpath.basename(path).lower()
    return base.endswith(_NATIVE_SUFFIXES) or ".so." in base


@dataclass(frozen=True)
class WheelProviders:
    closure: Closure
    fetched: Fetched
    files: dict[str, list[Provided]]  #: installed path -> who installs it
    by_name: dict[str, list[Provided]]  #: lower-cased base name -> installed files with that name
    preloaded: dict[
        str, tuple[Provided, Reached]
    ]  #: base name -> (the file, the package whose import loads it)
    conventions: tuple[Convention, ...]  #: the audited wheel's own
    dll_directories: tuple[str, ...]  #: Windows: added by requirements' imports (torch/lib)
    notes: tuple[str, ...] = field(default=())

    @property
    def runtime_lookup(self) -> str | None:
        for c in self.conventions:
            if c.runtime_lookup:
                return c.runtime_lookup
        return None

    def on_demand(self, path: str) -> str | None:
        for c in self.conventions:
            for pattern, what in c.on_demand:
                if fnmatch.fnmatchcase(path, pattern):
                    return what
        return None

    def shim(self, path: str) -> str | None:
        """Why a library of the audited wheel is a loader shim (its DT_NEEDED exist to be loaded), or None."""
        for c in self.conventions:
            for pattern in c.shims:
                if fnmatch.fnmatchcase(path, pattern):
                    return f"{c.project}'s loader conventions, knowledge/data/providers.toml"
        return None

    def installed(self, path: str) -> Provided | None:
        """The provider of an installed path, preferring one that is always installed over an extra's."""
        found = self.files.get(path)
        if not found:
            return None
        return min(found, key=lambda p: p.reached.extra is not None)

    def named(self, name: str) -> Provided | None:
        found = self.by_name.get(posixpath.basename(name).lower())
        if not found:
            return None
        return min(found, key=lambda p: p.reached.extra is not None)


def _requirement_names(requires_dist: tuple[str, ...]) -> tuple[str, ...]:
    out = []
    for text in requires_dist:
        try:
            out.append(canonicalize_name(Requirement(text).name))
        except InvalidRequirement:
            continue
    return tuple(out)


def wheel_providers(ctx: AuditContext) -> WheelProviders:
    meta = ctx.scan.dist.metadata
    own = canonicalize_name(meta.name)
    target = Target(ctx.os, ctx.machine, target_python(ctx.scan.dist.wheel.tags))
    closure, fetched = closure_for(
        meta.requires_dist,
        target,
        ctx.provider_options,
        extras=[e for e in wheel_extras(meta.requires_dist) if e not in development_extras()],
        own_name=own,
    )
    files: dict[str, list[Provided]] = closure.files()
    by_name = closure.by_name()
    preloaded: dict[str, tuple[Provided, Reached]] = {}
    dll_dirs: list[str] = []
    for r in closure.reached:
        conv = conventions_for(r.dist.name)
        if not any(c.preloads for c in conv):
            continue
        for c in conv:
            dll_dirs.extend(c.dll_directories)
        # its own libraries, and those of what it requires (reached through the same requirement of ours)
        for other in closure.reached:
            if other is not r and (
                other.chain[: len(r.chain)] != r.chain or len(other.chain) <= len(r.chain)
            ):
                continue
            for f in other.dist.files:
                if is_native(f):
                    preloaded.setdefault(posixpath.basename(f).lower(), (Provided(f, other), r))
    notes = []
    for u in closure.unresolved:
        where = f" (extra {u.extra})" if u.extra else ""
        notes.append(f"requirement {u.chain[-1]}{where}: {u.reason}")
    notes.extend(closure.notes)
    return WheelProviders(
        closure=closure,
        fetched=fetched,
        files=files,
        by_name=by_name,
        preloaded=preloaded,
        conventions=conventions_for(own, _requirement_names(meta.requires_dist)),
        dll_directories=tuple(dict.fromkeys(dll_dirs)),
        notes=tuple(notes),
    )
