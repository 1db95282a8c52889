"""Where the dynamic loader finds a library: the one model of the loaders' search, pure functions over
records, no file access. ``doctor --env`` (:mod:`cudaship.analysis.envload`) searches a whole environment
with it; ``audit`` (:mod:`cudaship.checks.resolve`) asks it for the directories a shipped library's own
search paths name once the wheel is installed.

Linux (glibc ``elf/dl-load.c``, ``_dl_map_object``), for a ``DT_NEEDED`` name without a ``/``:

1. an object already loaded whose file name or SONAME is that name (the loader never loads a name twice);
2. then the steps of :data:`LINUX_ORDER`: when the requesting object has no ``DT_RUNPATH``, the ``DT_RPATH``
   of the requesting object, then of the object that loaded it, and so on up the chain, then the main
   program's; ``LD_LIBRARY_PATH``; the requesting object's own ``DT_RUNPATH`` (not inherited: a dependency of
   a dependency does not use it); ``/etc/ld.so.cache`` (entries of the process's kind: a 32-bit entry is not
   used by a 64-bit process); the default directories (:data:`DEFAULT_DIRS`).

``$ORIGIN`` (``${ORIGIN}``) is the directory of the object that names the path; ``$LIB`` and ``$PLATFORM``
expand to the given values. A name with a ``/`` is a path, taken as is (relative to the working directory).

Windows (``LoadLibraryExW`` with ``LOAD_LIBRARY_SEARCH_DEFAULT_DIRS | LOAD_LIBRARY_SEARCH_DLL_LOAD_DIR``, how
Python 3.8+ loads extension modules and how ``ctypes`` loads a path): a module already loaded with that base
name (case-insensitive), then the steps of :data:`WINDOWS_ORDER`: the importing DLL's own directory, the
application's directory, the directories added with ``os.add_dll_directory``, then System32. ``PATH`` is not
searched in that mode: a DLL found only on ``PATH`` is reported as such, since it loads only in processes
using the legacy search order.

macOS (dyld): an image already loaded whose path or install name (``LC_ID_DYLIB``) is the load command's
name; then ``@rpath/``, ``@loader_path/`` and ``@executable_path/`` names, searched in the importer's
directory and its ``LC_RPATH`` entries relative to it (:func:`macho_dirs`).

What each loader matches against the objects already loaded, before any search, is :data:`ALREADY_LOADED`:
the rule behind every "loaded first" verdict (a library the package's Python code or a required package
loads before the module that needs it).
"""

from __future__ import annotations

import ntpath
import posixpath
import re
from collections.abc import Callable, Collection, Iterable, Iterator, Mapping
from dataclasses import dataclass, field
from enum import Enum
from functools import lru_cache

from cudaship.records.binary import Machine


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


#: glibc's search steps after the loaded objects, in order, with where each is written down
#: (elf/dl-load.c ``_dl_map_object``; ld.so(8) "Dynamic linking and the search order").
LINUX_ORDER: tuple[tuple[How, str], ...] = (
    (How.RPATH, "DT_RPATH of the object, of its loaders up the chain, of the program; without DT_RUNPATH"),
    (How.LD_LIBRARY_PATH, "the environment variable, ignored in secure-execution mode (set-user-ID)"),
    (How.RUNPATH, "DT_RUNPATH of the object itself, not inherited"),
    (How.CACHE, "/etc/ld.so.cache, entries of the process's kind (ldconfig(8))"),
    (How.DEFAULT, "the built-in directories, skipped for an object linked with -z nodeflib"),
)

#: Windows' safe DLL search (``LOAD_LIBRARY_SEARCH_DEFAULT_DIRS | LOAD_LIBRARY_SEARCH_DLL_LOAD_DIR``), in
#: order, after the loaded modules (Microsoft Learn, "Dynamic-link library search order", "Search order using
#: LOAD_LIBRARY_SEARCH flags"); ``PATH`` last, searched only by the legacy order (reported, never loaded).
WINDOWS_ORDER: tuple[tuple[How, str], ...] = (
    (How.OWN_DIR, "LOAD_LIBRARY_SEARCH_DLL_LOAD_DIR: the directory of the DLL being loaded"),
    (How.APP_DIR, "LOAD_LIBRARY_SEARCH_APPLICATION_DIR: the directory of python.exe"),
    (How.DLL_DIRECTORY, "LOAD_LIBRARY_SEARCH_USER_DIRS: AddDllDirectory (os.add_dll_directory), in order"),
    (How.SYSTEM32, "LOAD_LIBRARY_SEARCH_SYSTEM32"),
    (How.PATH_ENV, "PATH: the standard search order only, not the safe one Python 3.8+ uses"),
)

