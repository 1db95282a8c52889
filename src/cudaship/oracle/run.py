"""``audit --load`` for one wheel: install it (:mod:`~cudaship.oracle.install`), load it in fresh children
(:func:`~cudaship.oracle.observe.observe`), compare with the static verdicts (:mod:`cudaship.checks.load`).

Probes, per wheel: ``import M`` for each top-level module M (``top_level.txt``, else the packages and modules
RECORD installs at the top level; a namespace directory stands for its packages one level down); for each
native library of the wheel, ``dlopen`` after importing the wheel's packages and calling their documented
loader functions (the package's own preloading applies) and ``dlopen`` alone (a library that fails only alone
needs that preloading).

Not probed, each with a note: executables (an ELF executable or PIE is not a library: glibc refuses to dlopen
it), and extension modules built for another Python than the environment's (``.cpython-310-...so`` on 3.11).
It runs the wheel's code (its imports, its libraries' constructors, any ``.pth`` file it installs), inside
one :class:`~cudaship.containment.Containment` per wheel: pip and every child get the allow-listed
environment, a fresh ``$HOME``/``TMPDIR``/cwd under the run's directory, the memory limit (``--load-memory``)
and the run's deadline (``--load-deadline``); every process is gone when :func:`load_audit` returns.
The check's first note says so (:data:`RAN_CODE`).

Auxiliary top-level modules (:func:`auxiliary`) are imported, each alone, but not before the libraries, and
their failure is a note.
"""

from __future__ import annotations

import dataclasses
import glob
import mmap
import os
import platform
import posixpath
import re
import subprocess
import sys
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass

from packaging.requirements import InvalidRequirement, Requirement
from packaging.utils import canonicalize_name

from cudaship.binary.elf import read_elf
from cudaship.binary.magic import binary_format
from cudaship.checks import load as load_family
from cudaship.checks.engine import with_severity
from cudaship.checks.policy import Policy
from cudaship.checks.records import LoadCheck, WheelAudit
from cudaship.containment import DEFAULT_MEMORY, Containment, DeadlinePassed
from cudaship.errors import CudashipError, OracleError
from cudaship.inspection.environment import SameContent
from cudaship.knowledge.hosts import hosts as known_hosts
from cudaship.knowledge.local_toolkits import toolkit_patterns
from cudaship.knowledge.platforms import machine_of, os_of
from cudaship.knowledge.providers import conventions_for
from cudaship.oracle.install import InstallOptions, LoadEnvironment, prepare
from cudaship.oracle.observe import DEFAULT_TIMEOUT, child_environment, observe
from cudaship.oracle.records import Probe, ProbeResult, Step, StepKind
from cudaship.records.binary import FileFormat
from cudaship.records.findings import CheckResult
from cudaship.safe_read import open_regular
from cudaship.wheel.archive import WheelArchive
from cudaship.wheel.metadata import install_path, parse_metadata
from cudaship.wheel.toplevel import top_level_modules
from cudaship.words import size

#: Seconds the whole ``audit --load`` of one wheel may take (``--load-deadline``): pip and every child.
DEFAULT_DEADLINE = 3600.0

_OS_NAMES = {"linux": "Linux", "windows": "Windows", "macos": "macOS"}


@dataclass(frozen=True)
class LoadOptions:
    install: InstallOptions = dataclasses.field(default_factory=InstallOptions)
    timeout: float = DEFAULT_TIMEOUT
    jobs: int | None = None
    libcuda_stub: str | None = (
        None  #: the stub libcuda.so to use where there is no driver (``--libcuda-stub``)
    )
    memory: int | None = (
        DEFAULT_MEMORY  #: ``--load-memory``: each child's private writable memory; None: none
    )
    deadline: float | None = DEFAULT_DEADLINE  #: ``--load-deadline``: seconds for the whole run of one wheel


#: The first note of every loader check that ran anything: what --load did, said plainly.
RAN_CODE = (
    "--load installed this wheel with pip and RAN its code (imports, library constructors) in child "
    "processes: allow-listed environment (no tokens or keys), fresh HOME and TMPDIR, memory limit {memory}, "
    "deadline {deadline}; every process it starts is ended before it returns (docs/reliability.md: what this "
    "does not protect against)"
)


Progress = Callable[[int, int, str], None]


