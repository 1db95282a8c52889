"""``doctor --env``: will these packages load together here? Findings over the simulated process
(:mod:`cudaship.analysis.envload`) and NVIDIA's minimum versions between components.

Rules (each finding, a failed :class:`~cudaship.records.findings.CheckResult` of family ``environment``
made by :func:`~cudaship.records.findings.judged`, carries one as its name and rule):

* ``unresolved`` (error): an import the loader finds nowhere; a note when the importing library is loaded
  only on demand (a package's documented optional feature) or when the importer's distribution installs the
  library under an extra (an optional component, ``cupy-cuda12x[ctk]``: the audit's judgement of the same
  import, :mod:`cudaship.records.judgement`), a warning for a Windows delay-load import.
* ``missing-version`` (error): the file picked does not define a symbol version the importer needs
  (``version `GLIBC_2.34' not found``).
* ``missing-symbol`` (error): the file picked defines the version but not the versioned symbol
  (``undefined symbol: __nvJitLinkComplete_12_8, version libnvJitLink.so.12``). Python loads extension
  modules with ``RTLD_NOW``: every such symbol fails the import, not only its first call.
* ``duplicate`` (warning): two different files known by one SONAME loaded in one process (two CUDA
  runtimes, each with its own state; which one a library binds to depends on import order).
* ``shadowed`` (warning): a library's own packaged copy is not the one loaded (``LD_LIBRARY_PATH``, the
  cache or an earlier load win) and the two files differ.
* ``identical-copies`` (note): the same, with two files of the same size and sha256: nothing is shadowed.
* ``component-version`` (error): installed NVIDIA component wheels older than what a sibling needs, with the
  source of the rule.
* ``unreadable`` (error, exit 2): a native file that could not be read.
* ``unreadable-distribution`` (warning): a ``.dist-info`` whose METADATA or RECORD could not be read (a FIFO,
  a device, a link to ``/dev/zero``, over its size cap, not UTF-8, not CSV): its files are left out.
"""

from __future__ import annotations

import fnmatch
import os
import posixpath
import sys
from collections.abc import Iterable, Sequence
from dataclasses import dataclass, replace
from pathlib import Path

from cudaship.analysis.envload import Edge, LoadGraph, simulate
from cudaship.analysis.gpus import FileVerdicts, file_verdicts
from cudaship.analysis.loader import DEFAULT_DIRS, LD_CACHE, How, LinuxLoader, WindowsLoader
from cudaship.analysis.summary import Summary
from cudaship.checks.confirm import ConfirmReport
from cudaship.checks.confirm import findings as confirm_findings
from cudaship.checks.nvidia import extra_providing
from cudaship.inspection.environment import (
    Environment,
    EnvLibrary,
    InstalledDistribution,
    SameContent,
    SystemFiles,
    env_dir_names,
    env_files_exist,
    ld_cache_names,
    read_environment,
)
from cudaship.inspection.walk import library_names_in
from cudaship.knowledge.component_minimums import violations
from cudaship.knowledge.providers import conventions_for
from cudaship.knowledge.system_libraries import LibraryFamily, family_member
from cudaship.knowledge.variants import numbered_siblings, recognise
from cudaship.probe.records import ProbeResult
from cudaship.records.binary import ImportKind, Machine
from cudaship.records.findings import CheckResult, Severity, Status, judged
from cudaship.records.judgement import Judgement, Met

#: Missing symbols named in one finding before the rest are counted.
MAX_SYMBOLS = 5
#: Searched directories named in one finding before the rest are counted (a hostile RUNPATH has thousands).
MAX_DIRS = 12


#: The family (mechanism) of the findings :func:`check_environment` returns.
FAMILY = "environment"


