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
- a library that loads here only because the loader found a dependency in a local CUDA toolkit, outside
  the environment (``/usr/local/cuda-13.0/lib`` through ld.so.conf; knowledge/data/local_toolkits.toml): it
  does not load on a user's machine without one, an error (rule ``toolkit``), judged as a library that does
  not load (it agrees when the static model says so);
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
from cudaship.records.findings import CheckResult, Finding, Severity, Status, failed, passed, skipped

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
AUXILIARY, NO_DRIVER, NOT_PROBED, COPY = "auxiliary", "no_driver", "not_probed", "copy"
TOOLKIT = "toolkit"
#: the words every row and result of a library that loads only through a local toolkit carries (and
#: :func:`overruled` reads: such a library did not load for a user, so it disproves no static error)
TOOLKIT_ONLY = "only through a local toolkit"
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
    #: a copy of a library shipped under several names, not loaded -> the copy loaded in its place
    copies: dict[str, str] = field(default_factory=dict)
    #: whether two installed files hold the same bytes (the oracle hashes them; this module reads no file)
    same_content: Callable[[str, str], bool] = lambda a, b: False
    #: a loaded file's real path -> the local toolkit it belongs to (a directory of
    #: knowledge/data/local_toolkits.toml, outside the environment; the oracle resolves them), or None
    local_toolkit: Callable[[str], str | None] = lambda path: None


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
    """Whether ``message`` is the loader not finding one of the NVIDIA driver's libraries where there is no
    driver: then nothing about the library is known here. The toolkit stub stands in for ``libcuda.so.1``
    only: with it, a library that needs NVML (``libnvidia-ml.so.1``) still fails for want of the driver, not
    of anything the wheel could ship (issue 32, class 9)."""
    missing = _missing(message)
    if missing is None or not is_driver(missing):
        return False
    if obs.driver == "absent" and obs.stub_libcuda is None:
        return True
    return obs.driver == "stub" and not missing.startswith("libcuda.so")


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


@dataclass(frozen=True)
class _Comparing:
    """What judging each import probe and each library reads, besides the probe's own result."""

    obs: Observation
    inputs: LoadInputs
    pkg: str  #: what ran before each library: ``import pkg, call pkg:load``, or ``no import``
    static_failures: dict[str, str]  #: wheel library -> why the static model says it does not load
    #: why a variant library that does not load is another environment's (see :func:`_variant_excuses`)
    other_environment: Callable[[str], str | None]

    @property
    def sites(self) -> tuple[str, ...]:
        return self.inputs.sites


@dataclass(frozen=True)
class _LibraryVerdict:
    """What comparing one library gave: its results and per-import rows, and how it counts."""

    lib: str
    results: tuple[CheckResult, ...]
    comparisons: tuple[LoadComparison, ...]
    agrees: bool  #: counted in ``libraries_agree``
    loads_and_agrees: bool = False  #: loaded, and every DT_NEEDED agrees (the ``passed`` result lists it)
    not_judged: bool = False  #: not counted: no driver, on demand, an extra or a run-time lookup
    no_driver: bool = False  #: not judged because there is no NVIDIA driver and no stub here


def _before_label(inputs: LoadInputs) -> str:
    """What runs before each library is opened: ``import pkg, call pkg:load``, or ``no import``."""
    return (
        ", ".join([*(f"import {m}" for m in inputs.top_level), *(f"call {c}" for c in inputs.calls)])
        or "no import"
    )


def _failed_import(module: str, imported: ProbeResult, ctx: _Comparing) -> tuple[CheckResult, bool]:
    """The result for a top-level package that does not import, and whether that is for want of a driver: a
    failure, unless no driver is here (not judged) or the module is not part of the wheel's API (a note)."""
    text = f"import {module} fails: {_clean(imported.message, ctx.sites)}"
    no_driver = _no_driver(ctx.obs, imported.message)
    if no_driver:
        rule, reason = NO_DRIVER, f"import {module}: {NO_DRIVER_TEXT}"
    elif module in ctx.inputs.auxiliary:
        rule, reason = (
            AUXILIARY,
            (
                f"import {module} fails; {module} is not part of the wheel's API (a private "
                "module, a top-level module that is not a package, or a test/sample package): "
                + _clean(imported.message, ctx.sites)
            ),
        )
    else:
        rule, reason = FAILURE, text
    result = failed(FAMILY, f"load: import {module}", reason, [Finding(text, symbol=module)], rule=rule)
    return result, no_driver


