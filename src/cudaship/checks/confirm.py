"""``doctor --env --confirm``: the simulation of :mod:`cudaship.analysis.envload` against what the real loader
mapped when each distribution's top-level modules were imported, each in a fresh child
(:func:`cudaship.oracle.observe.observe`).

Which children: one per top-level module of each distribution with native code and of each distribution
requiring one of those directly (``jax`` requiring ``jaxlib``), or of the distributions named, a module
being what RECORD installs at the top (``pkg/__init__.py``, ``mod.py``, an extension ``mod.cpython-*.so``);
namespace directories (``nvidia/``) run no code and are left out. A child first imports the packages whose
import preloads libraries (the ``[[preloads]]`` knowledge: torch), then its module, because the simulated
process does so.

Comparison, per importer and ``DT_NEEDED`` entry: every object mapped in a child that is one of the
environment's libraries, each of its ``DT_NEEDED`` names with the loaded object glibc reused for it (the
oracle's ``needed``), against the simulation's pick for that import. Paths are compared after resolving
links (the caller gives ``realpath``). An import the simulation did not read (a system library taken as
present) or that the oracle could not match is not compared, and counted as such.

Findings: ``loader-disagrees`` (warning) names both files (``loader-identical``, a note, when the two files
have the same content: the pick then depends only on import order); ``import-failed``: an error when the
loader refused (its message: ``cannot open shared object file``, ``undefined symbol``, ``version ... not
found``), a note otherwise (a Python error, a missing GPU), a warning for a crash or a timeout.
"""

from __future__ import annotations

import posixpath
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass

from packaging.requirements import InvalidRequirement, Requirement
from packaging.utils import canonicalize_name

from cudaship.analysis.envload import Edge, LoadGraph
from cudaship.inspection.environment import Environment, InstalledDistribution
from cudaship.knowledge.providers import conventions_for, preloads_for
from cudaship.oracle.records import Observation, Probe, ProbeResult, Step, StepKind
from cudaship.records.findings import CheckResult, Severity, judged
from cudaship.wheel.toplevel import top_level_modules as installed_top_level
from cudaship.words import agree, count

#: A top-level entry RECORD installs that is an importable module (``pkg/...``, ``mod.py``, ``mod.*.so``).
#: Text of the dynamic loader's own refusals (glibc dlerror, Windows LoadLibrary).
LOADER_MESSAGES = (
    "cannot open shared object file",
    "undefined symbol",
    "not found (required by",
    "version `",
    "wrong ELF class",
    "DLL load failed",
    "cannot enable executable stack",
)


@dataclass(frozen=True)
class ConfirmChild:
    """One child: the module imported, what it imported first, how it ended."""

    module: str
    distribution: str  #: ``torch 2.11.0+cu130``
    before: tuple[str, ...]
    ok: bool
    message: str | None
    timed_out: bool
    seconds: float | None
    mapped: int  #: objects mapped at the end
    compared: int  #: imports compared in this child
    disagreed: int


@dataclass(frozen=True)
class Disagreement:
    importer: str
    name: str
    static: str | None  #: the simulation's pick (None: not found)
    static_how: str | None
    loader: str  #: the real path mapped
    module: str  #: the child that saw it


@dataclass(frozen=True)
class ConfirmReport:
    python: str
    children: tuple[ConfirmChild, ...]
    agree: int  #: (importer, DT_NEEDED) pairs where every child saw the simulated file
    disagree: int
    not_compared: int  #: pairs seen whose static side is a library not read (system, driver) or unmatched
    disagreements: tuple[Disagreement, ...]
    #: every (importer, DT_NEEDED name, the loader mapped the simulated file in every child that loaded it)
    pairs: tuple[tuple[str, str, bool], ...]
    driver: str | None  #: the oracle's: present, stub, absent
    notes: tuple[str, ...]
    timeout: float
    #: the report's first line: the environment's code ran (set by the command that ran it; also notes[0])
    ran_code: str | None = None


