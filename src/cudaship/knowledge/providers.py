"""Provider knowledge (``data/providers.toml``): loader conventions of packages, and, for offline use, what
NVIDIA's and a few major packages install.

* :func:`conventions_for` — the conventions of a project (torch preloads; cupy and onnxruntime-gpu find CUDA
  libraries at run time; libraries loaded on demand).
* :func:`known_distribution` — an offline stand-in for a distribution: NVIDIA component projects from
  ``nvidia_libraries.toml``; the ``cuda-toolkit`` metapackage's extras; torch's files.
* :func:`builds_providing` — a build of a project other than the one on the index (torch's CUDA builds on
  download.pytorch.org) known to install a file.
"""

from __future__ import annotations

import fnmatch
import posixpath
from collections.abc import Iterable
from dataclasses import dataclass
from typing import Literal

from packaging.specifiers import SpecifierSet
from packaging.version import InvalidVersion, Version

from cudaship.errors import KnowledgeError
from cudaship.knowledge import _data
from cudaship.knowledge.libraries import components, library_file, pypi_package
from cudaship.knowledge.nvidia_wheels import files_of
from cudaship.once import once
from cudaship.schema import Table

_FILE = "providers.toml"


@dataclass(frozen=True)
class Convention:
    project: str  #: glob over canonical project names
    preloads: bool = False
    dll_directories: tuple[str, ...] = ()
    runtime_lookup: str | None = None
    on_demand: tuple[tuple[str, str], ...] = ()  #: (glob of a library path, what loads it)
    requirement: str | None = None  #: applies to any project declaring this requirement
    shims: tuple[
        str, ...
    ] = ()  #: globs of the package's own loader shims (needed libraries exist to be loaded)
    #: the runtime lookup loads a library from an installed distribution before the system search
    #: (cuda-pathfinder: already loaded, then the NVIDIA wheels, then conda, then dlopen by name)
    installed_first: bool = False
    #: functions of the package's top-level modules that its consumers call to load its libraries (RAPIDS'
    #: ``libkvikio.load_library()``); ``audit --load`` calls them after the import when the module has them
    loader_functions: tuple[str, ...] = ()
    #: dotted names of the package's functions that dlopen the path given (``torch.ops.load_library``)
    path_loaders: tuple[str, ...] = ()
    source: str = ""


@dataclass(frozen=True)
class KnownDistribution:
    name: str
    version: str
    requires_dist: tuple[str, ...]
    files: tuple[str, ...]
    extras: tuple[str, ...]
    source: str


@dataclass(frozen=True)
class Build:
    """A build of ``project`` known to install ``files`` (not necessarily the one on the index)."""

    project: str
    os: str
    cuda: int
    files: tuple[str, ...]
    note: str
    source: str


def _pair(row: Table, name: str) -> list[tuple[str, str]]:
    """``[[glob, what], ...]`` pairs."""
    pairs = []
    for i, pair in enumerate(row.get(name) or []):
        if not (isinstance(pair, list) and len(pair) == 2 and all(isinstance(p, str) for p in pair)):
            raise row.wrong(f"{name}[{i}]", "a [glob, what] pair", pair, show=True)
        pairs.append((pair[0], pair[1]))
    return pairs


@once
def _conventions() -> tuple[Convention, ...]:
    out = []
    for row in _data.document(_FILE).rows("conventions"):
        out.append(
            Convention(
                project=row.text("project"),
                preloads=row.boolean("preloads", False),
                dll_directories=row.strings("dll_directories", single=False),
                runtime_lookup=row.string("runtime_lookup"),
                on_demand=tuple(_pair(row, "on_demand")),
                requirement=row.string("requirement"),
                shims=row.strings("shims", single=False),
                installed_first=row.boolean("installed_first", False),
                loader_functions=row.strings("loader_functions", single=False),
                path_loaders=row.strings("path_loaders", single=False),
                source=row.text("source"),
            )
        )
    return tuple(out)