def _failed_imports(imports: dict[str, ProbeResult], ctx: _Comparing) -> tuple[list[CheckResult], list[str]]:
    """The results for the top-level packages that do not import, and those of them (``import pkg``) not
    judged for want of a driver."""
    results: list[CheckResult] = []
    driverless: list[str] = []
    for module, imported in sorted(imports.items()):
        if imported.ok:
            continue
        result, no_driver = _failed_import(module, imported, ctx)
        results.append(result)
        if no_driver:
            driverless.append(f"import {module}")
    return results, driverless


def _not_probed(not_probed: dict[str, str]) -> list[CheckResult]:
    """The note listing the native files that were not loaded (executables, other Pythons' modules)."""
    if not not_probed:
        return []
    return [
        failed(
            FAMILY,
            "load: files not probed",
            f"{words.count(len(not_probed), 'native file')} not loaded: "
            + "; ".join(sorted({why for why in not_probed.values()})),
            [Finding(f"{lib}: {why}", file=lib) for lib, why in sorted(not_probed.items())],
            rule=NOT_PROBED,
        )
    ]


def _copies(copies: dict[str, str], verdicts: Sequence[_LibraryVerdict]) -> list[CheckResult]:
    """The note naming the copies of libraries shipped under several names (byte copies standing in for
    symlinks): each was loaded once, as the copy its dependents need; the others are copies, never failures
    and not counted (issue 32, class 9)."""
    if not copies:
        return []
    outcome = {
        v.lib: ("does not load" if any(r.rule in (FAILURE, TOOLKIT) for r in v.results) else "loads")
        for v in verdicts
    }
    by_loaded: dict[str, list[str]] = {}
    for copy, loaded in sorted(copies.items()):
        by_loaded.setdefault(loaded, []).append(copy)
    parts = [
        f"{' and '.join(others)} {'is a copy' if len(others) == 1 else 'are copies'} of {loaded} "
        f"(loaded once, as {loaded}: it {outcome.get(loaded, 'was not judged')})"
        for loaded, others in sorted(by_loaded.items())
    ]
    return [
        failed(
            FAMILY,
            "load: copies of one library",
            f"{words.count(len(copies), 'file')} {'is a copy' if len(copies) == 1 else 'are copies'} of "
            "libraries shipped under several names (the same bytes or SONAME: a wheel cannot hold symlinks), "
            "loaded once by the name their dependents need, as a process does; not loaded by their own "
            "paths, which would map a second instance of the library: " + "; ".join(parts),
            [
                Finding(f"a copy of {loaded} (the same bytes or SONAME): loaded once, as {loaded}", file=copy)
                for copy, loaded in sorted(copies.items())
            ],
            rule=COPY,
        )
    ]


def _judge_library(
    lib: str,
    entries: Sequence[StaticImport],
    after: dict[str, ProbeResult],
    alone: dict[str, ProbeResult],
    ctx: _Comparing,
) -> _LibraryVerdict | None:
    """One library of the wheel against its probe: None when it was not installed where the wheel says
    (another .data scheme) or not probed (nothing was asked)."""
    real = ctx.inputs.installed.get(lib)
    r = after.get(lib) if ctx.inputs.top_level else alone.get(lib)
    if real is None or r is None:
        return None
    if r.ok:
        through = _through_toolkit(real, r, ctx)
        if through:
            return _library_needing_toolkit(lib, entries, r, real, through, ctx)
        return _loaded_library(lib, entries, r, real, alone.get(lib), ctx)
    message = f"{lib} does not load (dlopen after {ctx.pkg}): {_clean(r.message, ctx.sites)}"
    if _no_driver(ctx.obs, r.message):
        return _no_driver_library(lib, entries, message)
    return _library_not_loading(lib, entries, r, message, ctx)


