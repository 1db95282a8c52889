"""load: the static audit's verdicts against what the real loader did (``cudaship audit --load``).

The oracle (:mod:`cudaship.oracle`) installs the wheel, imports its top-level packages and dlopens each of its
native libraries in fresh children (after the imports, so the package's own preloading applies, and alone),
and records which loaded object satisfied each DT_NEEDED. This module reads those records and the audit's
per-import verdicts (``WheelAudit.imports``) and says, per library and per DT_NEEDED, whether they agree:

- a library or a top-level package that does not load for a user who installed as documented is an error
  (rule ``failure``), whatever the static audit said (it says whether it agreed);
- the loader loads what the static audit says does not resolve, or satisfies an entry with another file than
  the one the audit named: a warning (rule ``disagreement``): the static model is wrong there;
- a library that loads only after the package is imported (its own preloading provides an entry): a note
  (rule ``preloaded``);
- a library a documented convention marks as loaded on demand (``knowledge/data/providers.toml``
  ``on_demand``) that does not load: a note naming the convention (rule ``on_demand``);
- pip could not install the wheel as documented: an error (rule ``install``): nothing could be loaded.

It never runs anything: the family's engine entry returns nothing (the loader check runs only from the CLI).
"""

from __future__ import annotations

import fnmatch
import os
from collections.abc import Callable, Sequence
from dataclasses import dataclass

from cudaship.checks.context import AuditContext
from cudaship.checks.records import (
    CheckResult,
    Finding,
    LoadCheck,
    LoadComparison,
    LoadProbeLine,
    StaticImport,
    failed,
    passed,
    skipped,
)
from cudaship.oracle.records import Observation, ProbeResult, StepKind

FAMILY = "load"
FAILURE, DISAGREEMENT, PRELOADED, ON_DEMAND, INSTALL, VARIANT = (
    "failure",
    "disagreement",
    "preloaded",
    "on_demand",
    "install",
    "variant",
)


def run(ctx: AuditContext) -> list[CheckResult]:
    """The engine's entry: nothing (the loader check needs processes; ``audit --load`` runs it)."""
    return []


@dataclass(frozen=True)
class LoadInputs:
    """What the comparison reads besides the observation: where each library of the wheel was installed."""

    installed: dict[str, str]  #: wheel library (site-relative path) -> the installed file's real path
    sites: tuple[str, ...]  #: directories site-relative paths are relative to, first searched first
    top_level: tuple[str, ...]  #: modules imported before each library
    #: the convention that says a library is loaded on demand: (what loads it, the convention's source)
    on_demand: Callable[[str], tuple[str, str] | None] = lambda path: None
    environment: str | None = None
    notes: tuple[str, ...] = ()


def skipped_check(reason: str) -> tuple[LoadCheck, list[CheckResult]]:
    return LoadCheck(skipped=reason), [
        skipped(FAMILY, "load: loader check", f"loader check skipped: {reason}")
    ]


def install_failed(message: str, environment: str | None) -> tuple[LoadCheck, list[CheckResult]]:
    result = failed(
        FAMILY,
        "load: install",
        f"not installable as documented: {message}",
        [Finding(message)],
        rule=INSTALL,
    )
    return LoadCheck(environment=environment, notes=(message,)), [result]


def _abs(target: str, sites: Sequence[str]) -> str | None:
    for site in sites:
        candidate = os.path.join(site, target)
        if os.path.exists(candidate):
            return os.path.realpath(candidate)
    return None


def _short(path: str, sites: Sequence[str]) -> str:
    """``path`` relative to the site it is under (``nvidia/cu13/lib/libcublas.so.13``), else itself."""
    for site in sites:
        real = os.path.realpath(site)
        if path.startswith(real + os.sep):
            return path[len(real) + 1 :]
    return path


def _clean(text: str | None, sites: Sequence[str]) -> str:
    """``text`` with each site directory's prefix taken out of the paths it names."""
    out = text or ""
    for site in sites:
        for prefix in {site, os.path.realpath(site)}:
            out = out.replace(prefix.rstrip(os.sep) + os.sep, "")
    return out


def _static_phrase(si: StaticImport) -> str:
    if si.ok:
        return f"resolves ({si.via}): {si.detail}" if si.detail else f"resolves ({si.via})"
    return f"does not resolve ({si.detail})" if si.detail else "does not resolve"