def conventions_for(project: str, requirements: tuple[str, ...] = ()) -> tuple[Convention, ...]:
    """The conventions that apply to ``project`` (canonical name) declaring ``requirements`` (canonical
    names)."""
    out = []
    for c in _conventions():
        if not fnmatch.fnmatchcase(project, c.project):
            continue
        if c.requirement is not None and c.requirement not in requirements:
            continue
        out.append(c)
    return tuple(out)


@once
def path_loaders() -> frozenset[str]:
    """Every convention's ``path_loaders``: dotted names of functions (of any package) that dlopen the path
    they are given, as ``ctypes.CDLL`` does (``torch.ops.load_library``)."""
    return frozenset(name for c in _conventions() for name in c.path_loaders)


@dataclass(frozen=True)
class Preload:
    """What ``import <project>`` (of ``versions``) loads by path before its extension modules, in order: each
    entry a tuple of site-packages relative globs; the first glob matching a file, site by site in
    ``sys.path`` order, gives the file loaded."""

    project: str
    versions: SpecifierSet
    files: tuple[tuple[str, ...], ...]
    source: str


@once
def _preloads() -> tuple[Preload, ...]:
    out = []
    for row in _data.document(_FILE).rows("preloads"):
        files = []
        for i, entry in enumerate(row.get("files") or []):
            files.append(row.string_list(entry, row.dotted("files") + f"[{i}]", required=True))
        try:
            versions = SpecifierSet(row.string("versions", "") or "")
        except ValueError as exc:
            raise row.fail(row.dotted("versions"), str(exc)) from None
        out.append(Preload(row.text("project"), versions, tuple(files), row.text("source")))
    return tuple(out)


def preloads_for(project: str, version: str) -> tuple[Preload, ...]:
    """The preload rows of ``project`` (canonical name) that apply to ``version`` (local versions such as
    ``2.11.0+cu130`` included). A version that is none (the knowledge table's ``(CUDA 13)``: what ``pip
    install`` brings today) gets the first row of the project, the newest releases'."""
    rows = [p for p in _preloads() if fnmatch.fnmatchcase(project, p.project)]
    try:
        Version(version)
    except InvalidVersion:
        return tuple(rows[:1])
    return tuple(p for p in rows if p.versions.contains(version, prereleases=True))


def preload_picks(files: Iterable[str], preload: Preload) -> tuple[str, ...]:
    """The files of one site-packages (relative paths) that ``preload``'s entries load, in order: per entry,
    the first glob matching a file, its first match in name order (the package globs the directory): what
    ``doctor --env`` simulates (:mod:`cudaship.analysis.envload`) and the audit credits to a required host's
    import (:mod:`cudaship.checks.providers`)."""
    by_dir: dict[str, list[str]] = {}
    for f in files:
        by_dir.setdefault(posixpath.dirname(f), []).append(f)
    dirs = sorted(by_dir)
    out: list[str] = []
    for alternatives in preload.files:
        for pattern in alternatives:
            head, tail = posixpath.split(pattern)
            wanted = (
                [d for d in dirs if fnmatch.fnmatchcase(d, head)] if any(c in head for c in "*?[") else [head]
            )
            matches = sorted(
                f
                for d in wanted
                for f in by_dir.get(d, ())
                if fnmatch.fnmatchcase(posixpath.basename(f), tail)
            )
            if matches:
                if matches[0] not in out:
                    out.append(matches[0])
                break
    return tuple(out)


@once
def _toolkit_extras() -> dict[int, dict[str, tuple[str, ...]]]:
    table = _data.document(_FILE).sub("cuda_toolkit")
    out: dict[int, dict[str, tuple[str, ...]]] = {}
    for major, extras in table.tables("a table named by a CUDA major") if table else ():
        if not major.isdigit():
            raise extras.fail(extras.key, "must be a table named by a CUDA major")
        out[int(major)] = {k: extras.strings(k, single=False) for k in extras}
    return out


def toolkit_extras(major: int) -> dict[str, tuple[str, ...]]:
    """The ``cuda-toolkit`` metapackage's extras for CUDA ``major``: extra -> the projects it installs."""
    return dict(_toolkit_extras().get(major, {}))


