"""One process of an installed environment, simulated: which file the loader maps for every import of every
native library, in the order a Python process loads them.

The order: packages whose import loads their own libraries first (the loader conventions of
``knowledge/data/providers.toml``: ``import torch`` loads torch's libraries and, through them, the NVIDIA
libraries; a package requiring torch imports it first), then every other package's extension modules, in
name order. Each object is loaded once; an import whose name matches an object already loaded (by file name
or SONAME) gets that object, as glibc and Windows do. An object loaded by its path whose SONAME is already
taken by another file is loaded a second time: two copies of one library in one process.

Libraries nothing above reaches (loaded by name at run time, by a feature, by a profiler) are resolved too,
each in that process, but they do not count as loaded in it.

Pure: files are known through ``exists`` and read through ``host_of``; nothing here opens a path.
"""

from __future__ import annotations

import fnmatch
import posixpath
import re
from collections import deque
from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass

from cudaship.analysis.loader import (
    DirectoryIndex,
    Found,
    How,
    LinuxLoader,
    Requester,
    WindowsLoader,
    first_in,
    is_extension_module,
    packaged_dirs,
    search_linux,
    search_windows,
    searched_linux,
    searched_windows,
)
from cudaship.inspection.environment import Environment, EnvLibrary
from cudaship.knowledge.providers import conventions_for, preloads_for
from cudaship.knowledge.system_libraries import provider_of
from cudaship.records.binary import HostBinary, ImportKind

#: The hash a repairing tool (auditwheel, delvewheel, a vendoring script) puts into a library's file name.
_VENDOR_HASH = re.compile(r"^(?P<stem>[^/]+?)[-.][0-9a-f]{8}(?P<rest>\.(so|dll)\b.*)$", re.IGNORECASE)


def library_key(name: str) -> str:
    """The name a library is known by, with a vendoring hash removed: ``libcudart.41118559.so.12`` and
    ``libcudart-e409450e.so.12`` → ``libcudart.so.12``; lower-cased for DLLs."""
    m = _VENDOR_HASH.match(name)
    key = m.group("stem") + m.group("rest") if m else name
    return key.lower() if key.lower().endswith(".dll") else key


#: DT_RPATH of the objects that loaded one, nearest first: (object path, its RPATH entries)
_Chain = tuple[tuple[str, tuple[str, ...]], ...]


@dataclass(frozen=True)
class Edge:
    """One import of one library, resolved."""

    importer: str
    name: str  #: as written in the importer (DT_NEEDED, import directory)
    kind: ImportKind
    target: str | None = None  #: the file mapped, when a file is found
    how: How | None = None
    provider: str | None = None  #: ``system``/``driver``/``python`` when no file is read for it
    packaged: str | None = None  #: the copy the importer's own RUNPATH/RPATH reaches, when that is another
    packaged_identical: bool = False  #: that copy and the target have the same content
    searched: tuple[str, ...] = ()  #: where it was looked for, when not found
    runtime_lookup: str | None = None  #: the importer's package loads libraries by name itself (how)
    reachable: bool = True  #: the importer is loaded in the simulated process (not only on demand)


@dataclass(frozen=True)
class LoadedObject:
    path: str
    key: str  #: :func:`library_key` of its SONAME (or file name)
    by_path: bool  #: loaded by its path (a root), not found by name
    reachable: bool  #: loaded in the simulated process (not only checked on its own)
    system: bool  #: a file of the system, not of the environment (its imports are not followed)
    preloaded_by: str | None = None  #: the distribution whose import loads it by path (a preload convention)
    loaded_by: str | None = None  #: the object whose import first loaded it (None: loaded by its path)
    how: How | None = None  #: the search rule that found it then


@dataclass(frozen=True)
class LoadGraph:
    edges: tuple[Edge, ...]
    loaded: tuple[LoadedObject, ...]
    hosts: Mapping[str, HostBinary]  #: every file read: the environment's libraries and the system's
    system_checked: bool  #: the system's libraries were searched and read (a local Linux environment)
    #: pairs of files (sorted) found to have the same content (size and sha256)
    identical: frozenset[tuple[str, str]] = frozenset()
    #: the search's work with a directory index: (directories listed, candidate files probed); None without
    search_work: tuple[int, int] | None = None

    def first_load(self, path: str) -> LoadedObject | None:
        return next((o for o in self.loaded if o.path == path), None)

    def same_content(self, a: str, b: str) -> bool:
        return ((a, b) if a < b else (b, a)) in self.identical


