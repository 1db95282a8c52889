"""The audited wheel's providers as the checks see them: the closure of its declared requirements (from
:mod:`cudaship.providers`) plus the loader conventions (:mod:`cudaship.knowledge.providers`) that decide
which provided files its libraries can load, and how.
"""

from __future__ import annotations

import fnmatch
import posixpath
import threading
from dataclasses import dataclass, field
from functools import cached_property
from typing import TYPE_CHECKING

from packaging.requirements import InvalidRequirement, Requirement
from packaging.utils import canonicalize_name

from cudaship.knowledge.providers import (
    Convention,
    conventions_for,
    development_extras,
    preload_picks,
    preloads_for,
)
from cudaship.providers.closure import wheel_extras
from cudaship.providers.options import ProviderOptions, closure_for, target_python
from cudaship.providers.records import Closure, Fetched, Provided, Reached, Target
from cudaship.records.platform import TargetPlatform
from cudaship.wheel.records import DistInfo

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

    @cached_property
    def _module_owners(self) -> dict[str, Reached]:
        """Top-level and second-level directories (``librmm``, ``nvidia/cublas``) -> the distribution in the
        closure that installs files there (the first one reached)."""
        out: dict[str, Reached] = {}
        for r in self.closure.reached:
            for f in r.dist.files:
                parts = f.split("/")
                for depth in (1, 2):
                    if len(parts) > depth:
                        out.setdefault("/".join(parts[:depth]), r)
        return out

    def owner_of_module(self, module_dir: str) -> Reached | None:
        """The distribution installing the Python package directory ``module_dir`` (``librmm``)."""
        return self._module_owners.get(module_dir)

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


def resolve_requirements(
    dist: DistInfo, platform: TargetPlatform, options: ProviderOptions
) -> tuple[Closure, Fetched]:
    """The closure of a wheel's declared requirements on its platform, from ``options``' sources (it may read
    the index), and what that cost."""
    meta = dist.metadata
    return closure_for(
        meta.requires_dist,
        Target(platform.os, platform.machine, target_python(dist.wheel.tags)),
        options,
        extras=[e for e in wheel_extras(meta.requires_dist) if e not in development_extras()],
        own_name=canonicalize_name(meta.name),
    )


class RequirementsAhead:
    """:func:`resolve_requirements` on a thread of its own, started as soon as a wheel's dist-info is read
    (:meth:`start`, from the scan's ``on_dist``), so that the index lookups and the closure overlap the
    reading of the members instead of following it. The audit takes the result where it would have resolved
    the requirements itself (:meth:`take`), and only for the same wheel, platform and sources; an error is
    raised there, as it would have been.

    Start it only where the audit will resolve the requirements anyway (the closure checks run and the
    wheel declares requirements): it adds no lookup an audit without it would not make."""

    def __init__(self, options: ProviderOptions) -> None:
        self.options = options
        self._started: tuple[DistInfo, TargetPlatform] | None = None
        self._thread: threading.Thread | None = None
        self._value: tuple[Closure, Fetched] | None = None
        self._error: BaseException | None = None

    def start(self, dist: DistInfo, platform: TargetPlatform) -> None:
        """Resolve ``dist``'s requirements for ``platform`` from now on (nothing when it declares none)."""
        if self._thread is not None or not dist.metadata.requires_dist:
            return
        self._started = (dist, platform)

        def run() -> None:
            try:
                self._value = resolve_requirements(dist, platform, self.options)
            except BaseException as e:  # handed to the caller of take(), raised there
                self._error = e

        # a daemon: an audit that stops early (an unreadable wheel) does not wait for the index
        self._thread = threading.Thread(target=run, name="cudaship-requirements", daemon=True)
        self._thread.start()

    def take(
        self, dist: DistInfo, platform: TargetPlatform, options: ProviderOptions
    ) -> tuple[Closure, Fetched] | None:
        """The closure resolved ahead for exactly this wheel, platform and sources (waiting for it), or None
        when it was not started for them."""
        if self._thread is None or self._started is None or options != self.options:
            return None
        started_dist, started_platform = self._started
        if started_dist is not dist or started_platform != platform:
            return None
        self._thread.join()
        if self._error is not None:
            raise self._error
        return self._value


def wheel_providers(ctx: AuditContext) -> WheelProviders:
    meta = ctx.scan.dist.metadata
    own = canonicalize_name(meta.name)
    ahead = ctx.requirements_ahead
    resolved = ahead.take(ctx.scan.dist, ctx.platform, ctx.provider_options) if ahead is not None else None
    closure, fetched = (
        resolved
        if resolved is not None
        else resolve_requirements(ctx.scan.dist, ctx.platform, ctx.provider_options)
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
        # what its import loads by path, by version (the [[preloads]] rows doctor --env simulates), from
        # whichever requirement installs the file: torch's glob maps the extension's own cuBLAS first
        # (issue 32, class 4)
        for row in preloads_for(r.dist.name, r.dist.version):
            for f in preload_picks(files, row):
                preloaded.setdefault(posixpath.basename(f).lower(), (files[f][0], r))
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