def top_level_modules(owner: InstalledDistribution) -> list[str]:
    """The importable top-level modules a distribution installed (namespace directories left out: they run
    no code)."""
    return sorted(m for m in installed_top_level(list(owner.dist.files), None) if "." not in m)


def _has_native(env: Environment) -> set[str]:
    return {lib.owner.site + "\0" + lib.owner.dist.name for lib in env.libraries}


def _requires(owner: InstalledDistribution) -> set[str]:
    """Canonical names of what a distribution requires unconditionally of extras."""
    out: set[str] = set()
    for text in owner.dist.requires_dist:
        try:
            req = Requirement(text)
        except InvalidRequirement:
            continue
        if req.marker is not None and "extra" in str(req.marker):
            continue
        out.add(canonicalize_name(req.name))
    return out


def chosen(env: Environment, only: Sequence[str] = ()) -> list[InstalledDistribution]:
    """The distributions whose modules are imported: ``only`` (names), else every one with native code and
    every one requiring one of those directly (its import is what loads them: jax loads jaxlib's)."""
    if only:
        wanted = {canonicalize_name(n) for n in only}
        return [d for d in env.distributions if d.dist.name in wanted]
    native = _has_native(env)
    native_names = {d.dist.name for d in env.distributions if d.site + "\0" + d.dist.name in native}
    return [
        d for d in env.distributions if d.site + "\0" + d.dist.name in native or _requires(d) & native_names
    ]


def plan(env: Environment, only: Sequence[str] = ()) -> list[tuple[InstalledDistribution, Probe]]:
    """The children to run: (distribution, probe) in environment order."""
    picked = chosen(env, only)
    preloading = [
        d
        for d in env.distributions
        if any(c.preloads for c in conventions_for(d.dist.name)) and preloads_for(d.dist.name, d.dist.version)
    ]
    first: list[str] = []
    for d in preloading:
        mods = top_level_modules(d)
        own = d.dist.name.replace("-", "_")
        first += [own] if own in mods else mods
    out: list[tuple[InstalledDistribution, Probe]] = []
    seen: set[str] = set()
    for d in picked:
        for module in top_level_modules(d):
            if module in seen:
                continue
            seen.add(module)
            before = tuple(Step(StepKind.IMPORT, m) for m in first if m != module and d not in preloading)
            out.append((d, Probe(Step(StepKind.IMPORT, module), before)))
    return out


def _loader_refused(message: str | None) -> bool:
    return message is not None and any(m in message for m in LOADER_MESSAGES)


def compare(
    env: Environment,
    graph: LoadGraph,
    planned: Sequence[tuple[InstalledDistribution, Probe]],
    observation: Observation,
    realpath: Mapping[str, str],
    *,
    timeout: float,
) -> ConfirmReport:
    """Compare the simulation with what each child mapped. ``realpath``: each environment library and each
    simulated target with its links resolved (missing keys are taken as already real)."""

    def real(path: str) -> str:
        return realpath.get(path, path)

    env_by_real = {real(lib.path): lib.path for lib in env.libraries}
    edges: dict[tuple[str, str], Edge] = {(e.importer, e.name): e for e in graph.edges}
    verdicts: dict[tuple[str, str], bool] = {}
    unmatched: set[tuple[str, str]] = set()
    disagreements: list[Disagreement] = []
    children: list[ConfirmChild] = []
    by_probe = {id(p): d for d, p in planned}
    for result in observation.results:
        owner = by_probe.get(id(result.probe))
        compared = disagreed = 0
        for obj in result.objects:
            importer = env_by_real.get(obj.path)
            if importer is None:
                continue
            for needed in obj.needed:
                key = (importer, needed.name)
                edge = edges.get(key)
                if edge is None or needed.path is None or (edge.target is None and edge.provider is not None):
                    unmatched.add(key)
                    continue
                compared += 1
                same = edge.target is not None and real(edge.target) == needed.path
                if not same:
                    disagreed += 1
                    if verdicts.get(key, True):
                        disagreements.append(
                            Disagreement(
                                importer,
                                needed.name,
                                edge.target,
                                edge.how.value if edge.how else None,
                                needed.path,
                                result.probe.step.target,
                            )
                        )
                verdicts[key] = verdicts.get(key, True) and same
        children.append(_child(result, owner, compared, disagreed))
    agree = sum(1 for v in verdicts.values() if v)
    return ConfirmReport(
        python=observation.python,
        children=tuple(children),
        agree=agree,
        disagree=len(verdicts) - agree,
        not_compared=len(unmatched - set(verdicts)),
        disagreements=tuple(disagreements),
        pairs=tuple((i, n, v) for (i, n), v in sorted(verdicts.items())),
        driver=observation.driver,
        notes=observation.notes,
        timeout=timeout,
    )