def running_os() -> str:
    return os_of(sys.platform)


def _machine() -> str:
    return machine_of(platform.machine())


def platform_skip(audit: WheelAudit) -> str | None:
    """Why this wheel cannot be loaded on this machine (another OS or CPU), or None."""
    facts = audit.facts
    here = running_os()
    tag = facts.tags[0].rsplit("-", 1)[-1] if facts.tags else facts.platform or "?"
    if facts.platform not in (None, "any") and facts.platform != here:
        return f"a {tag} wheel cannot be loaded on {_OS_NAMES.get(here, here)}"
    if facts.machine and facts.machine != _machine():
        return f"a {tag} wheel cannot be loaded on this {_machine()} machine"
    return None


#: top-level packages that hold a project's tests, samples, examples or benchmarks, not its API
#: (``top_level.txt`` lists them when a wheel installs them)
_AUXILIARY_PACKAGES = frozenset(
    {
        "test",
        "tests",
        "testing",
        "sample",
        "samples",
        "example",
        "examples",
        "benchmark",
        "benchmarks",
        "docs",
    }
)


def auxiliary(module: str, packages: frozenset[str]) -> bool:
    """Whether top-level ``module`` is auxiliary: private (``_foo``), a plain module rather than a package
    (``rec2idx``: a converter script installed at the top level), or a test/sample package. Decision
    (docs/load.md): a wheel's API is its public packages; these are imported too, each alone, and a failure is
    a note naming the module, not an error. When a wheel has no public package, its modules are its API."""
    top = module.split(".", 1)[0]
    return top.startswith("_") or top not in packages or top in _AUXILIARY_PACKAGES


def main_modules(tops: tuple[str, ...], packages: frozenset[str], project: str | None) -> tuple[str, ...]:
    """The top-level modules that are the wheel's API (their failure is the package failing): the public
    packages (:func:`auxiliary`); and when one of them is named after the project (``cupy`` of
    cupy-cuda12x, ``bitsandbytes``), only those and the packages named after them (``cupyx``): a stray
    helper package installed beside it (``build_tools``, ``benchmarks``) is imported alone and its failure
    is a note (issue 32, class 9)."""
    main = tuple(m for m in tops if not auxiliary(m, packages)) or tops
    own = canonicalize_name(project or "").replace("-", "_")

    def named(module: str) -> bool:
        top = module.split(".", 1)[0].lower()
        return bool(own) and (own == top or own.startswith(top + "_") or top.startswith(own))

    stems = [m.split(".", 1)[0].lower() for m in main if named(m)]
    if not stems:
        return main
    # the project's packages and those named after them (cupy's cupyx, torch's torchgen)
    return tuple(m for m in main if any(m.split(".", 1)[0].lower().startswith(s) for s in stems))


def _elf_kind(path: str) -> str | None:
    """``executable``, ``shared-library`` ... of the ELF file at ``path`` (cudaship's reader), or None."""
    try:
        with open_regular(path) as f, mmap.mmap(f.fileno(), 0, access=mmap.ACCESS_READ) as buf:
            return read_elf(buf, full=False).kind
    except (CudashipError, OSError, ValueError):
        return None


_PY_EXTENSION = re.compile(r"\.((?:cpython-|cp|pypy)[0-9][^./]*)\.(so|pyd)$")


def _other_python(path: str, suffixes: tuple[str, ...]) -> str | None:
    """For an extension module whose name carries a Python tag (``.cpython-310-x86_64-linux-gnu.so``) that the
    environment's interpreter does not import (``importlib.machinery.EXTENSION_SUFFIXES``): why it is not
    loaded. Stable-ABI (``.abi3.so``) and untagged modules are loadable; None for them."""
    m = _PY_EXTENSION.search(posixpath.basename(path))
    if m is None or not suffixes or m.group(0) in suffixes:
        return None
    tag = m.group(1)
    version = re.match(r"(?:cpython-|cp)(3)(\d+)(t?)", tag)
    if version:
        built = f"CPython {version.group(1)}.{version.group(2)}" + (
            " (free-threaded)" if version.group(3) else ""
        )
    else:
        built = tag
    return f"built for {built}: not loadable by this interpreter"