class _Owners:
    def __init__(self, env: Environment) -> None:
        self.by_path: dict[str, InstalledDistribution] = {lib.path: lib.owner for lib in env.libraries}
        self.sites = env.sites
        self.libraries: dict[str, list[EnvLibrary]] = {}
        for lib in env.libraries:
            self.libraries.setdefault(lib.owner.label, []).append(lib)
        #: distribution label -> file name -> a library of that distribution that stores the name for dlopen
        self._stored: dict[str, dict[str, str]] = {}

    def loaded_by_name(self, path: str) -> str | None:
        """A library of the same distribution that stores ``path``'s file name for dlopen (a plugin its host
        loads at run time for a feature), or None: the audit's rule for an optional library
        (:func:`cudaship.checks.resolve.loaded_on_demand`). The environment's hosts are read without the
        names they store (speed); those of this distribution's libraries are read here, once, when asked."""
        label = self.label(path)
        if label is None:
            return None
        stored = self._stored.get(label)
        if stored is None:
            stored = self._stored[label] = {}
            for lib in self.libraries.get(label, []):
                if lib.report.host is None:
                    continue
                names = lib.report.host.embedded_library_names or library_names_in(Path(lib.path))
                for name in names:
                    stored.setdefault(posixpath.basename(name), lib.path)
        host = stored.get(posixpath.basename(path))
        return host if host is not None and host != path else None

    def label(self, path: str | None) -> str | None:
        if path is None:
            return None
        owner = self.by_path.get(path)
        return owner.label if owner is not None else None

    def show(self, path: str) -> str:
        """A path as a user reads it: site-packages relative for the environment's files."""
        owner = self.by_path.get(path)
        if owner is not None and path.startswith(owner.site + "/"):
            return path[len(owner.site) + 1 :]
        return path

    def show_dir(self, path: str) -> str:
        """A searched directory: site-packages relative (``nvidia/cufile/lib``) when inside one."""
        for site in self.sites:
            if path == site or path.startswith(site + "/"):
                return posixpath.relpath(path, site)
        return path

    def described(self, path: str) -> str:
        label = self.label(path)
        return f"{self.show(path)} ({label})" if label else f"{self.show(path)} (system)"


def _on_demand(owners: _Owners, path: str) -> str | None:
    owner = owners.by_path.get(path)
    if owner is None:
        return None
    rel = owners.show(path)
    for convention in conventions_for(owner.dist.name):
        for pattern, what in convention.on_demand:
            if fnmatch.fnmatchcase(rel, pattern):
                return what
    return None


def check_environment(env: Environment, graph: LoadGraph) -> list[CheckResult]:
    owners = _Owners(env)
    findings: list[CheckResult] = []
    for lib in env.libraries:
        if lib.report.error is not None:
            findings.append(
                judged(
                    FAMILY,
                    "unreadable",
                    Severity.ERROR,
                    f"{owners.show(lib.path)}: cannot read: {lib.report.error}",
                    file=lib.path,
                    distribution=lib.owner.label,
                )
            )
    for problem in env.problems:
        findings.append(judged(FAMILY, "unreadable-distribution", Severity.WARNING, problem))
    scopes = _Scopes(graph)
    for edge in graph.edges:
        if edge.target is None and edge.provider is None:
            findings.append(_unresolved(owners, edge))
        elif edge.how is How.PATH_ENV:
            findings.append(_only_on_path(owners, edge))
        elif edge.target is not None:
            findings += _versions(owners, edge, scopes)
            if edge.packaged is not None:
                findings.append(_shadowed(owners, edge, graph))
    findings += _duplicates(owners, graph)
    findings += _components(env)
    return _family_variants(_other_environments(owners, findings))