#: glibc's default directories, per machine: its built-in list (elf/Makefile's ``SYSTEM_DIRS``, from the
#: configured ``slibdir`` and ``libdir``: the multiarch directories on Debian and Ubuntu), then the FHS ones
#: (ld.so(8): "the default path /lib, and then /usr/lib"; "/lib64, and then /usr/lib64" on 64-bit ports).
DEFAULT_DIRS: dict[Machine, tuple[str, ...]] = {
    Machine.X86_64: (
        "/lib/x86_64-linux-gnu",
        "/usr/lib/x86_64-linux-gnu",
        "/lib64",
        "/usr/lib64",
        "/lib",
        "/usr/lib",
    ),
    Machine.AARCH64: (
        "/lib/aarch64-linux-gnu",
        "/usr/lib/aarch64-linux-gnu",
        "/lib64",
        "/usr/lib64",
        "/lib",
        "/usr/lib",
    ),
}
#: Where glibc reads its cache (ldconfig(8)).
LD_CACHE = "/etc/ld.so.cache"
#: What a search-path message names for the cache and System32 (no directory is read for them).
CACHE_LABEL = "ld.so.cache"
SYSTEM32_LABEL = "System32"


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


def expand(entry: str, origin: str, loader: LinuxLoader | None = None) -> str | None:
    """One RPATH/RUNPATH entry with its dynamic string tokens replaced; None when it expands to nothing.

    ``$ORIGIN`` is ``origin``, an installed directory: absolute in an environment, relative to site-packages
    for a wheel (then a leading ``$ORIGIN/..`` may climb out of it: ``../lib``). ``$LIB`` and ``$PLATFORM``
    take the process's values from ``loader``; without one (a wheel, whose process is not known) they stay as
    written. An absolute result is normalised."""
    text = entry.replace("${ORIGIN}", "$ORIGIN")
    if loader is not None:
        for token, value in (("LIB", loader.lib), ("PLATFORM", loader.platform)):
            text = text.replace("${" + token + "}", value).replace("$" + token, value)
    if text.startswith("$ORIGIN"):
        return posixpath.normpath(posixpath.join(origin, text[len("$ORIGIN") :].lstrip("/")))
    text = text.replace("$ORIGIN", origin)
    if not text:
        return None
    return posixpath.normpath("/" + text.lstrip("/")) if text.startswith("/") else text


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


@lru_cache(maxsize=4096)
def expand_entries(
    entries: tuple[str, ...], origin: str, lib: str | None = None, platform: str | None = None
) -> tuple[str, ...]:
    """Every ``:``-separated entry of ``entries`` expanded (:func:`expand`; ``lib``/``platform`` None: left
    as written), in order. Once per object, not once per import (3,000 entries times 3,000 imports)."""
    tokens = None if lib is None or platform is None else LinuxLoader(lib=lib, platform=platform)
    out = []
    for entry in entries:
        for part in entry.split(":"):
            d = expand(part, origin, tokens) if part else None
            if d is not None:
                out.append(d)
    return tuple(out)


def rpath_chain(
    path: str,
    loaders_of: Callable[[str], Iterable[str]],
    dynamic_of: Callable[[str], tuple[tuple[str, ...], tuple[str, ...]] | None],
) -> tuple[tuple[str, tuple[str, ...]], ...]:
    """The DT_RPATH that ``path`` inherits: (object, its DT_RPATH) of the objects that may load it, nearest
    first (breadth first over ``loaders_of``; where several load it, which one does first depends on the
    import order, so every chain counts). An object with DT_RUNPATH contributes nothing, but the chain goes
    on through it; one ``dynamic_of`` does not know ((rpath, runpath), None: not an ELF object) ends it."""
    out: list[tuple[str, tuple[str, ...]]] = []
    seen = {path}
    level = list(loaders_of(path))
    while level:
        following: list[str] = []
        for loader in level:
            if loader in seen:
                continue
            seen.add(loader)
            dynamic = dynamic_of(loader)
            if dynamic is None:
                continue
            rpath, runpath = dynamic
            if not runpath:
                out.append((loader, rpath))
            following.extend(loaders_of(loader))
        level = following
    return tuple(out)