def _through_toolkit(real: str, r: ProbeResult, ctx: _Comparing) -> dict[str, tuple[str, str]]:
    """The objects of a loaded library's dependency closure (its DT_NEEDED, as the loader satisfied them, and
    theirs) that the loader found in a local toolkit, outside the environment: real path -> (the DT_NEEDED
    name, the toolkit). The driver's libraries, and the toolkit's libcuda stub standing in for the driver,
    are not the toolkit's here."""
    objects = {o.path: o for o in r.objects}
    stub = os.path.realpath(ctx.obs.stub_libcuda) if ctx.obs.stub_libcuda else None
    found: dict[str, tuple[str, str]] = {}
    seen = {real}
    todo = [real]
    while todo:
        obj = objects.get(todo.pop())
        if obj is None:
            continue
        for n in obj.needed:
            if n.path is None or n.path in seen:
                continue
            seen.add(n.path)
            todo.append(n.path)
            dependency = objects.get(n.path)
            soname = dependency.soname if dependency is not None else None
            if n.path == stub or is_driver(n.name) or (soname is not None and is_driver(soname)):
                continue
            toolkit = ctx.inputs.local_toolkit(n.path)
            if toolkit is not None:
                found.setdefault(n.path, (n.name, toolkit))
    return found


def _library_needing_toolkit(
    lib: str,
    entries: Sequence[StaticImport],
    r: ProbeResult,
    real: str,
    through: dict[str, tuple[str, str]],
    ctx: _Comparing,
) -> _LibraryVerdict:
    """A library that loaded here only because the loader found a dependency in a local toolkit (ld.so.conf,
    LD_LIBRARY_PATH or an absolute RUNPATH pointing there): on a user's machine without one it does not load,
    so it is judged as a library that does not load. It agrees when the static model says it does not load;
    an entry the toolkit satisfied agrees when the static model says it does not resolve."""
    obj = r.object(real)
    observed = {n.name: n.path for n in obj.needed} if obj is not None else {}
    loaded_before = set(r.result.loaded_before) if r.result is not None else set()
    rows: list[LoadComparison] = []
    for si in entries:
        path = observed.get(si.library)
        if path is None:
            rows.append(LoadComparison(lib, si.library, _static_phrase(si), "no loaded object matched", None))
        elif path in through:
            loader = f"found {TOOLKIT_ONLY}: {path} ({through[path][1]}); on a machine without one, not found"
            rows.append(LoadComparison(lib, si.library, _static_phrase(si), loader, not si.ok))
        else:
            loader, agree = _loaded_entry(si, path, r, loaded_before, ctx)
            loader += f" (the library loads {TOOLKIT_ONLY})"
            rows.append(LoadComparison(lib, si.library, _static_phrase(si), loader, agree))
    parts = [f"{name} from {path} ({toolkit})" for path, (name, toolkit) in sorted(through.items())]
    message = (
        f"{lib} does not load without a local toolkit: it loads here {TOOLKIT_ONLY}, outside the "
        f"environment ({'; '.join(parts)}); a user's machine without one fails"
    )
    static_fail = ctx.static_failures.get(lib)
    side = f"static: agrees ({static_fail})" if static_fail else "static: every import resolves"
    result = failed(FAMILY, f"load: {lib}", message, [Finding(f"{message}; {side}", file=lib)], rule=TOOLKIT)
    return _LibraryVerdict(lib, (result,), tuple(rows), agrees=static_fail is not None)


def _no_driver_library(lib: str, entries: Sequence[StaticImport], message: str) -> _LibraryVerdict:
    """A library that does not load for want of the NVIDIA driver here: not judged, nor are its entries."""
    comparisons = tuple(
        LoadComparison(lib, si.library, _static_phrase(si), "not judged: no NVIDIA driver", None)
        for si in entries
    )
    result = failed(
        FAMILY, f"load: {lib}", f"{lib}: {NO_DRIVER_TEXT}", [Finding(message, file=lib)], rule=NO_DRIVER
    )
    return _LibraryVerdict(lib, (result,), comparisons, agrees=False, not_judged=True, no_driver=True)