def _family_variants(findings: list[CheckResult]) -> list[CheckResult]:
    """Variants per release of a system library family (torchcodec's ``libtorchcodec_core4.so`` ...
    ``core9.so``, each importing another FFmpeg release's libraries), judged as the audit judges them
    (:func:`cudaship.checks.closure._family_variants`): each variant's missing family imports are notes, and
    one warning per family says that at least one variant must load, naming the releases and the packages."""
    unresolved = [f for f in findings if f.rule == "unresolved" and f.subject.file and f.subject.library]
    siblings = numbered_siblings({f.subject.file or "" for f in unresolved})
    #: importer -> (family, releases, its findings of that family)
    members: dict[str, tuple[LibraryFamily, set[str], list[CheckResult]]] = {}
    for f in unresolved:
        path = f.subject.file or ""
        found = family_member(f.subject.library or "") if path in siblings else None
        if found is None:
            continue
        family, library, major = found
        own = set(family.releases_of(library, major))
        known = members.get(path)
        if known is None:
            members[path] = (family, own, [f])
        elif known[0].name == family.name:
            members[path] = (family, known[1] & own, [*known[2], f])
    by_family: dict[str, list[str]] = {}
    for path, (family, _releases, _fs) in sorted(members.items()):
        by_family.setdefault(family.name, []).append(path)
    noted: dict[int, CheckResult] = {}
    extra: list[CheckResult] = []
    for name, paths in sorted(by_family.items()):
        spans = {frozenset(members[p][1]) for p in paths}
        if len(paths) < 2 or len(spans) < 2:
            continue
        family = members[paths[0]][0]
        order = [release for release, _majors in family.releases]
        releases = sorted({r for p in paths for r in members[p][1]}, key=order.index)
        span = releases[0] if len(releases) == 1 else f"{releases[0]}..{releases[-1]}"
        groups = sorted({siblings[p][0] for p in paths})
        n = max(sum(1 for p in paths if siblings[p][0] == g) for g in groups)
        for p in paths:
            which = "/".join(sorted(members[p][1], key=order.index)) or "an unknown release"
            for f in members[p][2]:
                noted[id(f)] = replace(
                    f,
                    severity=Judgement(Met.VARIANT).severity or Severity.NOTE,
                    reason=f"{f.reason}; the {name} {which} variant, one of {n} for {name} {span}, as the "
                    "audit judges it",
                )
        extra.append(
            judged(
                FAMILY,
                "unresolved",
                Severity.WARNING,
                f"at least one of {n} variants ({', '.join(groups)}) needs {name} {span} from the system: "
                f"each imports another release's libraries and the package loads the one that loads; install "
                f"{name} ({family.packages})",
                file=paths[0],
                library=name,
            )
        )
    return [noted.get(id(f), f) for f in findings] + extra


def _other_environments(owners: _Owners, findings: list[CheckResult]) -> list[CheckResult]:
    """A CUDA variant (``libbitsandbytes_cuda118.so`` of ``_cuda*.so``; :mod:`cudaship.knowledge.variants`)
    whose imports are not found while a CUDA sibling's all are: the variant for another environment, judged
    as the audit judges it (the one judgement's :class:`Met` ``variant``: a note), never a warning or an
    error of this environment (issue 32, class 13). A group none of whose CUDA members loads keeps its
    findings."""
    unresolved = [f for f in findings if f.name == "unresolved" and f.subject.file]
    if not unresolved:
        return findings
    failing = {f.subject.file for f in unresolved}
    variants = recognise(owners.by_path)
    severity = Judgement(Met.VARIANT).severity or Severity.NOTE
    out: list[CheckResult] = []
    for f in findings:
        v = variants.get(f.subject.file or "") if f in unresolved else None
        served = (
            sorted(
                posixpath.basename(p)
                for p, w in variants.items()
                if w.group == v.group and w.is_cuda and p not in failing
            )
            if v is not None and v.is_cuda
            else []
        )
        if v is not None and served and f.severity is not severity:
            shown = ", ".join(served[:3]) + (" and more" if len(served) > 3 else "")
            f = replace(
                f,
                severity=severity,
                reason=f"{f.reason}; the {v.label} variant, for another environment ({shown} load here), as "
                "the audit judges it",
            )
        out.append(f)
    return out


def _unresolved(owners: _Owners, edge: Edge) -> CheckResult:
    who = owners.described(edge.importer)
    shown = [owners.show_dir(d) for d in edge.searched[:MAX_DIRS]]
    more = len(edge.searched) - MAX_DIRS
    where = (", ".join(shown) + (f" and {more} more" if more > 0 else "")) or "nowhere"
    message = f"{who} imports {edge.name}: not found (searched: {where})"
    severity = Severity.ERROR
    demand = _on_demand(owners, edge.importer)
    if edge.runtime_lookup is not None:
        message += (
            f"; {owners.label(edge.importer)} loads CUDA libraries itself through {edge.runtime_lookup}, "
            "and no installed distribution has this one"
        )
    owner = owners.by_path.get(edge.importer)
    extra = (
        extra_providing(
            owner.dist.requires_dist, edge.name, "windows" if edge.name.lower().endswith(".dll") else "linux"
        )
        if owner is not None
        else None
    )
    if demand is not None:
        severity = Severity.NOTE
        message += f"; this library is loaded only by {demand}"
    elif extra is not None and owner is not None:
        # the one judgement (records/judgement.py), as the audit judges the same import: met by an extra
        severity = Judgement(Met.EXTRA).severity or Severity.NOTE
        message += (
            f"; an optional component: {owner.dist.name}[{extra}] installs it "
            f"(pip install '{owner.dist.name}[{extra}]'), as the audit judges it (an extra)"
        )
    elif edge.kind is ImportKind.DELAY:
        severity = Severity.WARNING
        message += "; a delay-load import: fails on the first call into it, not at load"
    elif not edge.reachable and (host := owners.loaded_by_name(edge.importer)) is not None:
        # the one judgement, as the audit judges the same import: an optional library's need (a note)
        severity = Judgement(Met.MISSING, optional=True).severity or Severity.NOTE
        message += (
            f"; an optional library: {owners.show(host)} loads it by name (dlopen) at run time, for a "
            "feature, as the audit judges it"
        )
    elif not edge.reachable:
        severity = Severity.WARNING
        message += "; nothing imported loads this library by itself: it fails when loaded by name at run time"
    return judged(
        FAMILY,
        "unresolved",
        severity,
        message,
        file=edge.importer,
        distribution=owners.label(edge.importer),
        library=edge.name,
    )