def _rpath_entries(req: Requester, lib: str | None, platform: str | None) -> list[tuple[str, str | None]]:
    """(directory, the loader it is inherited from; None: the object's own) of an object's DT_RPATH search,
    without the program's."""
    dirs: list[tuple[str, str | None]] = [
        (d, None) for d in expand_entries(req.rpath, posixpath.dirname(req.path), lib, platform)
    ]
    for parent, entries in req.inherited_rpath:
        dirs += [(d, parent) for d in expand_entries(entries, posixpath.dirname(parent), lib, platform)]
    return dirs


@lru_cache(maxsize=4096)
def _rpath_dirs(req: Requester, lib: str, platform: str, main_rpath: tuple[str, ...]) -> tuple[str, ...]:
    """The DT_RPATH search of an object without DT_RUNPATH: its own, its loaders', the program's."""
    return (*(d for d, _by in _rpath_entries(req, lib, platform)), *main_rpath)


def object_dirs(req: Requester, loader: LinuxLoader | None = None) -> tuple[tuple[str, How, str | None], ...]:
    """The directories the objects themselves name for ``req``'s imports, each once (its first place), in
    glibc's order: the object's own DT_RUNPATH when it has one; else its DT_RPATH, then that of its loaders
    up the chain. Each with the rule and the loader it is inherited from (None: the object's own). No
    environment, cache or default directory: what a package decides by how it is built and installed."""
    lib, platform = (loader.lib, loader.platform) if loader is not None else (None, None)
    if req.runpath:
        runpath = expand_entries(req.runpath, posixpath.dirname(req.path), lib, platform)
        return tuple((d, How.RUNPATH, None) for d in dict.fromkeys(runpath))
    out: dict[str, str | None] = {}
    for d, by in _rpath_entries(req, lib, platform):
        out.setdefault(d, by)
    return tuple((d, How.RPATH, by) for d, by in out.items())


def packaged_dirs(req: Requester, loader: LinuxLoader) -> list[str]:
    """The directories the requesting object's own RUNPATH (or RPATH) names: where its package put things."""
    origin = posixpath.dirname(req.path)
    return list(expand_entries(req.runpath or req.rpath, origin, loader.lib, loader.platform))


def _linux_steps(req: Requester, loader: LinuxLoader) -> Iterator[tuple[How, tuple[str, ...]]]:
    """The directories of each step of :data:`LINUX_ORDER` (the cache has none: looked up by name)."""
    for how, _source in LINUX_ORDER:
        if how is How.RPATH and not req.runpath:
            yield how, _rpath_dirs(req, loader.lib, loader.platform, loader.main_rpath)
        elif how is How.LD_LIBRARY_PATH:
            yield how, loader.ld_library_path
        elif how is How.RUNPATH and req.runpath:
            yield how, expand_entries(req.runpath, posixpath.dirname(req.path), loader.lib, loader.platform)
        elif how is How.CACHE:
            yield how, ()
        elif how is How.DEFAULT:
            yield how, loader.default_dirs


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
    for how, dirs in _linux_steps(req, loader):
        if how is How.CACHE:
            cached = loader.cache.get(name)
            found = Found(cached, How.CACHE) if cached is not None and exists(cached) else None
        else:
            found = first_in(dirs, name, exists, how, index)
        if found is not None:
            return found
    return None


def searched_linux(req: Requester, loader: LinuxLoader) -> list[str]:
    """Where a name not found was looked for, as a message names it: the object's own RUNPATH (or RPATH),
    ``LD_LIBRARY_PATH``, the cache (when one was read), the default directories."""
    out = packaged_dirs(req, loader) + list(loader.ld_library_path)
    if loader.cache:
        out.append(CACHE_LABEL)
    return out + list(loader.default_dirs)


def _windows_steps(importer: str, loader: WindowsLoader) -> list[tuple[How, list[str]]]:
    """The directories of each step of :data:`WINDOWS_ORDER`."""
    given: dict[How, list[str]] = {
        How.OWN_DIR: [posixpath.dirname(importer)],
        How.APP_DIR: [loader.app_dir] if loader.app_dir else [],
        How.DLL_DIRECTORY: list(loader.dll_directories),
        How.SYSTEM32: [loader.system32],
        How.PATH_ENV: list(loader.path),
    }
    return [(how, given[how]) for how, _source in WINDOWS_ORDER if how is not How.APP_DIR or loader.app_dir]


def package_dll_dirs(importer: str, loader: WindowsLoader) -> tuple[str, ...]:
    """The directories the safe search takes from the process and its packages, before System32: the DLL's
    own, the application's, those added with ``os.add_dll_directory``; each once."""
    before = (How.OWN_DIR, How.APP_DIR, How.DLL_DIRECTORY)
    steps = _windows_steps(importer, loader)
    return tuple(dict.fromkeys(d for how, dirs in steps if how in before for d in dirs))


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
    for how, dirs in _windows_steps(importer, loader):
        found = first_in(dirs, name, exists, how)
        if found is not None:
            return found
    return None