def _unloaded_entries(
    lib: str, entries: Sequence[StaticImport], loader_message: str | None, sites: Sequence[str]
) -> tuple[LoadComparison, ...]:
    """The rows of a library that did not load: of its entries only the one the loader's message names is
    known (not found); the others are not known."""
    missing = _missing(loader_message)
    rows: list[LoadComparison] = []
    for si in entries:
        if missing is not None and (si.library == missing or os.path.basename(si.library) == missing):
            loader, agree = f"not found: {_clean(loader_message, sites)}", not si.ok
        else:
            named = f" (the loader names {missing})" if missing else ""
            loader, agree = f"not known: the library did not load{named}", None
        rows.append(LoadComparison(lib, si.library, _static_phrase(si), loader, agree))
    return tuple(rows)


def _why_not_loading(
    lib: str, entries: Sequence[StaticImport], r: ProbeResult, message: str, ctx: _Comparing
) -> tuple[str, str, bool, bool]:
    """(rule, summary, deferred, not judged) for a library that does not load: another environment's variant,
    an entry deferred to an extra or the package's run-time lookup, a documented on-demand convention, or a
    failure."""
    excuse = ctx.other_environment(lib)
    deferred = _deferred(entries, r.message, ctx.inputs.extras) if excuse is None else None
    if deferred is not None:
        rule, why = deferred
        return rule, f"{lib} does not load by itself: {why}", True, True
    if excuse is not None:
        return VARIANT, f"{lib} does not load here: {excuse}", False, False
    convention = ctx.inputs.on_demand(lib)
    if convention is not None:
        what, source = convention
        summary = f"{lib} does not load; a convention says it is loaded only by {what} ({source})"
        return ON_DEMAND, summary, False, True
    return FAILURE, message, False, False


def _library_not_loading(
    lib: str, entries: Sequence[StaticImport], r: ProbeResult, message: str, ctx: _Comparing
) -> _LibraryVerdict:
    """A library that does not load (with the package's preloading done). It is judged as a whole: it agrees
    when the static model says it fails too (itself or through a shipped library it needs)."""
    static_fail = ctx.static_failures.get(lib)
    side = f"static: agrees ({static_fail})" if static_fail else "static: every import resolves"
    rule, summary, deferred, not_judged = _why_not_loading(lib, entries, r, message, ctx)
    result = failed(FAMILY, f"load: {lib}", summary, [Finding(f"{message}; {side}", file=lib)], rule=rule)
    return _LibraryVerdict(
        lib,
        (result,),
        _unloaded_entries(lib, entries, r.message, ctx.sites),
        agrees=static_fail is not None and not deferred,
        not_judged=not_judged,
    )


def _loaded_entry(
    si: StaticImport, path: str, r: ProbeResult, loaded_before: set[str], ctx: _Comparing
) -> tuple[str, bool]:
    """(the loader's phrase, whether it agrees with the static verdict) for an entry of a library that loaded,
    which the loader satisfied with ``path``."""
    where = _short(path, ctx.sites)
    early = (
        " (already loaded when the library was opened, after " + ctx.pkg + ")"
        if path in loaded_before
        else ""
    )
    loader = f"loaded {where}{early}"
    if not si.ok:
        return loader, False
    if si.target is not None:
        expected = _abs(si.target, ctx.sites)
        if expected is None or expected == path:
            return loader, True
        if ctx.inputs.same_content(expected, path):
            # another installed copy with the same bytes (an auditwheel-hashed copy in another wheel's
            # .libs): glibc reused the one loaded first by its SONAME
            soname = next((o.soname for o in r.objects if o.path == path), None)
            same = f"SONAME {soname}, " if soname else ""
            return f"{loader} (an identical copy of {si.target}: same {same}size and sha256)", True
        return loader, False
    # the static audit says the operating system provides it, and the loader used an installed file
    return loader, not (si.via == "system" and where != path)