def _only_on_path(owners: _Owners, edge: Edge) -> CheckResult:
    """Windows: found only in a PATH directory, which the safe DLL search of Python 3.8+ does not read."""
    message = (
        f"{owners.described(edge.importer)} imports {edge.name}: found only on PATH ({edge.target}); "
        "Python 3.8+ loads extension modules with the safe DLL search, which does not read PATH: the import "
        "fails unless a package adds that directory with os.add_dll_directory"
    )
    severity = Severity.WARNING if edge.kind is ImportKind.DELAY or not edge.reachable else Severity.ERROR
    return _about(owners, edge, "unresolved", severity, message)


class _Scopes:
    """What each file defines and needs, computed once per file (a big library is the importer of dozens of
    edges, and glibc's libc.so.6 the target of hundreds)."""

    def __init__(self, graph: LoadGraph) -> None:
        self.graph = graph
        self._exported: dict[str, frozenset[tuple[str, str]]] = {}
        self._wanted: dict[str, dict[str, list[tuple[str, str]]]] = {}
        self._deps: dict[str, list[str]] = {}
        for edge in graph.edges:
            if edge.target is not None:
                self._deps.setdefault(edge.importer, []).append(edge.target)

    def exported(self, path: str) -> frozenset[tuple[str, str]]:
        if path not in self._exported:
            host = self.graph.hosts.get(path)
            self._exported[path] = frozenset(host.versioned_exports) if host is not None else frozenset()
        return self._exported[path]

    def in_scope(self, importer: str, symbol: tuple[str, str]) -> bool:
        """glibc binds a versioned reference to the first object in the lookup scope that defines the symbol
        with that version, not only to the file the version is needed from (libdl.so.2 of glibc 2.34+
        defines GLIBC_2.2.5 while dlopen@GLIBC_2.2.5 lives in libc.so.6): the importer's dependencies."""
        return any(symbol in self.exported(dep) for dep in self._deps.get(importer, ()))

    def wanted(self, importer: str, library: str) -> list[tuple[str, str]]:
        """(symbol, version) ``importer`` takes from ``library`` and cannot do without (weak ones left
        out)."""
        if importer not in self._wanted:
            host = self.graph.hosts.get(importer)
            per: dict[str, list[tuple[str, str]]] = {}
            if host is not None:
                strong = {(s.name, s.version) for s in host.undefined_symbols if s.name and s.version}
                for imp in host.imports:
                    per[imp.library] = [
                        (s.name, s.version)
                        for s in imp.symbols
                        if s.name and s.version and (s.name, s.version) in strong
                    ]
            self._wanted[importer] = per
        return self._wanted[importer].get(library, [])


