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
    process = _Process(env, loader, exists, host_of, same_file, list_dir)
    roots, rest = _roots(env)
    for root_path, preloader in roots:
        if root_path in process.env_hosts and process.register(root_path, True, True, preloader):
            process.run(root_path, True)
    for lib in rest:
        if lib.path in process.env_hosts and process.register(lib.path, True, False):
            process.run(lib.path, False)
    return process.graph(system_checked)


class _Process:
    """The simulated process: the objects loaded, by the names the loader matches, and the imports
    resolved."""

    def __init__(
        self,
        env: Environment,
        loader: LinuxLoader | WindowsLoader,
        exists: Callable[[str], bool],
        host_of: Callable[[str], HostBinary | None],
        same_file: Callable[[str, str], bool] | None,
        list_dir: Callable[[str], Iterable[str] | None] | None,
    ) -> None:
        self.loader = loader
        self.exists = exists
        self.host_of = host_of
        self.same_file = same_file
        self.windows = isinstance(loader, WindowsLoader)
        self.index = DirectoryIndex(list_dir) if list_dir is not None and not self.windows else None
        self.env_hosts = {lib.path: lib.report.host for lib in env.libraries if lib.report.host is not None}
        self.hosts: dict[str, HostBinary] = dict(self.env_hosts)
        self.loaded_names: dict[str, str] = {}
        self.objects: dict[str, LoadedObject] = {}
        self.edges: list[Edge] = []
        self.identical: set[tuple[str, str]] = set()
        self.env_paths = {lib.path for lib in env.libraries}
        self.owner_of = {lib.path: lib.owner.dist.name for lib in env.libraries}
        self.by_base: dict[str, list[str]] = {}
        for lib in env.libraries:  # in sys.path order: the first site-packages wins, as a search of sys.path
            self.by_base.setdefault(posixpath.basename(lib.path).lower(), []).append(lib.path)

    def runtime_lookup(self, importer: str) -> tuple[str, bool] | None:
        """How the importer's package loads libraries itself; whether it takes installed ones first."""
        owner = self.owner_of.get(importer)
        if owner is None:
            return None
        return next(
            ((c.runtime_lookup, c.installed_first) for c in conventions_for(owner) if c.runtime_lookup), None
        )

    def same(self, a: str, b: str) -> bool:
        pair = (a, b) if a < b else (b, a)
        if pair in self.identical:
            return True
        if self.same_file is not None and self.same_file(a, b):
            self.identical.add(pair)
            return True
        return False

    def host(self, path: str) -> HostBinary | None:
        if path not in self.hosts:
            found = self.host_of(path)
            if found is None:
                return None
            self.hosts[path] = found
        return self.hosts[path]

    def register(
        self,
        path: str,
        by_path: bool,
        reachable: bool,
        preloaded_by: str | None = None,
        loaded_by: tuple[str, How] | None = None,
    ) -> bool:
        """Add ``path`` to the process; False when it is there already."""
        if path in self.objects:
            return False
        h = self.host(path)
        soname = h.soname if h is not None and h.soname else None
        name = soname or posixpath.basename(path)
        # an object without a SONAME is known by its path only: two of them never stand for each other. On
        # Windows a DLL is known by its base name (what imports name), an extension module by its path.
        if self.windows:
            key = path if path.lower().endswith(".pyd") else library_key(posixpath.basename(path))
        else:
            key = library_key(soname) if soname else path
        self.objects[path] = LoadedObject(
            path,
            key,
            by_path,
            reachable,
            path not in self.env_paths,
            preloaded_by,
            loaded_by[0] if loaded_by else None,
            loaded_by[1] if loaded_by else None,
        )
        if reachable:
            for n in {posixpath.basename(path), name}:
                self.loaded_names.setdefault(n.lower() if self.windows else n, path)
        return True

    def run(self, start: str, reachable: bool) -> None:
        queue: deque[tuple[str, _Chain]] = deque([(start, ())])
        while queue:
            path, inherited = queue.popleft()
            queue.extend(self.resolve(path, inherited, reachable))

    def resolve(self, path: str, inherited: _Chain, reachable: bool) -> list[tuple[str, _Chain]]:
        """Resolve ``path``'s imports; returns the (child, its inherited RPATHs) found."""
        h = self.hosts.get(path)
        if h is None:
            return []
        req = Requester(path, h.rpath, h.runpath, inherited)
        children: list[tuple[str, _Chain]] = []
        own_dirs = tuple(packaged_dirs(req, self.loader)) if isinstance(self.loader, LinuxLoader) else ()
        searched_once: list[tuple[str, ...]] = []  # where this object's imports are searched: computed once
        for imp in h.imports:
            if imp.kind not in (ImportKind.NEEDED, ImportKind.IMPORT, ImportKind.DELAY):
                continue
            convention = self.runtime_lookup(path)
            found = self.find(req, imp.library, convention)
            if found is None:
                lookup = convention[0] if convention is not None else None
                edge = self.not_found(req, imp.library, imp.kind, reachable, lookup, searched_once)
                self.edges.append(edge)
                continue
            packaged = None
            own = first_in(own_dirs, imp.library, self.exists, How.RUNPATH, self.index) if own_dirs else None
            if own is not None:
                packaged = own.path if own.path != found.path else None
            self.edges.append(
                Edge(
                    path,
                    imp.library,
                    imp.kind,
                    found.path,
                    found.how,
                    packaged=packaged,
                    packaged_identical=packaged is not None and self.same(packaged, found.path),
                    reachable=reachable,
                )
            )
            if found.how is How.PATH_ENV:  # the safe DLL search does not read PATH: nothing is loaded from it
                continue
            if found.path not in self.env_paths:  # a system file: read for its symbol versions, not followed
                self.register(found.path, False, reachable, loaded_by=(path, found.how))
                continue
            if self.register(found.path, False, reachable, loaded_by=(path, found.how)):
                chain: _Chain = inherited if h.runpath or not h.rpath else ((path, h.rpath), *inherited)
                children.append((found.path, chain))
        return children

    def find(self, req: Requester, name: str, convention: tuple[str, bool] | None) -> Found | None:
        """The file the process maps for ``name``: the loader's search, before or after the package's own
        lookup by name (:data:`How.RUNTIME`) as its convention says."""
        installed = self.by_base.get(name.lower())
        loaded_key = name.lower() if self.windows else name
        if convention is not None and convention[1] and installed and loaded_key not in self.loaded_names:
            # cuda-pathfinder: nothing of that name loaded: the installed file before the system
            return Found(installed[0], How.RUNTIME)
        if isinstance(self.loader, WindowsLoader):
            found = search_windows(name, req.path, self.loader, self.exists, self.loaded_names)
        else:
            found = search_linux(name, req, self.loader, self.exists, self.loaded_names, self.index)
        if found is None and convention is not None and installed:
            # the package loads it by path before this import needs it (cuda-pathfinder, preload_dlls)
            return Found(installed[0], How.RUNTIME)
        return found

    def not_found(
        self,
        req: Requester,
        name: str,
        kind: ImportKind,
        reachable: bool,
        lookup: str | None,
        searched_once: list[tuple[str, ...]],
    ) -> Edge:
        """The edge of an import found nowhere: a system library's, or where it was looked for (listed once
        per importer in ``searched_once``)."""
        provider = provider_of(name, "windows" if self.windows else "linux")
        if not provider and not searched_once:
            searched_once.append(
                tuple(
                    searched_windows(req.path, self.loader)
                    if isinstance(self.loader, WindowsLoader)
                    else searched_linux(req, self.loader)
                )
            )
        return Edge(
            req.path,
            name,
            kind,
            provider=provider.value if provider else None,
            searched=() if provider else searched_once[0],
            reachable=reachable,
            runtime_lookup=lookup,
        )

    def graph(self, system_checked: bool) -> LoadGraph:
        by_key: dict[str, list[str]] = {}
        for obj in self.objects.values():
            if obj.reachable:
                by_key.setdefault(obj.key, []).append(obj.path)
        for paths in by_key.values():  # two copies of one library in the process: the same bytes or not
            for other in paths[1:]:
                self.same(paths[0], other)
        index = self.index
        return LoadGraph(
            tuple(self.edges),
            tuple(self.objects.values()),
            self.hosts,
            system_checked,
            frozenset(self.identical),
            (index.listings, index.probes) if index is not None else None,
        )