def _preloaded(env: Environment, globs_in_order: tuple[tuple[str, ...], ...]) -> list[str]:
    """The files a package's preload list loads: per entry, site by site (``sys.path`` order), the first glob
    matching an installed file, its first match in name order (the package globs the directory)."""
    by_dir: dict[str, list[str]] = {}
    for f in env.files:
        by_dir.setdefault(posixpath.dirname(f), []).append(f)
    rel_dirs = {
        site: [(d[len(site) + 1 :], d) for d in sorted(by_dir) if d.startswith(site + "/")]
        for site in env.sites
    }
    out: list[str] = []
    for alternatives in globs_in_order:
        picked = None
        for site in env.sites:
            for pattern in alternatives:
                head, tail = posixpath.split(pattern)
                if any(c in head for c in "*?["):
                    dirs = [d for rel, d in rel_dirs[site] if fnmatch.fnmatchcase(rel, head)]
                else:
                    dirs = [posixpath.join(site, head)]
                matches = sorted(
                    f
                    for d in dirs
                    for f in by_dir.get(d, ())
                    if fnmatch.fnmatchcase(posixpath.basename(f), tail)
                )
                if matches:
                    picked = matches[0]
                    break
            if picked is not None:
                break
        if picked is not None and picked not in out:
            out.append(picked)
    return out


def _roots(env: Environment) -> tuple[list[tuple[str, str | None]], list[EnvLibrary]]:
    """(what a process loads by path, in order, each with the distribution that preloads it: a preloading
    package's preloaded files, then its extension modules, before every other package's extension modules;
    every other library)."""
    by_owner: dict[str, list[EnvLibrary]] = {}
    for lib in env.libraries:
        by_owner.setdefault(lib.owner.site + "\0" + lib.owner.dist.name, []).append(lib)
    preloading: list[tuple[str, str | None]] = []
    others: list[tuple[str, str | None]] = []
    rest: list[EnvLibrary] = []
    for owner in env.distributions:
        libs = sorted(by_owner.get(owner.site + "\0" + owner.dist.name, []), key=lambda lib: lib.path)
        extensions = [lib for lib in libs if is_extension_module(lib.path)]
        if any(c.preloads for c in conventions_for(owner.dist.name)):
            for row in preloads_for(owner.dist.name, owner.dist.version):
                preloading += [(p, owner.dist.name) for p in _preloaded(env, row.files)]
            preloading += [(lib.path, None) for lib in extensions]
        else:
            others += [(lib.path, None) for lib in extensions]
        rest += [lib for lib in libs if not is_extension_module(lib.path)]
    return preloading + others, rest


