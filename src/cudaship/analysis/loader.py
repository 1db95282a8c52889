"""Where the dynamic loader finds a library: pure functions over records, no file access.

Linux (glibc ``elf/dl-load.c``, ``_dl_map_object``), for a ``DT_NEEDED`` name without a ``/``:

1. an object already loaded whose file name or SONAME is that name (the loader never loads a name twice);
2. when the requesting object has no ``DT_RUNPATH``: the ``DT_RPATH`` of the requesting object, then of the
   object that loaded it, and so on up the chain, then the main program's;
3. ``LD_LIBRARY_PATH``;
4. the requesting object's own ``DT_RUNPATH`` (not inherited: a dependency of a dependency does not use it);
5. ``/etc/ld.so.cache`` (entries of the process's kind: a 32-bit entry is not used by a 64-bit process);
6. the default directories.

``$ORIGIN`` (``${ORIGIN}``) is the directory of the object that names the path; ``$LIB`` and ``$PLATFORM``
expand to the given values. A name with a ``/`` is a path, taken as is (relative to the working directory).

Windows (``LoadLibraryExW`` with ``LOAD_LIBRARY_SEARCH_DEFAULT_DIRS | LOAD_LIBRARY_SEARCH_DLL_LOAD_DIR``, how
Python 3.8+ loads extension modules and how ``ctypes`` loads a path): a module already loaded with that base
name (case-insensitive), then the importing DLL's own directory, the application's directory, the
directories added with ``os.add_dll_directory``, then System32. ``PATH`` is not searched in that mode: a DLL
found only on ``PATH`` is reported as such, since it loads only in processes using the legacy search order.
"""

from __future__ import annotations

import ntpath
import posixpath
from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass, field
from enum import Enum
from functools import lru_cache


class How(str, Enum):
    """Which rule of the search found a library."""

    LOADED = "already loaded"
    PATH = "path in the import"
    RPATH = "DT_RPATH"
    LD_LIBRARY_PATH = "LD_LIBRARY_PATH"
    RUNPATH = "DT_RUNPATH"
    CACHE = "ld.so.cache"
    DEFAULT = "default directory"
    OWN_DIR = "the DLL's directory"
    APP_DIR = "the application's directory"
    DLL_DIRECTORY = "os.add_dll_directory"
    SYSTEM32 = "System32"
    PATH_ENV = "PATH (legacy search order only)"
    RUNTIME = "loaded by the package at run time"  #: a loader convention: cuda-pathfinder, preload_dlls


@dataclass(frozen=True)
class Found:
    path: str
    how: How
    directory: str | None = None  #: the search-path entry that matched (expanded)


@dataclass(frozen=True)
class LinuxLoader:
    """What decides a Linux process's library search, besides the objects themselves."""

    ld_library_path: tuple[str, ...] = ()
    cache: Mapping[str, str] = field(default_factory=dict)  #: name -> path, for this process's kind only
    default_dirs: tuple[str, ...] = ("/lib64", "/usr/lib64", "/lib", "/usr/lib")
    main_rpath: tuple[str, ...] = ()  #: the program's (python's) own DT_RPATH, already expanded
    lib: str = "lib64"  #: what ``$LIB`` expands to
    platform: str = "x86_64"  #: what ``$PLATFORM`` expands to


@dataclass(frozen=True)
class WindowsLoader:
    app_dir: str | None = None  #: the directory of python.exe
    dll_directories: tuple[str, ...] = ()  #: os.add_dll_directory calls, in order
    system32: str = "C:/Windows/System32"
    path: tuple[str, ...] = ()  #: PATH, searched only by the legacy order


@dataclass(frozen=True)
class Requester:
    """The object whose import is searched for, and the RPATHs it inherits."""

    path: str
    rpath: tuple[str, ...] = ()
    runpath: tuple[str, ...] = ()
    #: DT_RPATH of the objects that loaded this one, nearest first, each with its own directory for $ORIGIN
    inherited_rpath: tuple[tuple[str, tuple[str, ...]], ...] = ()


def expand(entry: str, origin: str, loader: LinuxLoader) -> str | None:
    """One RPATH/RUNPATH entry with its dynamic string tokens replaced; None when it expands to nothing."""
    text = entry
    for token, value in (("ORIGIN", origin), ("LIB", loader.lib), ("PLATFORM", loader.platform)):
        text = text.replace("${" + token + "}", value).replace("$" + token, value)
    if not text:
        return None
    return posixpath.normpath(text) if text.startswith("/") else text


class DirectoryIndex:
    """Where a name first appears in a list of directories, each directory listed once.

    A search path of *d* directories and an object with *n* imports cost *d x n* existence probes when each
    import tries each directory; a library with 3,000 ``DT_NEEDED`` and 3,000 ``DT_RUNPATH`` entries made
    that 9 million. Here each directory is listed once (``list_dir``: the names it holds, None when it cannot
    be listed) and each list of directories is turned once into name → its places; an import then costs one
    lookup and one probe (``exists``, to confirm: a listed name may be a directory or a broken link) per
    place the name has. :attr:`listings` and :attr:`probes` count the work."""

    def __init__(self, list_dir: Callable[[str], Iterable[str] | None]) -> None:
        self._list_dir = list_dir
        self._names: dict[str, frozenset[str] | None] = {}
        self._places: dict[tuple[str, ...], tuple[dict[str, list[int]], list[int]]] = {}
        self.listings = 0  #: directories listed
        self.probes = 0  #: candidate files confirmed with ``exists``

    def _listed(self, directory: str) -> frozenset[str] | None:
        if directory not in self._names:
            self.listings += 1
            names = self._list_dir(directory)
            self._names[directory] = None if names is None else frozenset(names)
        return self._names[directory]

    def places(self, dirs: tuple[str, ...], name: str) -> list[int]:
        """The indexes in ``dirs`` that may hold ``name``, in order (directories that cannot be listed are
        always candidates)."""
        table = self._places.get(dirs)
        if table is None:
            by_name: dict[str, list[int]] = {}
            unknown: list[int] = []
            for i, d in enumerate(dirs):
                names = self._listed(d)
                if names is None:
                    unknown.append(i)
                    continue
                for n in names:
                    by_name.setdefault(n, []).append(i)
            table = self._places[dirs] = (by_name, unknown)
        by_name, unknown = table
        found = by_name.get(name, [])
        return sorted([*found, *unknown]) if unknown else found