def _extension_suffixes(python: str, run: Containment) -> tuple[str, ...]:
    """The interpreter's ``importlib.machinery.EXTENSION_SUFFIXES`` (empty when it cannot be asked)."""
    code = "import importlib.machinery as m; print('\\n'.join(m.EXTENSION_SUFFIXES))"
    try:
        done = run.run_text([python, "-c", code], timeout=60, env=run.environment())
    except (OSError, subprocess.TimeoutExpired, DeadlinePassed):
        return ()
    return tuple(ln.strip() for ln in done.stdout.splitlines() if ln.strip()) if done.returncode == 0 else ()


def _loader_calls(
    modules: tuple[str, ...], project: str | None, requires: tuple[str, ...], init_text: Callable[[str], str]
) -> tuple[str, ...]:
    """``module:function`` for each documented loader function (knowledge/data/providers.toml
    ``loader_functions``) that a package of the wheel defines or imports in its ``__init__.py``."""
    if not project:
        return ()
    names: list[str] = []
    for row in conventions_for(canonicalize_name(project), tuple(canonicalize_name(r) for r in requires)):
        names.extend(row.loader_functions)
    out = []
    for module in modules:
        text = init_text(module)
        for name in dict.fromkeys(names):
            if re.search(rf"\b(def|import)\s+{re.escape(name)}\b|\bimport\b.*\b{re.escape(name)}\b", text):
                out.append(f"{module}:{name}")
    return tuple(out)


def _loadable(path: str) -> bool:
    """Whether ``path`` is a library of this OS's format (ELF, PE, Mach-O) that the loader can open."""

    wanted = {"linux": FileFormat.ELF, "windows": FileFormat.PE, "macos": FileFormat.MACHO}.get(running_os())
    try:
        with open(path, "rb") as f:
            return wanted is not None and binary_format(f.read(64)) is wanted
    except OSError:
        return False


def _native(path: str) -> bool:
    base = posixpath.basename(path).lower()
    return base.endswith((".so", ".dll", ".pyd", ".dylib")) or ".so." in base


def _init_texts(wheel: str, modules: tuple[str, ...]) -> dict[str, str]:
    """The text of each module's ``__init__.py`` in the wheel (empty when it has none)."""

    out: dict[str, str] = {}
    with WheelArchive(wheel) as archive:
        for module in modules:
            out[module] = archive.text_member(module.replace(".", "/") + "/__init__.py") or ""
    return out


def _wheel_files(wheel: str) -> tuple[list[str], str | None, str | None, tuple[str, ...]]:
    """Installed paths of the wheel's members, its top_level.txt, its name and Requires-Dist."""

    with WheelArchive(wheel) as archive:
        dist_info = archive.dist_info()
        names = [m.name for m in archive.members()]
        top = archive.text_member(f"{dist_info}/top_level.txt") if dist_info else None
        meta_text = archive.text_member(f"{dist_info}/METADATA") if dist_info else None
    installed: list[str] = []
    for name in names:
        where = install_path(name, dist_info) if dist_info else name
        if where:
            installed.append(where)
    project: str | None = None
    requires: tuple[str, ...] = ()
    if meta_text:
        meta = parse_metadata(meta_text.encode("utf-8"))
        project, requires = meta.name, meta.requires_dist
    return installed, top, project, tuple(requires)


def _where(relative: str, sites: tuple[str, ...]) -> str | None:
    for site in sites:
        candidate = os.path.join(site, relative)
        if os.path.isfile(candidate):
            return os.path.realpath(candidate)
    return None


def local_toolkit_lookup(environ: Mapping[str, str], sites: Sequence[str]) -> Callable[[str], str | None]:
    """A loaded file's real path -> the local toolkit it belongs to (knowledge/data/local_toolkits.toml: its
    directories, and those ``CUDA_HOME``/``CUDA_PATH`` name in ``environ``, each glob expanded here and its
    links resolved), or None; never for a file under the environment's ``sites``."""
    roots: list[tuple[str, str]] = []
    for pattern, name in toolkit_patterns(environ):
        hits = sorted(glob.glob(pattern)) if glob.has_magic(pattern) else [pattern]
        for hit in hits:
            if os.path.isdir(hit):
                for path in dict.fromkeys((os.path.normpath(hit), os.path.realpath(hit))):
                    roots.append((path.rstrip(os.sep) + os.sep, name))
    own = tuple(os.path.realpath(s).rstrip(os.sep) + os.sep for s in sites)

    def lookup(path: str) -> str | None:
        if not roots or path.startswith(own):
            return None
        return next((f"{name}: {root.rstrip(os.sep)}" for root, name in roots if path.startswith(root)), None)

    return lookup