def _child(
    result: ProbeResult, owner: InstalledDistribution | None, compared: int, disagreed: int
) -> ConfirmChild:
    return ConfirmChild(
        module=result.probe.step.target,
        distribution=owner.label if owner is not None else "?",
        before=tuple(s.target for s in result.probe.before),
        ok=result.ok,
        message=result.message,
        timed_out=result.timed_out,
        seconds=result.seconds,
        mapped=len(result.objects),
        compared=compared,
        disagreed=disagreed,
    )


#: The family (mechanism) of the findings :func:`findings` returns.
FAMILY = "confirm"


def findings(
    report: ConfirmReport,
    show: Callable[[str], str],
    label: Callable[[str], str | None],
    same: Callable[[str, str], bool] = lambda a, b: False,
) -> list[CheckResult]:
    """``show``: a path as the user reads it; ``label``: its distribution (None: a system file); ``same``: the
    two files have the same content (the simulation's identical copies)."""
    out: list[CheckResult] = []

    def described(path: str) -> str:
        owner = label(path)
        return f"{show(path)} ({owner or 'system'})"

    for d in report.disagreements:
        static = f"{described(d.static)} ({d.static_how})" if d.static else "not found"
        identical = d.static is not None and same(d.static, d.loader)
        out.append(
            judged(
                FAMILY,
                "loader-identical" if identical else "loader-disagrees",
                Severity.NOTE if identical else Severity.WARNING,
                f"{described(d.importer)} imports {d.name}: static: {static}; loader: {described(d.loader)} "
                f"(mapped after `import {d.module}`)"
                + (
                    "; the two files are identical (same size and sha256): which copy loads depends on the "
                    "import order, with no consequence"
                    if identical
                    else ""
                ),
                file=d.importer,
                distribution=label(d.importer),
                library=d.name,
                target=d.loader,
                target_distribution=label(d.loader),
            )
        )
    for c in report.children:
        if c.ok:
            continue
        after = f" (after import {', '.join(c.before)})" if c.before else ""
        if c.timed_out or (c.message or "").startswith("killed by"):
            severity, why = Severity.WARNING, ""
        elif _loader_refused(c.message):
            severity, why = Severity.ERROR, ": the loader refused it"
        else:
            severity, why = Severity.NOTE, ": not a loader failure"
        out.append(
            judged(
                FAMILY,
                "import-failed",
                severity,
                f"`import {c.module}`{after} of {c.distribution} failed{why}: {c.message}",
                distribution=c.distribution,
            )
        )
    return out


def child_label(c: ConfirmChild) -> str:
    state = "ok" if c.ok else ("timed out" if c.timed_out else "failed")
    secs = f", {c.seconds:.2f} s" if c.seconds is not None else ""
    return (
        f"import {c.module} ({c.distribution}): {state}{secs}, {c.mapped} objects mapped, "
        f"{count(c.compared, 'import')} compared, {c.disagreed} {agree(c.disagreed, 'disagrees', 'disagree')}"
    )


def shown_path(sites: Sequence[str], path: str) -> str:
    for site in sites:
        if path.startswith(site + "/"):
            return posixpath.relpath(path, site)
    return path