def _by_kind(
    obs: Observation, inputs: LoadInputs
) -> tuple[dict[str, ProbeResult], dict[str, ProbeResult], dict[str, ProbeResult]]:
    imports: dict[str, ProbeResult] = {}
    after: dict[str, ProbeResult] = {}
    alone: dict[str, ProbeResult] = {}
    by_path = {real: lib for lib, real in inputs.installed.items()}
    for r in obs.results:
        step = r.probe.step
        if step.kind is StepKind.IMPORT:
            imports[step.target] = r
            continue
        lib = by_path.get(os.path.realpath(step.target))
        if lib is None:
            continue
        (after if r.probe.before else alone)[lib] = r
    return imports, after, alone


def compare(
    static: Sequence[StaticImport], obs: Observation, inputs: LoadInputs
) -> tuple[LoadCheck, list[CheckResult]]:
    """The per-library and per-import agreement, and the ``load`` family's results (severity not yet set)."""
    sites = inputs.sites
    imports, after, alone = _by_kind(obs, inputs)
    per_file: dict[str, list[StaticImport]] = {}
    for si in static:
        per_file.setdefault(si.file, []).append(si)
    for lib in inputs.installed:
        per_file.setdefault(lib, [])
    results: list[CheckResult] = []
    comparisons: list[LoadComparison] = []
    agree_libs = 0
    pkg = ", ".join(f"import {m}" for m in inputs.top_level) or "no import"
    for module, imported in sorted(imports.items()):
        if not imported.ok:
            results.append(
                failed(
                    FAMILY,
                    f"load: import {module}",
                    f"import {module} fails: {_clean(imported.message, sites)}",
                    [Finding(f"import {module} fails: {_clean(imported.message, sites)}", symbol=module)],
                    rule=FAILURE,
                )
            )
    agreeing: list[str] = []
    other_environment = _variant_excuses(inputs, after if inputs.top_level else alone)
    for lib in sorted(per_file):
        entries = per_file[lib]
        real = inputs.installed.get(lib)
        r = after.get(lib) if inputs.top_level else alone.get(lib)
        if real is None or r is None:
            continue  # not installed where the wheel says (another .data scheme): nothing was asked
        bare = alone.get(lib)
        static_ok = all(si.ok for si in entries)
        convention = inputs.on_demand(lib)
        lib_agrees = True
        if not r.ok:
            lib_agrees = not static_ok
            side = (
                "static: agrees ("
                + "; ".join(f"{si.library} {_static_phrase(si)}" for si in entries if not si.ok)
                + ")"
                if not static_ok
                else "static: every import resolves"
            )
            for si in entries:
                comparisons.append(
                    LoadComparison(lib, si.library, _static_phrase(si), "the library did not load", None)
                )
            message = f"{lib} does not load (dlopen after {pkg}): {_clean(r.message, sites)}"
            excuse = other_environment(lib)
            if excuse is not None:
                results.append(
                    failed(
                        FAMILY,
                        f"load: {lib}",
                        f"{lib} does not load here: {excuse}",
                        [Finding(f"{message}; {side}", file=lib)],
                        rule=VARIANT,
                    )
                )
            elif convention is not None:
                what, source = convention
                results.append(
                    failed(
                        FAMILY,
                        f"load: {lib}",
                        f"{lib} does not load; a convention says it is loaded only by {what} ({source})",
                        [Finding(f"{message}; {side}", file=lib)],
                        rule=ON_DEMAND,
                    )
                )
            else:
                results.append(
                    failed(
                        FAMILY,
                        f"load: {lib}",
                        message,
                        [Finding(f"{message}; {side}", file=lib)],
                        rule=FAILURE,
                    )
                )
            if lib_agrees:
                agree_libs += 1
            continue
        obj = r.object(real)
        observed = {n.name: n.path for n in obj.needed} if obj is not None else {}
        loaded_before = set(r.result.loaded_before) if r.result is not None else set()
        findings: list[Finding] = []
        for si in entries:
            path = observed.get(si.library)
            if path is None:
                comparisons.append(
                    LoadComparison(lib, si.library, _static_phrase(si), "no loaded object matched", None)
                )
                continue
            where = _short(path, sites)
            early = (
                " (already loaded when the library was opened, after " + pkg + ")"
                if path in loaded_before
                else ""
            )
            loader = f"loaded {where}{early}"
            agree = True
            if not si.ok:
                agree = False
            elif si.target is not None:
                expected = _abs(si.target, sites)
                agree = expected is None or expected == path
            comparisons.append(LoadComparison(lib, si.library, _static_phrase(si), loader, agree))
            if not agree:
                findings.append(
                    Finding(
                        f"{si.library}: static: {_static_phrase(si)}; loader: {loader}",
                        file=lib,
                        symbol=si.library,
                    )
                )
        if not static_ok and not findings:
            # the static audit says it cannot load, the loader loaded it (an entry it could not match)
            bad = ", ".join(si.library for si in entries if not si.ok)
            findings.append(Finding(f"static: {bad} does not resolve; loader: {lib} loaded", file=lib))
        if findings:
            lib_agrees = False
            results.append(
                failed(
                    FAMILY,
                    f"load: {lib} (static and loader disagree)",
                    findings[0].message + (f" (and {len(findings) - 1} more)" if len(findings) > 1 else ""),
                    findings,
                    rule=DISAGREEMENT,
                )
            )
        if bare is not None and not bare.ok and inputs.top_level:
            results.append(
                failed(
                    FAMILY,
                    f"load: {lib} needs the package's own loading",
                    f"{lib} loads only after {pkg}: alone, {_clean(bare.message, sites)}",
                    [Finding(f"alone: {_clean(bare.message, sites)}", file=lib)],
                    rule=PRELOADED,
                )
            )
        if lib_agrees:
            agree_libs += 1
            agreeing.append(lib)
    libraries = len(
        [lib for lib in per_file if lib in inputs.installed and (after.get(lib) or alone.get(lib))]
    )
    judged = [c for c in comparisons if c.agree is not None]
    if agreeing:
        results.append(
            passed(
                FAMILY,
                "load: libraries that load as the static audit says",
                f"{len(agreeing)} of {libraries} libraries load; each DT_NEEDED agrees with the static audit",
                tuple(Finding("loads; static and loader agree", file=lib) for lib in agreeing),
            )
        )
    if not libraries and not imports:
        results.append(
            skipped(FAMILY, "load: loader check", "the wheel has no native library and no package")
        )
    check = LoadCheck(
        environment=inputs.environment,
        stub_libcuda=obs.stub_libcuda,
        libraries=libraries,
        libraries_agree=agree_libs,
        imports=len(judged),
        imports_agree=sum(1 for c in judged if c.agree),
        probes=tuple(
            LoadProbeLine(_clean(r.probe.label, sites), r.ok, _clean(r.message, sites) or None)
            for r in obs.results
        ),
        comparisons=tuple(comparisons),
        notes=(*inputs.notes, *obs.notes),
    )
    return check, results


