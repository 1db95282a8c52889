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

import posixpath
import re
from collections import deque
from collections.abc import Callable, Mapping
from dataclasses import dataclass

from cudaship.analysis.loader import (
    Found,
    How,
    LinuxLoader,
    Requester,
    WindowsLoader,
    packaged_dirs,
    search_linux,
    search_windows,
)
from cudaship.binary.records import HostBinary, ImportKind
from cudaship.inspection.environment import Environment, EnvLibrary
from cudaship.knowledge.providers import conventions_for
from cudaship.knowledge.system_libraries import provider_of

#: An extension module: ``x.cpython-311-x86_64-linux-gnu.so``, ``x.abi3.so``, ``x.pyd``, a ``x.so`` not
#: named ``lib*``.
_EXTENSION = re.compile(r"(\.(cpython-[^./]+|abi3)\.so|\.pyd)$", re.IGNORECASE)
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


@dataclass(frozen=True)
class LoadGraph:
    edges: tuple[Edge, ...]
    loaded: tuple[LoadedObject, ...]
    hosts: Mapping[str, HostBinary]  #: every file read: the environment's libraries and the system's
    system_checked: bool  #: the system's libraries were searched and read (a local Linux environment)


def is_extension(path: str) -> bool:
    base = posixpath.basename(path)
    return bool(_EXTENSION.search(base)) or (base.endswith(".so") and not base.startswith("lib"))


def _roots(env: Environment) -> tuple[list[EnvLibrary], list[EnvLibrary]]:
    """(libraries a process loads by path, in order; every other library)."""
    by_owner: dict[str, list[EnvLibrary]] = {}
    for lib in env.libraries:
        by_owner.setdefault(lib.owner.site + "\0" + lib.owner.dist.name, []).append(lib)
    preloading: list[EnvLibrary] = []
    others: list[EnvLibrary] = []
    rest: list[EnvLibrary] = []
    for owner in env.distributions:
        libs = sorted(by_owner.get(owner.site + "\0" + owner.dist.name, []), key=lambda lib: lib.path)
        extensions = [lib for lib in libs if is_extension(lib.path)]
        if any(c.preloads for c in conventions_for(owner.dist.name)):
            preloading += extensions
        else:
            others += extensions
        rest += [lib for lib in libs if not is_extension(lib.path)]
    return preloading + others, rest


def simulate(
    env: Environment,
    loader: LinuxLoader | WindowsLoader,
    exists: Callable[[str], bool],
    host_of: Callable[[str], HostBinary | None],
    *,
    system_checked: bool,
) -> LoadGraph:
    """Resolve every import of every library of ``env`` in one simulated process."""
    windows = isinstance(loader, WindowsLoader)
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

    def runtime_lookup(importer: str) -> str | None:
        owner = owner_of.get(importer)
        if owner is None:
            return None
        return next((c.runtime_lookup for c in conventions_for(owner) if c.runtime_lookup), None)

    def host(path: str) -> HostBinary | None:
        if path not in hosts:
            found = host_of(path)
            if found is None:
                return None
            hosts[path] = found
        return hosts[path]

    def register(path: str, by_path: bool, reachable: bool) -> bool:
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
        objects[path] = LoadedObject(path, key, by_path, reachable, path not in env_paths)
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
        own_dirs = packaged_dirs(req, loader) if isinstance(loader, LinuxLoader) else []
        for imp in h.imports:
            if imp.kind not in (ImportKind.NEEDED, ImportKind.IMPORT, ImportKind.DELAY):
                continue
            found: Found | None
            if isinstance(loader, WindowsLoader):
                found = search_windows(imp.library, path, loader, exists, loaded_names)
            else:
                found = search_linux(imp.library, req, loader, exists, loaded_names)
            lookup = runtime_lookup(path) if found is None else None
            if found is None and lookup is not None and by_base.get(imp.library.lower()):
                # the package loads it by path before this import needs it (cuda-pathfinder, preload_dlls)
                found = Found(by_base[imp.library.lower()][0], How.RUNTIME)
            if found is None:
                provider = provider_of(imp.library, "windows" if windows else "linux")
                searched = () if provider else tuple(_searched(req, loader))
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
            for d in own_dirs:
                candidate = posixpath.normpath(posixpath.join(d, imp.library))
                if exists(candidate):
                    packaged = candidate if candidate != found.path else None
                    break
            edges.append(
                Edge(
                    path, imp.library, imp.kind, found.path, found.how, packaged=packaged, reachable=reachable
                )
            )
            if found.how is How.PATH_ENV:  # the safe DLL search does not read PATH: nothing is loaded from it
                continue
            if found.path not in env_paths:  # a system file: read for its symbol versions, not followed
                register(found.path, False, reachable)
                continue
            if register(found.path, False, reachable):
                chain: _Chain = inherited if h.runpath or not h.rpath else ((path, h.rpath), *inherited)
                children.append((found.path, chain))
        return children

    def run(start: str, reachable: bool) -> None:
        queue: deque[tuple[str, _Chain]] = deque([(start, ())])
        while queue:
            path, inherited = queue.popleft()
            queue.extend(resolve(path, inherited, reachable))

    roots, rest = _roots(env)
    for lib in roots:
        if lib.path in env_hosts and register(lib.path, True, True):
            run(lib.path, True)
    for lib in rest:
        if lib.path in env_hosts and register(lib.path, True, False):
            run(lib.path, False)
    return LoadGraph(tuple(edges), tuple(objects.values()), hosts, system_checked)


def _searched(req: Requester, loader: LinuxLoader | WindowsLoader) -> list[str]:
    if isinstance(loader, WindowsLoader):
        dirs = [posixpath.dirname(req.path)]
        if loader.app_dir:
            dirs.append(loader.app_dir)
        return list(dict.fromkeys([*dirs, *loader.dll_directories, "System32"]))
    out = packaged_dirs(req, loader) + list(loader.ld_library_path)
    if loader.cache:
        out.append("ld.so.cache")
    return out + list(loader.default_dirs)