def searched_windows(importer: str, loader: WindowsLoader) -> list[str]:
    """Where a DLL not found was looked for, as a message names it (System32 by name)."""
    return list(dict.fromkeys([*package_dll_dirs(importer, loader), SYSTEM32_LABEL]))


#: What a loader matches a needed name against among the objects already loaded, before it searches, per
#: binary format (``elf``, ``pe``, ``macho``): (what matches, where it is written down). A library loaded
#: first (by the package's Python code, by a required package's import) satisfies a later need of that name
#: wherever the search path would not reach it.
ALREADY_LOADED: dict[str, tuple[str, str]] = {
    "elf": (
        "glibc reuses the loaded object whose SONAME (or file name) is the DT_NEEDED name",
        "glibc elf/dl-load.c _dl_map_object: the loaded objects are matched by _dl_name_match_p and l_soname "
        "before any search",
    ),
    "pe": (
        "Windows reuses the loaded module of the same base name (case-insensitive)",
        "Microsoft Learn, Dynamic-link library search order, factors that affect searching: a DLL of the "
        "same module name already loaded is used, whichever directory it is in",
    ),
    "macho": (
        "dyld reuses the loaded image whose install name (LC_ID_DYLIB) is the load command's name",
        "dyld src/dyld.cpp loadPhase5check (dyld2): 'an install name starting with @rpath should match by "
        "install name, not just real path'; dyld4 JustInTimeLoader::matchesPath compares the load path with "
        "the image's path and its install name",
    ),
}


def dyld_reuses(load_name: str, install_name: str | None) -> bool:
    """Whether dyld satisfies a load command naming ``load_name`` (``@rpath/libfoo.dylib``) with an image
    already loaded whose ``LC_ID_DYLIB`` is ``install_name``, wherever that image's file lies
    (:data:`ALREADY_LOADED`): the names are equal, byte for byte."""
    return install_name is not None and load_name == install_name


#: dyld's prefixes of an install name relative to the importer (``@rpath/`` searched in its LC_RPATH).
MACHO_PREFIXES = ("@rpath/", "@loader_path/", "@executable_path/")


def macho_name(name: str) -> str:
    """A Mach-O install name without its dyld prefix (:data:`MACHO_PREFIXES`)."""
    for prefix in MACHO_PREFIXES:
        if name.startswith(prefix):
            return name[len(prefix) :]
    return name


def macho_dirs(path: str, rpath: tuple[str, ...]) -> tuple[str, ...]:
    """The directories dyld searches for a relative install name of the object at ``path``: its own
    directory (``@loader_path``), then each ``LC_RPATH`` entry relative to it (``@loader_path/..``; the
    program being Python, ``@executable_path`` is taken as the same); each once."""
    origin = posixpath.dirname(path)
    dirs = [origin]
    for entry in rpath:
        if entry.startswith(("@loader_path", "@executable_path")):
            rest = entry.split("/", 1)[1] if "/" in entry else ""
            dirs.append(posixpath.normpath(posixpath.join(origin, rest)))
    return tuple(dict.fromkeys(dirs))


#: The file names Python's import loads as an extension module (``importlib.machinery.EXTENSION_SUFFIXES``):
#: ``x.cpython-311-x86_64-linux-gnu.so``, ``x.abi3.so``, ``x.pyd`` (``x.cp311-win_amd64.pyd``).
_EXTENSION_SUFFIX = re.compile(r"(\.(cpython-[^./]+|abi3)\.so|\.pyd)$", re.IGNORECASE)


def is_extension_module(path: str, exports: Collection[str] | None = None) -> bool:
    """A Python extension module (what ``import`` loads by its path, before the loader searches for its
    imports): a name with an extension suffix, or a library exporting ``PyInit_<stem>`` (``_PyInit_<stem>``
    in a Mach-O symbol table, whose C names carry a leading underscore). ``exports`` None: the exports were
    not read (``doctor --env`` reads a loader's facts only); then a plain ``x.so`` not named ``lib*`` counts
    too (Python imports ``x.so``; a library is named ``lib*``)."""
    base = posixpath.basename(path)
    if _EXTENSION_SUFFIX.search(base):
        return True
    if exports is None:
        return base.endswith(".so") and not base.startswith("lib")
    entry = f"PyInit_{base.split('.', 1)[0]}"
    return entry in exports or f"_{entry}" in exports
