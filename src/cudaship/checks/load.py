"""load: the static audit's verdicts against what the real loader did (``cudaship audit --load``).

The oracle (:mod:`cudaship.oracle`) installs the wheel, imports its top-level packages and dlopens each of its
native libraries in fresh children (after the imports, so the package's own preloading applies, and alone),
and records which loaded object satisfied each DT_NEEDED. This module reads those records and the audit's
per-import verdicts (``WheelAudit.imports``) and says, per library and per DT_NEEDED, whether they agree:

- a library or a top-level package that does not load for a user who installed as documented is an error
  (rule ``failure``), whatever the static audit said (it says whether it agreed);
- the loader loads what the static audit says does not resolve, or satisfies an entry with another file than
  the one the audit named (or with an installed file where the audit said a system library): a warning (rule
  ``disagreement``): the static model is wrong there;
- a library that loads only after the package is imported (its own preloading provides an entry): a note
  (rule ``preloaded``);
- a library a documented convention marks as loaded on demand (``knowledge/data/providers.toml``
  ``on_demand``) that does not load: a note naming the convention (rule ``on_demand``);
- pip could not install the wheel as documented: an error (rule ``install``): nothing could be loaded;
- a library that does not load because what it needs comes with an extra that was not installed (rule
  ``extra``) or from the package's own run-time lookup, which loading alone does not run (rule ``runtime``):
  notes, and the library is not counted either way.

It never runs anything: the family's engine entry returns nothing (the loader check runs only from the CLI).
"""

from __future__ import annotations

import dataclasses
import fnmatch
import os
import re
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field

from packaging.utils import canonicalize_name

from cudaship import words
from cudaship.checks.context import AuditContext
from cudaship.checks.records import LoadCheck, LoadComparison, LoadProbeLine, StaticImport
from cudaship.knowledge.libraries import is_driver
from cudaship.knowledge.providers import conventions_for
from cudaship.knowledge.variants import recognise
from cudaship.oracle.records import Observation, ProbeResult, StepKind
from cudaship.records.findings import CheckResult, Finding, failed, passed, skipped