def load_audit(
    audit: WheelAudit, policy: Policy, options: LoadOptions, progress: Progress | None = None
) -> WheelAudit:
    """``audit`` with the loader's results: ``load`` set and the ``load`` family's checks added."""
    skip = platform_skip(audit)
    if skip is None and audit.path.lower().endswith((".pt2", ".pte")):
        skip = "an exported program is not installed with pip; --load loads wheels"
    if skip is not None:
        check, results = load_family.skipped_check(skip)
        return _with(audit, policy, check, results)
    installed, top_txt, project, requires = _wheel_files(audit.path)
    if progress is not None:
        progress(0, 0, f"installing {audit.facts.filename}")
    with Containment(memory=options.memory, deadline=options.deadline, keep=options.install.keep) as run:
        return _load_contained(audit, policy, options, progress, run, (installed, top_txt, project, requires))


def ran_code(options: LoadOptions) -> str:
    """:data:`RAN_CODE` with the limits of this run."""
    memory = size(options.memory) if options.memory else "none"
    deadline = f"{options.deadline:g} s" if options.deadline else "none"
    return RAN_CODE.format(memory=memory, deadline=deadline)


def _load_contained(
    audit: WheelAudit,
    policy: Policy,
    options: LoadOptions,
    progress: Progress | None,
    run: Containment,
    files: tuple[list[str], str | None, str | None, tuple[str, ...]],
) -> WheelAudit:
    installed, top_txt, project, requires = files
    hosts = tuple(getattr(audit, "host_packages", ()) or ())
    honest = ran_code(options)
    env: LoadEnvironment | None = None
    try:

        def pip_says(step: str) -> None:  # pip's step on the progress line (torch: minutes)
            if progress is not None:
                progress(0, 0, f"installing {audit.facts.filename}: pip: {step}")

        on_step = pip_says if progress is not None else None
        prepared = prepare(audit.path, audit.facts.tags, hosts, options.install, run, on_step=on_step)
    except OracleError as e:  # no venv could be made here: nothing was loaded, which the report says
        prepared = str(e)
    if isinstance(prepared, str):
        check, results = load_family.skipped_check(prepared)
        return _with(audit, policy, check, results)
    env = prepared
    environment = "; ".join(env.notes)
    if env.failure is not None:
        check, results = load_family.install_failed(env.failure, environment)
        check = dataclasses.replace(check, notes=(honest, *check.notes))
        return _with(audit, policy, check, results)
    libs: dict[str, str] = {}
    not_probed: dict[str, str] = {}
    suffixes = _extension_suffixes(env.python, run) if running_os() == "linux" else ()
    candidates = sorted({si.file for si in audit.imports} | {p for p in installed if _native(p)})
    for rel in candidates:
        real = _where(rel, env.sites)
        if real is None or not _loadable(real):
            continue
        if running_os() == "linux" and _elf_kind(real) == "executable":
            not_probed[rel] = "an executable, not a library (glibc does not dlopen executables): not probed"
            continue
        other = _other_python(rel, suffixes)
        if other is not None:
            not_probed[rel] = other
            continue
        libs[rel] = real
    libs, copies = once_per_library(libs, audit.copies)
    tops = top_level_modules(installed, top_txt)
    package_names = frozenset(p.split("/", 1)[0] for p in installed if "/" in p)
    main = main_modules(tops, package_names, project)
    aux = tuple(m for m in tops if m not in main)
    texts = _init_texts(audit.path, main)
    calls = _loader_calls(main, project, requires, lambda m: texts.get(m, ""))
    first = host_modules(hosts)
    probes = plan_probes(tops, main, libs, calls, first)
    children_env = child_environment()
    if env.pythonpath:
        children_env["PYTHONPATH"] = env.pythonpath
    done = [0]

    def tick(result: ProbeResult) -> None:
        done[0] += 1
        if progress is not None:
            progress(done[0], len(probes), result.probe.label)

    def running(what: str) -> None:  # imports (import torch: a minute) say they run
        if progress is not None and what.startswith("import "):
            progress(done[0], len(probes), f"running {what}")

    obs = observe(
        env.python,
        probes,
        env=children_env,
        timeout=options.timeout,
        jobs=options.jobs,
        on_result=tick,
        stub_path=options.libcuda_stub,
        run=run,
        on_start=running,
    )
    inputs = load_family.LoadInputs(
        installed=libs,
        sites=env.sites,
        top_level=(*first, *main),
        auxiliary=aux,
        calls=tuple(c.replace(":", ".") + "()" for c in calls),
        not_probed=not_probed,
        copies=copies,
        same_content=SameContent(),
        on_demand=load_family.on_demand_lookup(project, _requirement_names(requires)),
        environment=environment,
        notes=(honest, *env.notes[1:]),
        extras=options.install.extras,
        local_toolkit=local_toolkit_lookup(children_env, env.sites),
    )
    check, results = load_family.compare(audit.imports, obs, inputs)
    if env.directory and options.install.keep:
        check = dataclasses.replace(check, notes=(*check.notes, f"environment kept at {env.directory}"))
    return _with(audit, policy, check, results)