def _versions(owners: _Owners, edge: Edge, scopes: _Scopes) -> list[CheckResult]:
    target = scopes.graph.hosts.get(edge.target or "")
    if target is None or edge.target is None or edge.kind is not ImportKind.NEEDED:
        return []
    wanted = scopes.wanted(edge.importer, edge.name)
    if not wanted or not target.version_definitions:
        return []  # an unversioned file satisfies any versioned reference (glibc only notes it with LD_DEBUG)
    defined = set(target.version_definitions)
    exported = scopes.exported(edge.target)
    missing_versions = sorted({v for _, v in wanted if v not in defined})
    missing_symbols = sorted(
        (s, v)
        for s, v in wanted
        if v in defined and (s, v) not in exported and not scopes.in_scope(edge.importer, (s, v))
    )
    who = owners.described(edge.importer)
    picked = owners.described(edge.target or "")
    how = f" ({edge.how.value})" if edge.how else ""
    out = []
    for version in missing_versions:
        message = (
            f"version `{version}' not found: {who} needs it from {edge.name}; "
            f"the loader picks {picked}{how}, "
            f"which defines {_some(target.version_definitions)}"
        )
        out.append(_about(owners, edge, "missing-version", Severity.ERROR, message, version=version))
    if missing_symbols:
        first, version = missing_symbols[0]
        names = ", ".join(s for s, _ in missing_symbols[:MAX_SYMBOLS])
        more = f" and {len(missing_symbols) - MAX_SYMBOLS} more" if len(missing_symbols) > MAX_SYMBOLS else ""
        message = (
            f"undefined symbol: {first}, version {version}: {who} imports {names}{more} (version {version}) "
            f"from {edge.name}; the loader picks {picked}{how}, which does not define "
            + ("it" if len(missing_symbols) == 1 else "them")
        )
        out.append(
            _about(owners, edge, "missing-symbol", Severity.ERROR, message, symbol=first, version=version)
        )
    return out


def _about(
    owners: _Owners,
    edge: Edge,
    rule: str,
    severity: Severity,
    message: str,
    *,
    symbol: str | None = None,
    version: str | None = None,
) -> CheckResult:
    """A finding about one import: the importer and the file picked, each with its distribution."""
    return judged(
        FAMILY,
        rule,
        severity,
        message,
        file=edge.importer,
        distribution=owners.label(edge.importer),
        library=edge.name,
        target=edge.target,
        target_distribution=owners.label(edge.target),
        symbol=symbol,
        version=version,
    )


def _some(names: Iterable[str], limit: int = 4) -> str:
    items = list(names)
    shown = ", ".join(items[-limit:])
    return (f"… {shown}" if len(items) > limit else shown) or "no version"


def _how(owners: _Owners, edge: Edge, graph: LoadGraph) -> str:
    """The rule that gave the target; for a loaded object, what loaded it first and how."""
    how = edge.how.value if edge.how else "the search order"
    if edge.how is not How.LOADED or edge.target is None:
        return how
    first = graph.first_load(edge.target)
    if first is None:
        return how
    if first.preloaded_by is not None:
        return f"{how} (preloaded by path by `import {first.preloaded_by}`)"
    if first.loaded_by is not None and first.how is not None:
        return f"{how} (by {owners.show(first.loaded_by)}, through {first.how.value})"
    return f"{how} (by its path)"


def _shadowed(owners: _Owners, edge: Edge, graph: LoadGraph) -> CheckResult:
    """The importer's own copy is not the file loaded: shadowed, or (same bytes) two copies of one file."""
    assert edge.packaged is not None and edge.target is not None
    how = _how(owners, edge, graph)
    importer, packaged, target = (owners.described(p) for p in (edge.importer, edge.packaged, edge.target))
    if edge.packaged_identical:
        message = (
            f"{importer} imports {edge.name}: {how} gives {target}, identical to its package's copy "
            f"{packaged} (same size and sha256): "
            "two copies of one file exist; whichever loads, the same code runs"
        )
        return _about(owners, edge, "identical-copies", Severity.NOTE, message)
    message = (
        f"{importer} imports {edge.name}: its package's copy {packaged} is not the one loaded; "
        f"{how} gives {target}"
    )
    return _about(owners, edge, "shadowed", Severity.WARNING, message)