def _loaded_entries(
    lib: str, entries: Sequence[StaticImport], r: ProbeResult, real: str, ctx: _Comparing
) -> tuple[tuple[LoadComparison, ...], list[Finding]]:
    """The rows of a library that loaded, one per entry, and a finding for each entry that disagrees."""
    obj = r.object(real)
    observed = {n.name: n.path for n in obj.needed} if obj is not None else {}
    loaded_before = set(r.result.loaded_before) if r.result is not None else set()
    rows: list[LoadComparison] = []
    findings: list[Finding] = []
    for si in entries:
        path = observed.get(si.library)
        if path is None:
            rows.append(LoadComparison(lib, si.library, _static_phrase(si), "no loaded object matched", None))
            continue
        loader, agree = _loaded_entry(si, path, r, loaded_before, ctx)
        rows.append(LoadComparison(lib, si.library, _static_phrase(si), loader, agree))
        if not agree:
            message = f"{si.library}: static: {_static_phrase(si)}; loader: {loader}"
            findings.append(Finding(message, file=lib, symbol=si.library))
    return tuple(rows), findings


def _loaded_library(
    lib: str,
    entries: Sequence[StaticImport],
    r: ProbeResult,
    real: str,
    bare: ProbeResult | None,
    ctx: _Comparing,
) -> _LibraryVerdict:
    """A library that loaded: it agrees when each entry was satisfied as the static audit says and the static
    audit did not say it fails; a note when it loads only after the package's own loading."""
    comparisons, findings = _loaded_entries(lib, entries, r, real, ctx)
    static_fail = ctx.static_failures.get(lib)
    if static_fail is not None and not findings:
        # the static audit says it cannot load, the loader loaded it (an entry it could not match)
        findings.append(Finding(f"static: {static_fail}; loader: {lib} loaded", file=lib))
    results: list[CheckResult] = []
    if findings:
        results.append(
            failed(
                FAMILY,
                f"load: {lib} (static and loader disagree)",
                findings[0].message + (f" (and {len(findings) - 1} more)" if len(findings) > 1 else ""),
                findings,
                rule=DISAGREEMENT,
            )
        )
    if bare is not None and not bare.ok and ctx.inputs.top_level:
        alone = _clean(bare.message, ctx.sites)
        results.append(
            failed(
                FAMILY,
                f"load: {lib} needs the package's own loading",
                f"{lib} loads only after {ctx.pkg}: alone, {alone}",
                [Finding(f"alone: {alone}", file=lib)],
                rule=PRELOADED,
            )
        )
    agrees = not findings
    return _LibraryVerdict(lib, tuple(results), comparisons, agrees=agrees, loads_and_agrees=agrees)