def once_per_library(
    libs: dict[str, str], groups: tuple[tuple[str, ...], ...]
) -> tuple[dict[str, str], dict[str, str]]:
    """The libraries to load, one copy per library, and each copy left out -> the copy loaded in its place.
    A wheel cannot hold symlinks, so ``libfoo.so``, ``libfoo.so.0`` and ``libfoo.so.0.1.2`` are shipped as
    copies of one library (the static audit's groups, ``WheelAudit.copies``, the copy its dependents need
    first). A process maps that library once, by that name; dlopening each copy by its own path would map a
    second instance beside the first (two constructors, two registrations: protobuf and LLVM abort), which
    no user's process does (issue 32, class 9). Pure: paths in, paths out."""
    keep = dict(libs)
    copies: dict[str, str] = {}
    for group in groups:
        present = [p for p in group if p in keep]
        for other in present[1:]:
            del keep[other]
            copies[other] = present[0]
    return keep, copies


def host_modules(projects: tuple[str, ...]) -> tuple[str, ...]:
    """The modules users import first for the undeclared host packages ``projects`` (canonical names; the
    hosts table, knowledge/data/hosts.toml): ``torch`` for torch."""
    by_project: dict[str, str] = {canonicalize_name(h.project): h.module for h in known_hosts()}
    wanted = [canonicalize_name(p) for p in projects]
    return tuple(dict.fromkeys(by_project[p] for p in wanted if p in by_project))


def plan_probes(
    tops: tuple[str, ...],
    main: tuple[str, ...],
    libs: dict[str, str],
    calls: tuple[str, ...],
    hosts: tuple[str, ...] = (),
) -> list[Probe]:
    """The children to run: ``import M`` for each top-level module, each after importing the undeclared host
    packages' modules first (``import torch`` before a torch extension: its users do; issue 32, class 9);
    per library, ``dlopen`` after those and the package's own imports and loader calls, and ``dlopen`` alone.
    Pure: names in, probes out."""
    first = tuple(Step(StepKind.IMPORT, h) for h in hosts)
    probes: list[Probe] = [Probe.import_(m, before=first) for m in tops]
    for rel in sorted(libs):
        probes.append(Probe.dlopen(libs[rel], after_imports=(*hosts, *main), calls=calls))
        if main or hosts:
            probes.append(Probe.dlopen(libs[rel]))
    return probes


def _requirement_names(requires: tuple[str, ...]) -> tuple[str, ...]:
    out = []
    for text in requires:
        try:
            out.append(Requirement(text).name)
        except InvalidRequirement:
            continue
    return tuple(out)


def _with(audit: WheelAudit, policy: Policy, check: LoadCheck, results: list[CheckResult]) -> WheelAudit:
    judged = tuple(with_severity(r, policy) for r in results)
    # a static error the loader disproves is not an error (issue 32, class 9)
    own = load_family.overruled(audit.checks, check, audit.copies)
    return dataclasses.replace(audit, checks=(*own, *judged), load=check)


__all__ = ["LoadOptions", "load_audit", "platform_skip", "top_level_modules"]