def _duplicates(owners: _Owners, graph: LoadGraph) -> list[CheckResult]:
    by_key: dict[str, list[str]] = {}
    for obj in graph.loaded:
        if obj.reachable:
            by_key.setdefault(obj.key, []).append(obj.path)
    out = []
    for key, paths in sorted(by_key.items()):
        if len(paths) < 2:
            continue
        first, *others = paths
        for other in others:
            a, b = graph.hosts.get(first), graph.hosts.get(other)
            differ = ""
            if graph.same_content(first, other):
                differ = " (identical files: same size and sha256)"
            elif a is not None and b is not None and set(a.versioned_exports) != set(b.versioned_exports):
                differ = (
                    f" of different versions ({len(a.versioned_exports)} and {len(b.versioned_exports)} "
                    "versioned exports)"
                )
            out.append(
                judged(
                    FAMILY,
                    "duplicate",
                    Severity.WARNING,
                    f"two copies of {key}{differ} are loaded in one process: "
                    f"{owners.described(first)} and {owners.described(other)}; each library binds to "
                    "whichever its search finds first, and each copy keeps its own state",
                    file=other,
                    distribution=owners.label(other),
                    library=key,
                    target=first,
                    target_distribution=owners.label(first),
                )
            )
    return out


def _components(env: Environment) -> list[CheckResult]:
    installed: dict[str, str] = {}
    for d in env.distributions:
        installed.setdefault(d.dist.name, d.dist.version)
    out = []
    for v in violations(installed):
        r = v.rule
        out.append(
            judged(
                FAMILY,
                "component-version",
                Severity.ERROR,
                f"{r.component} {v.component_version} (CUDA {v.component_cuda}) needs {r.needs} of CUDA "
                f"{v.component_cuda} or newer (>= {v.minimum}); installed: {r.needs} {v.needs_version} "
                f"(CUDA {v.needs_cuda})",
                distribution=f"{r.component} {v.component_version}",
                target_distribution=f"{r.needs} {v.needs_version}",
                source=r.source,
            )
        )
    return out


def shown(env: Environment, path: str) -> str:
    """``path`` relative to its site-packages when it is one of the environment's files."""
    for site in env.sites:
        if path.startswith(site + "/"):
            return posixpath.relpath(path, site)
    return path


# --- the whole question ----------------------------------------------------------------------------------


@dataclass(frozen=True)
class LoaderSettings:
    """How the process was simulated, as the report states it."""

    os: str
    system_checked: bool  #: this machine's system libraries were searched and read
    ld_library_path: tuple[str, ...] = ()
    ld_cache: str | None = None  #: the cache read, None when none was
    cache_entries: int = 0
    dll_directories: tuple[str, ...] = ()
    dll_path: tuple[str, ...] = ()  #: Windows: PATH, read only to say what it would have given


@dataclass(frozen=True)
class GpuCheck:
    """The device-code part (today's ``doctor``): None gpus when the machine has none."""

    probe: ProbeResult | None
    checked: tuple[tuple[str, FileVerdicts], ...] = ()  #: (path, verdicts) of libraries with device code
    note: str | None = None


@dataclass(frozen=True)
class EnvReport:
    env: Environment
    graph: LoadGraph
    findings: tuple[CheckResult, ...]
    settings: LoaderSettings
    gpu: GpuCheck
    confirm: ConfirmReport | None = None  #: ``--confirm``: the simulation against the real loader

    @property
    def summary(self) -> Summary:
        """The findings counted per severity (each is a failure of its own rule)."""
        return Summary.of(self.findings)

    @property
    def errors(self) -> int:
        return self.summary.failed

    @property
    def unreadable(self) -> bool:
        return any(f.name == "unreadable" for f in self.findings)


def _machine(env: Environment) -> Machine:
    for lib in env.libraries:
        if lib.report.host is not None and lib.report.host.machine in DEFAULT_DIRS:
            return lib.report.host.machine
    return Machine.X86_64


