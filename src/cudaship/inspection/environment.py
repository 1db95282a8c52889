"""An installed Python environment as records: its distributions (each ``.dist-info``'s METADATA and RECORD,
read by :class:`cudaship.providers.sources.EnvSource`) and the native libraries they installed, each read for
its host-side facts (imports, search paths, symbol versions) and, when asked, its device code.

Nothing is imported or executed from the environment: a Linux environment can be read from any OS.
"""

from __future__ import annotations

import os
import posixpath
import threading
from collections.abc import Callable, Sequence
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass
from pathlib import Path

from cudaship.binary.ldcache import read_ld_cache
from cudaship.hashing import sha256_file
from cudaship.inspection.walk import inspect_file
from cudaship.probe.environment import NATIVE_NAME
from cudaship.providers.records import Distribution
from cudaship.providers.sources import EnvSource, no_distributions, site_packages
from cudaship.records.binary import HostBinary, Machine
from cudaship.records.files import FileReport


@dataclass(frozen=True)
class InstalledDistribution:
    site: str  #: the site-packages directory (``/``-separated, absolute)
    dist: Distribution

    @property
    def label(self) -> str:
        """``nvidia-cusparse-cu12 12.5.8.93``."""
        return f"{self.dist.name} {self.dist.version}"


@dataclass(frozen=True)
class EnvLibrary:
    """A native library (or extension module) a distribution installed."""

    path: str  #: absolute, ``/``-separated
    owner: InstalledDistribution
    report: FileReport


@dataclass(frozen=True)
class Environment:
    sites: tuple[str, ...]  #: in ``sys.path`` order
    distributions: tuple[InstalledDistribution, ...]
    libraries: tuple[EnvLibrary, ...]
    files: frozenset[str]  #: every installed file (absolute, ``/``-separated), for the loader's searches
    os: str  #: ``linux`` or ``windows``: the kind of the native files
    #: ``.dist-info`` directories that could not be read (METADATA or RECORD a FIFO, a device, over its cap,
    #: not UTF-8, not CSV), one line each naming the file: left out of the environment, never its end
    problems: tuple[str, ...] = ()


def _posix(path: Path) -> str:
    return path.as_posix()


def read_environment(env: Sequence[str], *, device: bool = False, jobs: int = 4) -> Environment:
    """Read the environment ``env``: an interpreter (its purelib and platlib), an environment root (a
    virtual environment or prefix) or site-packages directories, in ``sys.path`` order. An environment
    holding no distribution raises UsageError (exit 2): nothing read is not a pass. ``device`` also scans
    each library for device code (for the GPU findings)."""
    sites: list[Path] = []
    for item in env:
        for d in site_packages(item):
            resolved = d.resolve()
            if resolved not in sites:
                sites.append(resolved)
    installed: list[InstalledDistribution] = []
    native: list[tuple[Path, InstalledDistribution]] = []
    files: set[str] = set()
    problems: list[str] = []
    for site in sites:
        root = _posix(site)
        source = EnvSource(str(site), allow_empty=True)
        problems += source.problems
        for dist in source.distributions():
            owner = InstalledDistribution(root, dist)
            installed.append(owner)
            for rel in dist.files:
                files.add(posixpath.join(root, rel))
                if NATIVE_NAME.search(rel):
                    native.append((site / rel, owner))
    if not installed:
        raise no_distributions(", ".join(env), sites, problems)
    seen: set[str] = set()
    todo = []
    for native_path, owner in native:
        key = _posix(native_path)
        if key not in seen and native_path.is_file():
            seen.add(key)
            todo.append((native_path, owner))

    def read(item: tuple[Path, InstalledDistribution]) -> EnvLibrary:
        path, owner = item
        return EnvLibrary(_posix(path), owner, inspect_file(path, _posix(path), device=device))

    with ThreadPoolExecutor(max_workers=max(1, jobs)) as pool:
        libraries = tuple(pool.map(read, todo))
    windows = sum(1 for lib in libraries if lib.path.lower().endswith((".dll", ".pyd")))
    return Environment(
        sites=tuple(_posix(s) for s in sites),
        distributions=tuple(installed),
        libraries=libraries,
        files=frozenset(files),
        os="windows" if windows > len(libraries) - windows else "linux",
        problems=tuple(problems),
    )