def _check_notes(
    inputs: LoadInputs, obs: Observation, not_judged: set[str], no_driver: list[str]
) -> tuple[str, ...]:
    """The check's notes: the inputs' and the observation's, then what was not counted or not probed."""
    uncounted = len(not_judged - set(no_driver))
    return (
        *inputs.notes,
        *obs.notes,
        *(
            [
                f"{words.count(uncounted, 'library')} not counted: loaded "
                "on demand by a documented convention, or what they need comes with an extra not "
                "installed or from the package's run-time lookup, which loading alone does not exercise"
            ]
            if uncounted
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
    )


def _summary_results(agreeing: Sequence[str], libraries: int, imports: int) -> list[CheckResult]:
    """The ``passed`` result listing the libraries that load as the static audit says, or the ``skipped``
    one when the wheel has no native library and no package."""
    results: list[CheckResult] = []
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
    return results


def _entries_by_library(
    static: Sequence[StaticImport], installed: dict[str, str]
) -> dict[str, list[StaticImport]]:
    """The static verdicts per wheel library, and an empty list for each installed library without one."""
    per_file: dict[str, list[StaticImport]] = {}
    for si in static:
        per_file.setdefault(si.file, []).append(si)
    for lib in installed:
        per_file.setdefault(lib, [])
    return per_file


def _counted_libraries(
    per_file: dict[str, list[StaticImport]],
    installed: dict[str, str],
    after: dict[str, ProbeResult],
    alone: dict[str, ProbeResult],
    not_judged: set[str],
) -> int:
    """How many libraries the agreement counts: installed, probed, and judged."""
    return len(
        [
            lib
            for lib in per_file
            if lib in installed and (after.get(lib) or alone.get(lib)) and lib not in not_judged
        ]
    )


def _rows(verdicts: Sequence[_LibraryVerdict], not_judged: set[str]) -> list[LoadComparison]:
    """Every library's per-import rows, in order; a library not counted (on demand, an extra or a run-time
    lookup, no driver here): its entries are not compared either."""
    return [
        dataclasses.replace(c, agree=None) if c.file in not_judged and c.agree is not None else c
        for v in verdicts
        for c in v.comparisons
    ]


def _probe_lines(obs: Observation, sites: Sequence[str]) -> tuple[LoadProbeLine, ...]:
    """Each child's outcome, with the site directories taken out of what it names."""
    return tuple(
        LoadProbeLine(_clean(r.probe.label, sites), r.ok, _clean(r.message, sites) or None)
        for r in obs.results
    )


def compare(
    static: Sequence[StaticImport], obs: Observation, inputs: LoadInputs
) -> tuple[LoadCheck, list[CheckResult]]:
    """The per-library and per-import agreement, and the ``load`` family's results (severity not yet set)."""
    imports, after, alone = _by_kind(obs, inputs)
    per_file = _entries_by_library(static, inputs.installed)
    ctx = _Comparing(
        obs,
        inputs,
        _before_label(inputs),
        _static_failures(per_file),
        _variant_excuses(inputs, after if inputs.top_level else alone),
    )
    import_results, driverless_imports = _failed_imports(imports, ctx)
    verdicts = [
        verdict
        for lib in sorted(per_file)
        if lib not in inputs.copies
        and (verdict := _judge_library(lib, per_file[lib], after, alone, ctx)) is not None
    ]
    no_driver = [*driverless_imports, *(v.lib for v in verdicts if v.no_driver)]
    not_judged = {v.lib for v in verdicts if v.not_judged}
    agreeing = [v.lib for v in verdicts if v.loads_and_agrees]
    libraries = _counted_libraries(per_file, inputs.installed, after, alone, not_judged)
    comparisons = _rows(verdicts, not_judged)
    judged = [c for c in comparisons if c.agree is not None]
    results = [
        *import_results,
        *_not_probed(inputs.not_probed),
        *_copies(inputs.copies, verdicts),
        *(result for v in verdicts for result in v.results),
        *_summary_results(agreeing, libraries, len(imports)),
    ]
    check = LoadCheck(
        environment=inputs.environment,
        stub_libcuda=obs.stub_libcuda,
        libraries=libraries,
        libraries_agree=sum(1 for v in verdicts if v.agrees),
        imports=len(judged),
        imports_agree=sum(1 for c in judged if c.agree),
        probes=_probe_lines(obs, inputs.sites),
        comparisons=tuple(comparisons),
        notes=_check_notes(inputs, obs, not_judged, no_driver),
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


def overruled(
    checks: Sequence[CheckResult], load: LoadCheck, copies: Sequence[Sequence[str]] = ()
) -> tuple[CheckResult, ...]:
    """The audit's checks once the real loader has answered: a closure error for a library the loader loaded
    with every DT_NEEDED satisfied is contradicted by the one certain answer there is. It becomes a warning
    that says so (the static model's gap, still worth fixing in the model), never an error that the loader
    disproves (issue 32, class 9); a library that loaded only through a local toolkit
    (:data:`TOOLKIT_ONLY`) did not load for a user, and disproves nothing. A library shipped under several
    names (``copies``, the static audit's groups) is loaded once: what the loader says of that copy holds
    for each. Pure: records in, records out."""
    rows: dict[str, list[LoadComparison]] = {}
    for c in load.comparisons:
        rows.setdefault(c.file, []).append(c)
    loaded = {
        f
        for f, rs in rows.items()
        if rs and all(r.loader.startswith("loaded ") and TOOLKIT_ONLY not in r.loader for r in rs)
    }
    loaded |= {p for group in copies if loaded.intersection(group) for p in group}
    out: list[CheckResult] = []
    for check in checks:
        lib = check.name[len("closure: ") :] if check.name.startswith("closure: ") else None
        if (
            lib in loaded
            and check.family == "closure"
            and check.status is Status.FAIL
            and check.severity is Severity.ERROR
        ):
            check = dataclasses.replace(
                check,
                severity=Severity.WARNING,
                reason=f"{check.reason}; but the real loader loaded {lib} with every import satisfied "
                "(audit --load): the loader's answer stands, the static model's is a warning",
            )
        out.append(check)
    return tuple(out)