def doctor_env(
    env_spec: Sequence[str],
    *,
    ld_library_path: str | None = None,
    ld_cache: str | None = LD_CACHE,
    system: bool | None = None,
    dll_path: str | None = None,
    probe: ProbeResult | None = None,
    no_gpu: str | None = None,
) -> EnvReport:
    """Read the environment ``env_spec`` (an interpreter or site-packages directories), simulate one
    process and return every finding. ``system`` None: this machine's libraries are searched when it runs
    Linux and the environment is a Linux one. ``probe``: the GPUs and driver to check device code against
    (None: skipped, ``no_gpu`` saying why)."""
    gpus = probe is not None and bool(probe.gpus)
    env = read_environment(env_spec, device=gpus)
    machine = _machine(env)
    loader: LinuxLoader | WindowsLoader
    if env.os == "windows":
        dirs = tuple(
            posixpath.join(d.site, rel)
            for d in env.distributions
            for c in conventions_for(d.dist.name)
            for rel in c.dll_directories
        )
        path_dirs = tuple(p.replace("\\", "/") for p in (dll_path or "").split(";") if p)
        loader = WindowsLoader(dll_directories=dirs, path=path_dirs)
        settings = LoaderSettings("windows", False, dll_directories=dirs, dll_path=path_dirs)
        in_env = env_files_exist(env, case_insensitive=True)
        outside: dict[str, bool] = {}

        def exists(candidate: str) -> bool:
            """The environment's files, and real files in the PATH directories given."""
            if in_env(candidate):
                return True
            if path_dirs and candidate not in outside:
                outside[candidate] = any(candidate.startswith(d.rstrip("/") + "/") for d in path_dirs) and (
                    os.path.isfile(candidate)
                )
            return outside.get(candidate, False)

        graph = simulate(env, loader, exists, lambda _p: None, system_checked=False, same_file=SameContent())
    else:
        local = sys.platform.startswith("linux") if system is None else system
        paths = tuple(p for p in (ld_library_path or "").split(":") if p)
        cache = ld_cache_names(ld_cache, machine) if local and ld_cache else {}
        loader = LinuxLoader(
            ld_library_path=paths,
            cache=cache,
            default_dirs=DEFAULT_DIRS.get(machine, DEFAULT_DIRS[Machine.X86_64]) if local else (),
            lib="lib64",
            platform=machine.value,
        )
        settings = LoaderSettings("linux", local, paths, ld_cache if local and ld_cache else None, len(cache))
        if local:
            files = SystemFiles(env)
            graph = simulate(
                env,
                loader,
                files.exists,
                files.host,
                system_checked=True,
                same_file=SameContent(),
                list_dir=files.list_dir,
            )
        else:
            graph = simulate(
                env,
                loader,
                env_files_exist(env),
                lambda _p: None,
                system_checked=False,
                same_file=SameContent(),
                list_dir=env_dir_names(env),
            )
    findings = check_environment(env, graph)
    gpu = _gpu_check(env, probe, no_gpu)
    findings += _gpu_findings(env, gpu)
    return EnvReport(env, graph, tuple(_sorted(findings)), settings, gpu)


def _sorted(findings: list[CheckResult]) -> list[CheckResult]:
    order = {Severity.ERROR: 0, Severity.WARNING: 1, Severity.NOTE: 2}
    return sorted(
        findings, key=lambda f: (order[f.severity], f.name, f.subject.file or "", f.subject.library or "")
    )


def with_confirmation(report: EnvReport, confirm: ConfirmReport) -> EnvReport:
    """``report`` with what the real loader showed: its disagreements and failed imports as findings."""
    owners = _Owners(report.env)
    extra = confirm_findings(confirm, owners.show, owners.label, report.graph.same_content)
    return replace(report, findings=tuple(_sorted([*report.findings, *extra])), confirm=confirm)


def _gpu_check(env: Environment, probe: ProbeResult | None, no_gpu: str | None) -> GpuCheck:
    if probe is None:
        return GpuCheck(None, note=f"device code not checked: {no_gpu or 'no GPU probe was asked for'}")
    if not probe.gpus:
        return GpuCheck(probe, note="no NVIDIA GPU on this machine: device code not checked")
    caps = sorted({g.capability for g in probe.gpus})
    checked = tuple(
        (lib.path, file_verdicts(lib.report, caps, probe.driver))
        for lib in env.libraries
        if lib.report.device_code
    )
    return GpuCheck(probe, checked)


def _gpu_findings(env: Environment, gpu: GpuCheck) -> list[CheckResult]:
    if gpu.probe is None:
        return []
    owners = _Owners(env)
    out = []
    for path, verdicts in gpu.checked:
        for cv in verdicts.verdicts:
            if cv.verdict.status is Status.FAIL:
                out.append(
                    judged(
                        FAMILY,
                        "device-code",
                        Severity.ERROR,
                        f"{owners.described(path)} will not run on the GPUs of compute capability "
                        f"{cv.capability.capability} here: {cv.verdict.reason}",
                        file=path,
                        distribution=owners.label(path),
                    )
                )
    return out