FAMILY = "load"
FAILURE, DISAGREEMENT, PRELOADED, ON_DEMAND, INSTALL, VARIANT, EXTRA, RUNTIME = (
    "failure",
    "disagreement",
    "preloaded",
    "on_demand",
    "install",
    "variant",
    "extra",
    "runtime",
)
AUXILIARY, NO_DRIVER, NOT_PROBED = "auxiliary", "no_driver", "not_probed"
NO_DRIVER_TEXT = (
    "not judged: no NVIDIA driver and no libcuda stub (set CUDA_HOME to a toolkit with lib64/stubs, "
    "or --libcuda-stub PATH)"
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
    extras: tuple[str, ...] = ()  #: the wheel's extras installed with it (``--extra``)
    #: top-level modules imported on their own only (private, not a package, tests): a failure is a note
    auxiliary: tuple[str, ...] = ()
    calls: tuple[
        str, ...
    ] = ()  #: documented loader functions called after the imports (``libkvikio.load_library()``)
    not_probed: dict[str, str] = field(default_factory=dict)  #: wheel file -> why it was not loaded
    #: whether two installed files hold the same bytes (the oracle hashes them; this module reads no file)
    same_content: Callable[[str, str], bool] = lambda a, b: False


_CANNOT_OPEN = re.compile(r"([^\s:]+): cannot open shared object file")


def _deferred(
    entries: Sequence[StaticImport], message: str | None, extras: Sequence[str]
) -> tuple[str, str] | None:
    """When the entry the loader could not find is one the static audit says comes with an extra that was
    not installed, or from the package's own run-time lookup: (rule, why). Else None."""
    m = _CANNOT_OPEN.search(message or "")
    if m is None:
        return None
    missing = os.path.basename(m.group(1))
    for si in entries:
        if si.library != missing and os.path.basename(si.library) != missing:
            continue
        if not si.ok:
            return None
        if si.extra and si.extra not in extras:
            return EXTRA, (
                f"{missing} comes with the extra [{si.extra}] ({si.detail}), which was not installed "
                f"(--extra {si.extra} installs it)"
            )
        if si.via == "runtime":
            return RUNTIME, (
                f"{missing} is found at run time by the package ({si.detail}); loading alone does not run "
                "that lookup"
            )
    return None


def _missing(message: str | None) -> str | None:
    """The DT_NEEDED name the loader's message says it could not find, or None."""
    m = _CANNOT_OPEN.search(message or "")
    return os.path.basename(m.group(1)) if m else None


def _no_driver(obs: Observation, message: str | None) -> bool:
    """Whether ``message`` is the loader not finding the NVIDIA driver's library where there is neither a
    driver nor a stub: then nothing about the library is known here."""

    missing = _missing(message)
    return obs.driver == "absent" and obs.stub_libcuda is None and missing is not None and is_driver(missing)


def _static_failures(per_file: dict[str, list[StaticImport]]) -> dict[str, str]:
    """Per wheel library the static model says does not load, why: an import that does not resolve, or a
    shipped library it resolves to that does not load (followed through the wheel's own libraries)."""
    out: dict[str, str] = {}
    state: dict[str, bool] = {}  # lib -> done (False: being looked at; a cycle is not a failure)

    def visit(lib: str) -> str | None:
        if lib in state:
            return out.get(lib)
        state[lib] = False
        reason = None
        entries = per_file.get(lib, [])
        bad = [si for si in entries if not si.ok]
        if bad:
            reason = "; ".join(f"{si.library} {_static_phrase(si)}" for si in bad)
        else:
            for si in entries:
                if si.target and si.target != lib and si.target in per_file:
                    why = visit(si.target)
                    if why is not None:
                        reason = f"{si.library} is {si.target}, which does not load ({why})"
                        break
        state[lib] = True
        if reason is not None:
            out[lib] = reason
        return reason

    for lib in per_file:
        visit(lib)
    return out


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
    pkg = (
        ", ".join([*(f"import {m}" for m in inputs.top_level), *(f"call {c}" for c in inputs.calls)])
        or "no import"
    )
    no_driver: list[str] = []
    for module, imported in sorted(imports.items()):
        if not imported.ok:
            text = f"import {module} fails: {_clean(imported.message, sites)}"
            if _no_driver(obs, imported.message):
                no_driver.append(f"import {module}")
                rule, reason = NO_DRIVER, f"import {module}: {NO_DRIVER_TEXT}"
            elif module in inputs.auxiliary:
                rule, reason = (
                    AUXILIARY,
                    (
                        f"import {module} fails; {module} is not part of the wheel's API (a private "
                        "module, a top-level module that is not a package, or a test/sample package): "
                        + _clean(imported.message, sites)
                    ),
                )
            else:
                rule, reason = FAILURE, text
            results.append(
                failed(FAMILY, f"load: import {module}", reason, [Finding(text, symbol=module)], rule=rule)
            )
    if inputs.not_probed:
        results.append(
            failed(
                FAMILY,
                "load: files not probed",
                f"{words.count(len(inputs.not_probed), 'native file')} not loaded: "
                + "; ".join(sorted({why for why in inputs.not_probed.values()})),
                [Finding(f"{lib}: {why}", file=lib) for lib, why in sorted(inputs.not_probed.items())],
                rule=NOT_PROBED,
            )
        )
    static_failures = _static_failures(per_file)
    agreeing: list[str] = []
    not_judged: list[str] = []
    other_environment = _variant_excuses(inputs, after if inputs.top_level else alone)
    for lib in sorted(per_file):
        entries = per_file[lib]
        real = inputs.installed.get(lib)
        r = after.get(lib) if inputs.top_level else alone.get(lib)
        if real is None or r is None:
            continue  # not installed where the wheel says (another .data scheme): nothing was asked
        bare = alone.get(lib)
        static_fail = static_failures.get(lib)
        convention = inputs.on_demand(lib)
        lib_agrees = True
        if not r.ok:
            message = f"{lib} does not load (dlopen after {pkg}): {_clean(r.message, sites)}"
            if _no_driver(obs, r.message):
                not_judged.append(lib)
                no_driver.append(lib)
                for si in entries:
                    comparisons.append(
                        LoadComparison(
                            lib, si.library, _static_phrase(si), "not judged: no NVIDIA driver", None
                        )
                    )
                results.append(
                    failed(
                        FAMILY,
                        f"load: {lib}",
                        f"{lib}: {NO_DRIVER_TEXT}",
                        [Finding(message, file=lib)],
                        rule=NO_DRIVER,
                    )
                )
                continue
            # the library is judged as a whole: it fails, and the static model says so (itself or through a
            # shipped library it needs); of its entries only the one the loader's message names is known
            lib_agrees = static_fail is not None
            side = f"static: agrees ({static_fail})" if static_fail else "static: every import resolves"
            missing = _missing(r.message)
            for si in entries:
                if missing is not None and (si.library == missing or os.path.basename(si.library) == missing):
                    comparisons.append(
                        LoadComparison(
                            lib,
                            si.library,
                            _static_phrase(si),
                            f"not found: {_clean(r.message, sites)}",
                            not si.ok,
                        )
                    )
                else:
                    named = f" (the loader names {missing})" if missing else ""
                    comparisons.append(
                        LoadComparison(
                            lib,
                            si.library,
                            _static_phrase(si),
                            f"not known: the library did not load{named}",
                            None,
                        )
                    )
            excuse = other_environment(lib)
            deferred = _deferred(entries, r.message, inputs.extras) if excuse is None else None
            if deferred is not None:
                rule, why = deferred
                not_judged.append(lib)
                summary = f"{lib} does not load by itself: {why}"
            elif excuse is not None:
                rule, summary = VARIANT, f"{lib} does not load here: {excuse}"
            elif convention is not None:
                what, source = convention
                not_judged.append(lib)
                rule = ON_DEMAND
                summary = f"{lib} does not load; a convention says it is loaded only by {what} ({source})"
            else:
                rule, summary = FAILURE, message
            results.append(
                failed(FAMILY, f"load: {lib}", summary, [Finding(f"{message}; {side}", file=lib)], rule=rule)
            )
            if lib_agrees and deferred is None:
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
                if not agree and expected is not None and inputs.same_content(expected, path):
                    # another installed copy with the same bytes (an auditwheel-hashed copy in another wheel's
                    # .libs): glibc reused the one loaded first by its SONAME
                    agree = True
                    soname = next((o.soname for o in r.objects if o.path == path), None)
                    loader += (
                        f" (an identical copy of {si.target}: same "
                        + (f"SONAME {soname}, " if soname else "")
                        + "size and sha256)"
                    )
            elif si.via == "system" and where != path:
                # the static audit says the operating system provides it; the loader used an installed file
                agree = False
            comparisons.append(LoadComparison(lib, si.library, _static_phrase(si), loader, agree))
            if not agree:
                findings.append(
                    Finding(
                        f"{si.library}: static: {_static_phrase(si)}; loader: {loader}",
                        file=lib,
                        symbol=si.library,
                    )
                )
        if static_fail is not None and not findings:
            # the static audit says it cannot load, the loader loaded it (an entry it could not match)
            findings.append(Finding(f"static: {static_fail}; loader: {lib} loaded", file=lib))
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
        [
            lib
            for lib in per_file
            if lib in inputs.installed and (after.get(lib) or alone.get(lib)) and lib not in not_judged
        ]
    )
    # a library not counted (on demand, an extra or a run-time lookup, no driver here): its entries
    # are not compared either
    skipped_libs = set(not_judged)
    comparisons = [
        dataclasses.replace(c, agree=None) if c.file in skipped_libs and c.agree is not None else c
        for c in comparisons
    ]
    judged = [c for c in comparisons if c.agree is not None]
    if agreeing:
        results.append(
            passed(
                FAMILY,
                "load: libraries that load as the static audit says",
                f"{len(agreeing)} of {words.count(libraries, 'library')} "
                f"{words.agree(len(agreeing), 'loads', 'load')}; each DT_NEEDED agrees with the static audit",
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
        notes=(
            *inputs.notes,
            *obs.notes,
            *(
                [
                    f"{words.count(len(set(not_judged) - set(no_driver)), 'library')} not counted: loaded "
                    "on demand by a documented convention, or what they need comes with an extra not "
                    "installed or from the package's run-time lookup, which loading alone does not exercise"
                ]
                if len(set(not_judged) - set(no_driver))
                else []
            ),
            *([f"{len(no_driver)} {NO_DRIVER_TEXT} ({', '.join(no_driver)})"] if no_driver else []),
            *([f"called after the imports: {', '.join(inputs.calls)}"] if inputs.calls else []),
            *(
                [
                    f"{words.count(len(inputs.not_probed), 'native file')} not probed (executables, "
                    "other Pythons' modules)"
                ]
                if inputs.not_probed
                else []
            ),
        ),
    )
    return check, results


def _variant_excuses(inputs: LoadInputs, outcome: dict[str, ProbeResult]) -> Callable[[str], str | None]:
    """For a variant library (``libbitsandbytes_cuda118.so`` of ``_cuda*.so``; see
    :mod:`cudaship.knowledge.variants`) that does not load: why that is another environment's variant, when a
    sibling loads here (a CUDA variant only when a CUDA sibling loads, as :mod:`cudaship.checks.variants`
    judges the static verdicts); else None."""

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
