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
from dataclasses import dataclass
from typing import Any, Literal

from packaging.specifiers import SpecifierSet

from cudaship.errors import KnowledgeError
from cudaship.knowledge import _data
from cudaship.knowledge.libraries import components, library_file, pypi_package
from cudaship.once import once

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


def _strs(value: Any, where: str) -> tuple[str, ...]:
    if value is None:
        return ()
    if not isinstance(value, list) or not all(isinstance(v, str) for v in value):
        raise KnowledgeError(f"{_FILE}: {where} must be a list of strings")
    return tuple(value)


@once
def _conventions() -> tuple[Convention, ...]:
    rows = _data.load(_FILE).get("conventions", [])
    out = []
    for i, row in enumerate(rows):
        where = f"conventions[{i}]"
        if not isinstance(row, dict) or not isinstance(row.get("project"), str) or not row.get("source"):
            raise KnowledgeError(f"{_FILE}: {where} needs a project and a source")
        pairs = []
        for pair in row.get("on_demand", []):
            if not (isinstance(pair, list) and len(pair) == 2 and all(isinstance(p, str) for p in pair)):
                raise KnowledgeError(f"{_FILE}: {where}.on_demand entries are [glob, what] pairs")
            pairs.append((pair[0], pair[1]))
        out.append(
            Convention(
                project=row["project"],
                preloads=bool(row.get("preloads", False)),
                dll_directories=_strs(row.get("dll_directories"), f"{where}.dll_directories"),
                runtime_lookup=row.get("runtime_lookup"),
                on_demand=tuple(pairs),
                requirement=row.get("requirement"),
                shims=_strs(row.get("shims"), f"{where}.shims"),
                installed_first=bool(row.get("installed_first", False)),
                loader_functions=_strs(row.get("loader_functions"), f"{where}.loader_functions"),
                source=str(row["source"]),
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
    for i, row in enumerate(_data.load(_FILE).get("preloads", [])):
        where = f"preloads[{i}]"
        if not isinstance(row, dict) or not isinstance(row.get("project"), str) or not row.get("source"):
            raise KnowledgeError(f"{_FILE}: {where} needs a project and a source")
        files = []
        for entry in row.get("files", []):
            globs = (entry,) if isinstance(entry, str) else _strs(entry, f"{where}.files")
            if not globs:
                raise KnowledgeError(f"{_FILE}: {where}.files entries are globs or lists of globs")
            files.append(globs)
        try:
            versions = SpecifierSet(str(row.get("versions", "")))
        except ValueError as exc:
            raise KnowledgeError(f"{_FILE}: {where}.versions: {exc}") from None
        out.append(Preload(row["project"], versions, tuple(files), str(row["source"])))
    return tuple(out)


def preloads_for(project: str, version: str) -> tuple[Preload, ...]:
    """The preload rows of ``project`` (canonical name) that apply to ``version`` (local versions such as
    ``2.11.0+cu130`` included)."""
    return tuple(
        p
        for p in _preloads()
        if fnmatch.fnmatchcase(project, p.project) and p.versions.contains(version, prereleases=True)
    )


@once
def _toolkit_extras() -> dict[int, dict[str, tuple[str, ...]]]:
    table = _data.load(_FILE).get("cuda_toolkit", {})
    out: dict[int, dict[str, tuple[str, ...]]] = {}
    for major, extras in table.items():
        if not str(major).isdigit() or not isinstance(extras, dict):
            raise KnowledgeError(f"{_FILE}: [cuda_toolkit.{major}] must be a table named by a CUDA major")
        out[int(major)] = {k: _strs(v, f"cuda_toolkit.{major}.{k}") for k, v in extras.items()}
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
    for i, row in enumerate(_data.load(_FILE).get("known", [])):
        where = f"known[{i}]"
        if not isinstance(row, dict) or not row.get("source") or not isinstance(row.get("cuda"), int):
            raise KnowledgeError(f"{_FILE}: {where} needs a project, os, cuda major and a source")
        out.append(
            _Known(
                str(row["project"]),
                str(row["os"]),
                int(row["cuda"]),
                _strs(row.get("files"), f"{where}.files"),
                _strs(row.get("requires"), f"{where}.requires"),
                bool(row.get("build", False)),
                _strs(row.get("cuda_components"), f"{where}.cuda_components"),
                str(row.get("note", "")),
                str(row["source"]),
            )
        )
    return tuple(out)


def index_file_hosts(index_host: str) -> tuple[str, ...]:
    """Hosts the index at ``index_host`` serves its files from besides its own (``files.pythonhosted.org``
    for ``pypi.org``); none for an index the data does not know."""
    table = _data.load(_FILE).get("index_file_hosts", {})
    return tuple(_strs(table.get(index_host.lower()), f"index_file_hosts.{index_host}"))


@once
def development_extras() -> frozenset[str]:
    """Extras of an audited wheel that install development tools (``dev``, ``test``, ``docs``, ...)."""
    table = _data.load(_FILE).get("extras", {})
    return frozenset(_strs(table.get("development"), "extras.development"))


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
    if not files:
        return None
    return KnownDistribution(
        name, "(any version)", (), tuple(sorted(set(files))), (), "nvidia_libraries.toml"
    )


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