def first_in(
    dirs: tuple[str, ...] | list[str],
    name: str,
    exists: Callable[[str], bool],
    how: How,
    index: DirectoryIndex | None = None,
) -> Found | None:
    if index is not None and "/" not in name:
        ordered = tuple(dirs)
        for i in index.places(ordered, name):
            index.probes += 1
            candidate = posixpath.normpath(posixpath.join(ordered[i], name))
            if exists(candidate):
                return Found(candidate, how, ordered[i])
        return None
    for d in dirs:
        candidate = posixpath.normpath(posixpath.join(d, name))
        if exists(candidate):
            return Found(candidate, how, d)
    return None


def _expanded(entries: tuple[str, ...], origin: str, loader: LinuxLoader) -> list[str]:
    return list(_expanded_once(entries, origin, loader.lib, loader.platform))


@lru_cache(maxsize=4096)
def _expanded_once(entries: tuple[str, ...], origin: str, lib: str, platform: str) -> tuple[str, ...]:
    """Expanded once per object (not once per import: 3,000 entries times 3,000 imports)."""
    tokens = LinuxLoader(lib=lib, platform=platform)
    out = []
    for entry in entries:
        for part in entry.split(":"):
            d = expand(part, origin, tokens)
            if d is not None:
                out.append(d)
    return tuple(out)


@lru_cache(maxsize=4096)
def _rpath_dirs(req: Requester, lib: str, platform: str, main_rpath: tuple[str, ...]) -> tuple[str, ...]:
    """The DT_RPATH search of an object without DT_RUNPATH: its own, its loaders', the program's."""
    dirs = list(_expanded_once(req.rpath, posixpath.dirname(req.path), lib, platform))
    for parent, entries in req.inherited_rpath:
        dirs += _expanded_once(entries, posixpath.dirname(parent), lib, platform)
    return (*dirs, *main_rpath)


def packaged_dirs(req: Requester, loader: LinuxLoader) -> list[str]:
    """The directories the requesting object's own RUNPATH (or RPATH) names: where its package put things."""
    origin = posixpath.dirname(req.path)
    return _expanded(req.runpath or req.rpath, origin, loader)


def search_linux(
    name: str,
    req: Requester,
    loader: LinuxLoader,
    exists: Callable[[str], bool],
    loaded: Mapping[str, str] | None = None,
    index: DirectoryIndex | None = None,
) -> Found | None:
    """The file glibc's loader maps for ``name`` needed by ``req``; None when it finds none. With ``index``,
    each directory is listed once and a name costs one lookup (see :class:`DirectoryIndex`)."""
    if loaded is not None and name in loaded:
        return Found(loaded[name], How.LOADED)
    if "/" in name:
        return Found(posixpath.normpath(name), How.PATH) if exists(posixpath.normpath(name)) else None
    origin = posixpath.dirname(req.path)
    if not req.runpath:
        dirs = _rpath_dirs(req, loader.lib, loader.platform, loader.main_rpath)
        found = first_in(dirs, name, exists, How.RPATH, index)
        if found is not None:
            return found
    found = first_in(loader.ld_library_path, name, exists, How.LD_LIBRARY_PATH, index)
    if found is not None:
        return found
    if req.runpath:
        runpath = _expanded_once(req.runpath, origin, loader.lib, loader.platform)
        found = first_in(runpath, name, exists, How.RUNPATH, index)
        if found is not None:
            return found
    cached = loader.cache.get(name)
    if cached is not None and exists(cached):
        return Found(cached, How.CACHE)
    return first_in(loader.default_dirs, name, exists, How.DEFAULT, index)


def search_windows(
    name: str,
    importer: str,
    loader: WindowsLoader,
    exists: Callable[[str], bool],
    loaded: Mapping[str, str] | None = None,
) -> Found | None:
    """The DLL Windows loads for ``name`` imported by ``importer`` (``/``-separated paths); ``exists`` is
    asked with the candidate path and must compare case-insensitively, as the file system does."""
    base = ntpath.basename(name.replace("/", "\\")).lower()
    if loaded is not None and base in loaded:
        return Found(loaded[base], How.LOADED)
    steps: list[tuple[How, list[str]]] = [(How.OWN_DIR, [posixpath.dirname(importer)])]
    if loader.app_dir:
        steps.append((How.APP_DIR, [loader.app_dir]))
    steps.append((How.DLL_DIRECTORY, list(loader.dll_directories)))
    steps.append((How.SYSTEM32, [loader.system32]))
    steps.append((How.PATH_ENV, list(loader.path)))
    for how, dirs in steps:
        found = first_in(dirs, name, exists, how)
        if found is not None:
            return found
    return None