def _variant_excuses(inputs: LoadInputs, outcome: dict[str, ProbeResult]) -> Callable[[str], str | None]:
    """For a variant library (``libbitsandbytes_cuda118.so`` of ``_cuda*.so``; see
    :mod:`cudaship.knowledge.variants`) that does not load: why that is another environment's variant, when a
    sibling loads here (a CUDA variant only when a CUDA sibling loads, as :mod:`cudaship.checks.variants`
    judges the static verdicts); else None."""
    from cudaship.knowledge.variants import recognise

    variants = recognise(sorted(inputs.installed))
    loads = {lib for lib, r in outcome.items() if r.ok}

    def excuse(lib: str) -> str | None:
        variant = variants.get(lib)
        if variant is None:
            return None
        served = [
            p
            for p, v in variants.items()
            if v.group == variant.group and p in loads and (v.is_cuda or not variant.is_cuda)
        ]
        if not served:
            return None
        names = sorted(os.path.basename(p) for p in served)
        shown = ", ".join(names[:3]) + (" and more" if len(names) > 3 else "")
        verb = "loads" if len(names) == 1 else "load"
        return (
            f"the {variant.label} variant, one of the alternatives {variant.group}, for another environment "
            f"({shown} {verb})"
        )

    return excuse


def on_demand_lookup(
    project: str | None, requirements: Sequence[str]
) -> Callable[[str], tuple[str, str] | None]:
    """The on-demand conventions of ``project`` (knowledge/data/providers.toml), by library path."""
    from packaging.utils import canonicalize_name

    from cudaship.knowledge.providers import conventions_for

    if not project:
        return lambda path: None
    rows = conventions_for(canonicalize_name(project), tuple(canonicalize_name(r) for r in requirements))

    def lookup(path: str) -> tuple[str, str] | None:
        for row in rows:
            for pattern, what in row.on_demand:
                if fnmatch.fnmatchcase(path, pattern):
                    return (
                        what,
                        f"the {row.project} convention in knowledge/data/providers.toml: {row.source}",
                    )
        return None

    return lookup