def simulate(
    env: Environment,
    loader: LinuxLoader | WindowsLoader,
    exists: Callable[[str], bool],
    host_of: Callable[[str], HostBinary | None],
    *,
    system_checked: bool,
    same_file: Callable[[str, str], bool] | None = None,
    list_dir: Callable[[str], Iterable[str] | None] | None = None,
) -> LoadGraph:
    """Resolve every import of every library of ``env`` in one simulated process. ``same_file(a, b)``: the
    two files have the same content (size and sha256); None: never asked, files are taken as different.
    ``list_dir``: the names a directory holds (None when it cannot be listed), for a Linux search that lists
    each directory once instead of probing each directory for each import (:class:`DirectoryIndex`)."""
    windows = isinstance(loader, WindowsLoader)
    index = DirectoryIndex(list_dir) if list_dir is not None and not windows else None
    env_hosts = {lib.path: lib.report.host for lib in env.libraries if lib.report.host is not None}
    hosts: dict[str, HostBinary] = dict(env_hosts)
    loaded_names: dict[str, str] = {}
    objects: dict[str, LoadedObject] = {}
    edges: list[Edge] = []
    env_paths = {lib.path for lib in env.libraries}
    owner_of = {lib.path: lib.owner.dist.name for lib in env.libraries}
    by_base: dict[str, list[str]] = {}
    for lib in env.libraries:  # in sys.path order: the first site-packages wins, as a search of sys.path does
        by_base.setdefault(posixpath.basename(lib.path).lower(), []).append(lib.path)

    def runtime_lookup(importer: str) -> tuple[str, bool] | None:
        """How the importer's package loads libraries itself; whether it takes installed ones first."""
        owner = owner_of.get(importer)
        if owner is None:
            return None
        return next(
            ((c.runtime_lookup, c.installed_first) for c in conventions_for(owner) if c.runtime_lookup), None
        )

    identical: set[tuple[str, str]] = set()

    def same(a: str, b: str) -> bool:
        pair = (a, b) if a < b else (b, a)
        if pair in identical:
            return True
        if same_file is not None and same_file(a, b):
            identical.add(pair)
            return True
        return False

    def host(path: str) -> HostBinary | None:
        if path not in hosts:
            found = host_of(path)
            if found is None:
                return None
            hosts[path] = found
        return hosts[path]

    def register(
        path: str,
        by_path: bool,
        reachable: bool,
        preloaded_by: str | None = None,
        loaded_by: tuple[str, How] | None = None,
    ) -> bool:
        """Add ``path`` to the process; False when it is there already."""
        if path in objects:
            return False
        h = host(path)
        soname = h.soname if h is not None and h.soname else None
        name = soname or posixpath.basename(path)
        # an object without a SONAME is known by its path only: two of them never stand for each other. On
        # Windows a DLL is known by its base name (what imports name), an extension module by its path.
        if windows:
            key = path if path.lower().endswith(".pyd") else library_key(posixpath.basename(path))
        else:
            key = library_key(soname) if soname else path
        objects[path] = LoadedObject(
            path,
            key,
            by_path,
            reachable,
            path not in env_paths,
            preloaded_by,
            loaded_by[0] if loaded_by else None,
            loaded_by[1] if loaded_by else None,
        )
        if reachable:
            for n in {posixpath.basename(path), name}:
                loaded_names.setdefault(n.lower() if windows else n, path)
        return True

    def resolve(path: str, inherited: _Chain, reachable: bool) -> list[tuple[str, _Chain]]:
        """Resolve ``path``'s imports; returns the (child, its inherited RPATHs) found."""
        h = hosts.get(path)
        if h is None:
            return []
        req = Requester(path, h.rpath, h.runpath, inherited)
        children: list[tuple[str, _Chain]] = []
        own_dirs = tuple(packaged_dirs(req, loader)) if isinstance(loader, LinuxLoader) else ()
        searched_once: list[tuple[str, ...]] = []  # where this object's imports are searched: computed once
        for imp in h.imports:
            if imp.kind not in (ImportKind.NEEDED, ImportKind.IMPORT, ImportKind.DELAY):
                continue
            found: Found | None = None
            convention = runtime_lookup(path)
            installed = by_base.get(imp.library.lower())
            loaded_key = imp.library.lower() if windows else imp.library
            if convention is not None and convention[1] and installed and loaded_key not in loaded_names:
                # cuda-pathfinder: nothing of that name loaded: the installed file before the system
                found = Found(installed[0], How.RUNTIME)
            elif isinstance(loader, WindowsLoader):
                found = search_windows(imp.library, path, loader, exists, loaded_names)
            else:
                found = search_linux(imp.library, req, loader, exists, loaded_names, index)
            lookup = convention[0] if found is None and convention is not None else None
            if found is None and lookup is not None and installed:
                # the package loads it by path before this import needs it (cuda-pathfinder, preload_dlls)
                found = Found(installed[0], How.RUNTIME)
            if found is None:
                provider = provider_of(imp.library, "windows" if windows else "linux")
                if not provider and not searched_once:
                    searched_once.append(
                        tuple(
                            searched_windows(path, loader)
                            if isinstance(loader, WindowsLoader)
                            else searched_linux(req, loader)
                        )
                    )
                searched = () if provider else searched_once[0]
                edges.append(
                    Edge(
                        path,
                        imp.library,
                        imp.kind,
                        provider=provider.value if provider else None,
                        searched=searched,
                        reachable=reachable,
                        runtime_lookup=lookup,
                    )
                )
                continue
            packaged = None
            own = first_in(own_dirs, imp.library, exists, How.RUNPATH, index) if own_dirs else None
            if own is not None:
                packaged = own.path if own.path != found.path else None
            edges.append(
                Edge(
                    path,
                    imp.library,
                    imp.kind,
                    found.path,
                    found.how,
                    packaged=packaged,
                    packaged_identical=packaged is not None and same(packaged, found.path),
                    reachable=reachable,
                )
            )
            if found.how is How.PATH_ENV:  # the safe DLL search does not read PATH: nothing is loaded from it
                continue
            if found.path not in env_paths:  # a system file: read for its symbol versions, not followed
                register(found.path, False, reachable, loaded_by=(path, found.how))
                continue
            if register(found.path, False, reachable, loaded_by=(path, found.how)):
                chain: _Chain = inherited if h.runpath or not h.rpath else ((path, h.rpath), *inherited)
                children.append((found.path, chain))
        return children

    def run(start: str, reachable: bool) -> None:
        queue: deque[tuple[str, _Chain]] = deque([(start, ())])
        while queue:
            path, inherited = queue.popleft()
            queue.extend(resolve(path, inherited, reachable))

    roots, rest = _roots(env)
    for root_path, preloader in roots:
        if root_path in env_hosts and register(root_path, True, True, preloader):
            run(root_path, True)
    for lib in rest:
        if lib.path in env_hosts and register(lib.path, True, False):
            run(lib.path, False)
    by_key: dict[str, list[str]] = {}
    for obj in objects.values():
        if obj.reachable:
            by_key.setdefault(obj.key, []).append(obj.path)
    for paths in by_key.values():  # two copies of one library in the process: the same bytes or not
        for other in paths[1:]:
            same(paths[0], other)
    return LoadGraph(
        tuple(edges),
        tuple(objects.values()),
        hosts,
        system_checked,
        frozenset(identical),
        (index.listings, index.probes) if index is not None else None,
    )