@dataclass(frozen=True)
class _Known:
    project: str
    os: str
    cuda: int
    files: tuple[str, ...]
    requires: tuple[str, ...]
    build: bool
    components: tuple[str, ...]
    note: str
    source: str


@once
def _known() -> tuple[_Known, ...]:
    out = []
    for row in _data.document(_FILE).rows("known"):
        out.append(
            _Known(
                row.text("project"),
                row.text("os"),
                row.number("cuda", "a CUDA major"),
                row.strings("files", single=False),
                row.strings("requires", single=False),
                row.boolean("build", False),
                row.strings("cuda_components", single=False),
                row.string("note", "") or "",
                row.text("source"),
            )
        )
    return tuple(out)


def index_file_hosts(index_host: str) -> tuple[str, ...]:
    """Hosts the index at ``index_host`` serves its files from besides its own (``files.pythonhosted.org``
    for ``pypi.org``); none for an index the data does not know."""
    table = _data.document(_FILE).sub("index_file_hosts")
    return table.strings(index_host.lower(), single=False) if table else ()


@once
def development_extras() -> frozenset[str]:
    """Extras of an audited wheel that install development tools (``dev``, ``test``, ``docs``, ...)."""
    table = _data.document(_FILE).sub("extras")
    return frozenset(table.strings("development", single=False) if table else ())


def _major_of(spec: SpecifierSet) -> int | None:
    for s in spec:
        head = s.version.split(".")[0]
        if s.operator in ("==", "~=", ">=", "===") and head.isdigit():
            return int(head)
    return None


def _component_files(
    component: str, major: int, os: Literal["linux", "windows"], in_dir: str | None
) -> list[str]:
    pkg = pypi_package(component, major, os)
    name = library_file(component, major, os)
    if pkg is None or name is None:
        return []
    return [f"{in_dir or pkg.directory}/{name}"]


def known_distribution(name: str, spec: SpecifierSet, os: str) -> KnownDistribution | None:
    """An offline stand-in for project ``name`` on ``os`` (linux/windows), or None when nothing is known."""
    if os not in ("linux", "windows"):
        return None
    osl: Literal["linux", "windows"] = "linux" if os == "linux" else "windows"
    if name == "cuda-toolkit":
        major = _major_of(spec)
        extras = _toolkit_extras().get(major or -1)
        if extras is None:
            return None
        requires = tuple(f'{p}; extra == "{extra}"' for extra, projects in extras.items() for p in projects)
        return KnownDistribution(
            name, f"{major}.*", requires, (), tuple(extras), f"{_FILE} [cuda_toolkit.{major}]"
        )
    for row in _known():
        if row.project == name and row.os == os and not row.build:
            return KnownDistribution(name, f"(CUDA {row.cuda})", row.requires, row.files, (), row.source)
    files: list[str] = []
    for comp in components():
        for major in (11, 12, 13):
            try:
                pkg = pypi_package(comp, major, osl)
            except KnowledgeError:
                continue
            if pkg is not None and pkg.project == name:
                files.extend(_component_files(comp, major, osl, None))
    files.extend(files_of(name, osl))  # the checked rows: nvidia-cudnn-cu12 8.x ships libcudnn.so.8 too
    if not files:
        return None
    source = "nvidia_libraries.toml, repair_providers.toml"
    return KnownDistribution(name, "(any version)", (), tuple(sorted(set(files))), (), source)


def builds_providing(project: str, basename: str, os: str) -> Build | None:
    """A known build of ``project`` for ``os`` that installs a file named ``basename`` (case-insensitive on
    Windows); None when none is known."""
    want = basename.lower() if os == "windows" else basename
    osl: Literal["linux", "windows"] = "linux" if os == "linux" else "windows"
    for row in _known():
        if row.project != project or row.os != os or not row.build:
            continue
        files = list(row.files)
        for comp in row.components:
            files.extend(_component_files(comp, row.cuda, osl, "torch/lib" if os == "windows" else None))
        for f in files:
            base = f.rsplit("/", 1)[-1]
            if (base.lower() if os == "windows" else base) == want:
                return Build(project, os, row.cuda, tuple(files), row.note, row.source)
    return None