def ld_cache_names(path: str, machine: Machine) -> dict[str, str]:
    """Name → path of the loader cache at ``path`` for processes of ``machine`` (first entry wins, as in the
    loader); empty when the file is missing. A file that is not a cache raises BinaryFormatError."""
    try:
        data = Path(path).read_bytes()
    except OSError:
        return {}
    out: dict[str, str] = {}
    for entry in read_ld_cache(data):
        if entry.machine is machine:
            out.setdefault(entry.name, entry.path)
    return out


class SystemFiles:
    """This machine's files, for a local environment: existence and host records, each read once."""

    def __init__(self, env: Environment) -> None:
        self._env = env.files
        self._env_record = env
        self._env_names: Callable[[str], frozenset[str]] | None = None
        self._exists: dict[str, bool] = {}
        self._hosts: dict[str, HostBinary | None] = {}
        self._lock = threading.Lock()

    def exists(self, path: str) -> bool:
        if path in self._env:
            return True
        with self._lock:
            if path not in self._exists:
                self._exists[path] = os.path.isfile(path)
            return self._exists[path]

    def list_dir(self, directory: str) -> frozenset[str] | None:
        """The names in ``directory``: the environment's files there and this machine's (listed once by the
        loader's directory index); None when the directory exists but cannot be listed."""
        if self._env_names is None:
            self._env_names = env_dir_names(self._env_record)
        own = self._env_names(directory)
        try:
            return own | frozenset(os.listdir(directory))
        except (FileNotFoundError, NotADirectoryError):
            return own
        except (OSError, ValueError):
            return None  # there but unreadable: each candidate is probed instead

    def host(self, path: str) -> HostBinary | None:
        with self._lock:
            if path not in self._hosts:
                report = inspect_file(Path(path), path, device=False)
                self._hosts[path] = report.host if report.error is None else None
            return self._hosts[path]


class SameContent:
    """Whether two files have the same content: the same file (one inode), or the same size and sha256.
    Each file is hashed at most once, and only when another file of its size is compared with it."""

    def __init__(self) -> None:
        self._digests: dict[str, str | None] = {}
        self._lock = threading.Lock()

    def _digest(self, path: str) -> str | None:
        with self._lock:
            if path not in self._digests:
                try:
                    self._digests[path] = sha256_file(Path(path))
                except OSError:
                    self._digests[path] = None
            return self._digests[path]

    def __call__(self, a: str, b: str) -> bool:
        try:
            sa, sb = os.stat(a), os.stat(b)
        except OSError:
            return False
        if (sa.st_dev, sa.st_ino) == (sb.st_dev, sb.st_ino):
            return True
        if sa.st_size != sb.st_size:
            return False
        da = self._digest(a)
        return da is not None and da == self._digest(b)


def env_dir_names(env: Environment) -> Callable[[str], frozenset[str]]:
    """The names of the environment's own files in a directory (``/``-separated, absolute), for the loader's
    directory index: a foreign environment's directories are never listed on this machine."""
    by_dir: dict[str, set[str]] = {}
    for f in env.files:
        d, _, name = f.rpartition("/")
        by_dir.setdefault(d or "/", set()).add(name)
    frozen = {d: frozenset(names) for d, names in by_dir.items()}
    empty: frozenset[str] = frozenset()
    return lambda directory: frozen.get(posixpath.normpath(directory), empty)


def env_files_exist(env: Environment, *, case_insensitive: bool = False) -> Callable[[str], bool]:
    """Existence among the environment's own files only (a foreign environment, or the system left out)."""
    if not case_insensitive:
        return env.files.__contains__
    lowered = frozenset(f.lower() for f in env.files)
    return lambda path: path.lower() in lowered
