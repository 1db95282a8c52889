"""archs: every library with device code carries exactly the expected SASS set, both directions, and the
newest
expected arch also as PTX that is loaded at run time.

The expected list comes from the arch table (the policy's ``[archs]``, else the built-in one), looked up with
the
train of the wheel's OWN local version tag (``+cu132``) and the machine of its platform tag. Nothing is read
from
the environment. An unknown train is a failure naming the trains the table knows.

PTX in a relocatable fatbin (``__nv_relfatbin``, from ``-rdc``) is linked, never loaded, so it does not count;
the built-in default flags libraries whose PTX is only there (rule ``relocatable_ptx``, a warning by default),
and, without an ``[audit.archs]`` table, libraries with SASS but no loadable generic PTX (rule
``forward_ptx``, a warning by default: a GPU none of their SASS runs on, such as any newer one, cannot JIT
them).

Device code that holds no kernel (a cubin without a kernel symbol, PTX without ``.entry``: nothing can be
launched from it) does not count: an arch present only in such entries is not carried, and a library whose
loaded device code all holds none is not judged (it restricts no GPU; its result says so).

The train is the wheel's (``--train``, its tag, else inferred: :mod:`cudaship.checks.context`); a library
that is a variant (one of several alternatives, one per CUDA version) is judged against its own train.

Without an ``[archs]`` table the default also checks GPU coverage (rule ``coverage``, a warning by default,
``[audit.severity] "archs.coverage" = "error"`` to gate on it): every library with device code loaded at run
time must run, natively or by PTX JIT (:func:`cudaship.knowledge.runs_on.runs_on`, the driver's rules), on
every GPU its train supports on the wheel's machine (:func:`cudaship.knowledge.gpus.train_gpus`: each
capability with a GPU on that machine whose SM the train's nvcc compiles for). Two shapes are judged as built:
libraries whose names differ only by an arch token (``kernels_sm80.so``, ``kernels_sm90.so``: per-arch builds
one caller picks from) are judged together, a GPU covered when one of them runs on it; a library whose
device code is all arch-specific (``sm_90a``, ``sm_100f``) runs only on that GPU or family by construction,
and its result says which, not judged against the train. With no train (nor a variant's own), on a platform
no CUDA GPU serves, or a train the data lacks, the check is reported skipped with the reason, never passed.
"""

from __future__ import annotations

import posixpath
import re

from cudaship.checks.context import AuditContext
from cudaship.checks.policy import any_match
from cudaship.errors import CudashipError
from cudaship.knowledge.archs import ArchList, parse_arch, sort_arch_names
from cudaship.knowledge.gpus import GpuGroup, train_gpus
from cudaship.knowledge.platforms import cuda_platforms
from cudaship.knowledge.runs_on import VerdictKind, kernel_free, runs_on
from cudaship.knowledge.trains import Train
from cudaship.records.binary import DeviceCode, DeviceCodeKind
from cudaship.records.files import FileReport
from cudaship.records.findings import CheckResult, Finding, failed, passed, skipped, verdict
from cudaship.words import count

FAMILY = "archs"


def _with_device_code(ctx: AuditContext) -> dict[str, FileReport]:
    """Libraries with device code, less those whose loaded device code all holds no kernel."""
    return {
        p: r
        for p, r in sorted(ctx.reports.items())
        if r.device_code and r.host is not None and kernel_free(r.device_code) is None
    }


def _kernel_free(ctx: AuditContext) -> list[CheckResult]:
    """``archs: <library>`` passes, naming why, for each library whose device code holds no kernel."""
    results = []
    for path, report in sorted(ctx.reports.items()):
        if report.host is None:
            continue
        empty = kernel_free(report.device_code)
        if empty is not None:
            why = f"{empty}: nothing to launch, so it restricts no GPU (not judged)"
            results.append(passed(FAMILY, f"archs: {path}", why))
    return results


def _arch_sets(report: FileReport) -> tuple[set[str], set[str], set[str], set[str]]:
    """(loadable SASS, loadable PTX, relocatable-only SASS, relocatable-only PTX) arch names. Entries known
    to hold no kernel are left out."""
    sass = {
        d.arch
        for d in report.device_code
        if d.kind is DeviceCodeKind.SASS and not d.relocatable and d.kernels != 0
    }
    ptx = {
        d.arch
        for d in report.device_code
        if d.kind is DeviceCodeKind.PTX and not d.relocatable and d.kernels != 0
    }
    rsass = {d.arch for d in report.device_code if d.kind is DeviceCodeKind.SASS and d.relocatable} - sass
    rptx = {d.arch for d in report.device_code if d.kind is DeviceCodeKind.PTX and d.relocatable} - ptx
    return sass, ptx, rsass, rptx


def _names(names: set[str] | tuple[str, ...]) -> str:
    return " ".join(sort_arch_names(names)) or "none"


def run(ctx: AuditContext) -> list[CheckResult]:
    results: list[CheckResult] = []
    libraries = _with_device_code(ctx)
    results.extend(_kernel_free(ctx))
    if ctx.policy.archs.relocatable_ptx:
        results.extend(_relocatable_ptx(libraries))
    if "archs" in ctx.policy.configured:
        results.extend(_expected(ctx, libraries))
    else:
        results.extend(_forward_ptx(libraries))
        results.extend(_coverage(ctx, {**libraries, **_program_kernels(ctx)}))
    return results


def _program_kernels(ctx: AuditContext) -> dict[str, FileReport]:
    """An exported program's standalone device code (AOTInductor's per-kernel cubins), which its wrapper
    loads at run time (``cuModuleLoad``): judged for coverage like a library (issue 32, class 15). None
    for a wheel, whose loose cubins are data its code may or may not load."""
    if not ctx.is_program:
        return {}
    return {
        p: r
        for p, r in sorted(ctx.reports.items())
        if r.device_code and r.host is None and r.format is not None and kernel_free(r.device_code) is None
    }


# --- coverage: every GPU of the train -----------------------------------------------------------------------

COVERAGE = "archs: GPU coverage"

#: An arch token in a library's file name (``_sm80``, ``-sm_90a``, ``.compute_120``, ``_arch90``): libraries
#: whose names differ only there are per-arch builds of one thing.
_ARCH_TOKEN = re.compile(r"(?i)(?<=[._-])(?:sm|compute|arch)_?\d{2,3}[af]?(?=[._-])")


def _loadable(report: FileReport) -> tuple[DeviceCode, ...]:
    return tuple(
        d
        for d in report.device_code
        if not d.relocatable and d.kind in (DeviceCodeKind.SASS, DeviceCodeKind.PTX) and d.kernels != 0
    )


def _dispatch_groups(paths: list[str]) -> list[tuple[str, list[str]]]:
    """``paths`` as (label, members): per-arch builds (same directory, names equal but for an arch token)
    together, labelled with ``*`` for the token; every other library alone."""
    by_key: dict[str, list[str]] = {}
    for path in paths:
        head, name = posixpath.split(path)
        key = posixpath.join(head, _ARCH_TOKEN.sub("*", name)) if _ARCH_TOKEN.search(name) else path
        by_key.setdefault(key, []).append(path)
    out: list[tuple[str, list[str]]] = []
    for key, members in by_key.items():
        if len(members) > 1:
            out.append((key, members))
        else:
            out.extend((m, [m]) for m in members)
    return sorted(out)


def _caps(groups: list[GpuGroup] | tuple[GpuGroup, ...]) -> str:
    return " ".join(g.capability for g in groups)


def _generations(groups: list[GpuGroup]) -> str:
    names = list(dict.fromkeys(g.generation for g in groups if g.generation))
    return f" ({', '.join(names)})" if names else ""


def _coverage(ctx: AuditContext, libraries: dict[str, FileReport]) -> list[CheckResult]:
    """``archs: GPU coverage of <library>``: runs on every GPU its train supports on the wheel's machine."""
    targets = {
        p: r
        for p, r in libraries.items()
        if (_loaded_at_run_time(r) or (ctx.is_program and r.host is None)) and _loadable(r)
    }
    if not targets:
        return []  # nothing with device code: no GPU is restricted, nothing to cover
    if (ctx.os, ctx.machine) not in {(p.os, p.machine) for p in cuda_platforms()}:
        where = f"{ctx.os} {ctx.machine}" if ctx.machine else f"{ctx.os} (platform tag {ctx.platform.tag})"
        why = f"skipped: no NVIDIA driver serves {where}, so no GPU to check against"
        return [skipped(FAMILY, COVERAGE, why, rule="coverage")]
    machine = str(ctx.machine)
    by_train: dict[str, list[str]] = {}
    no_train: list[str] = []
    for path in targets:
        train = ctx.train_of(path)
        if isinstance(train, str):
            no_train.append(path)
        else:
            by_train.setdefault(train.version, []).append(path)
    results: list[CheckResult] = []
    if no_train:
        why = (
            f"skipped: no CUDA train known to take the supported GPUs from ({ctx.train_source}); "
            f"give --train or a local version tag (+cu130) to check {len(no_train)} "
            f"{'library' if len(no_train) == 1 else 'libraries'} with device code"
        )
        results.append(skipped(FAMILY, COVERAGE, why, rule="coverage"))
    for paths in by_train.values():
        train = ctx.train_of(paths[0])
        assert not isinstance(train, str)
        try:
            gpus = train_gpus(train, machine)
        except CudashipError as e:
            why = f"skipped: CUDA {train.version}'s GPUs are not in cudaship's data ({e.message})"
            results.append(skipped(FAMILY, f"{COVERAGE} for CUDA {train.version}", why, rule="coverage"))
            continue
        if not gpus:  # nothing to check against is not a pass
            why = f"skipped: cudaship's data knows no GPU that CUDA {train.version} supports on {machine}"
            results.append(skipped(FAMILY, f"{COVERAGE} for CUDA {train.version}", why, rule="coverage"))
            continue
        for label, members in _dispatch_groups(paths):
            results.append(_cover(ctx, label, members, train.version, machine, gpus))
    return results


def _cover(
    ctx: AuditContext, label: str, members: list[str], train: str, machine: str, gpus: tuple[GpuGroup, ...]
) -> CheckResult:
    name = f"{COVERAGE} of {label}"
    entries = [_loadable(ctx.reports[m]) for m in members]
    every = [d for e in entries for d in e]
    whose = f"CUDA {train} supports on {machine}"
    if all(d.variant for d in every):
        specific = sort_arch_names({d.arch for d in every})
        runs = [g for g in gpus if any(runs_on(e, g.arch).runs for e in entries)]
        where = _caps(runs) or "none of them"
        if ctx.is_program:  # no caller picks among builds: the program runs where its code runs, no further
            others = [g for g in gpus if g not in runs]
            return failed(
                FAMILY,
                name,
                f"arch-specific device code only ({' '.join(specific)}): of the GPUs {whose} the program "
                f"runs on {where} alone, not on {_caps(others)}{_generations(others)}; export with generic "
                "SASS or PTX (or once per GPU) to run elsewhere",
                [Finding(f"no code for {g.label}", file=label, arch=g.capability) for g in others],
                rule="coverage",
            )
        return passed(
            FAMILY,
            name,
            f"arch-specific device code only ({' '.join(specific)}): built for those GPUs alone and picked "
            f"by its caller; of the GPUs {whose} it runs on {where}",
            rule="coverage",
        )
    native = jit = 0
    missing: list[GpuGroup] = []
    reasons: dict[str, str] = {}
    for g in gpus:
        verdicts = [runs_on(e, g.arch, platform=ctx.os) for e in entries]
        kinds = {v.verdict for v in verdicts}
        if VerdictKind.NATIVE in kinds:
            native += 1
        elif VerdictKind.JIT in kinds:
            jit += 1
        else:
            missing.append(g)
            reasons[g.capability] = verdicts[0].reason
    together = f" ({count(len(members), 'per-arch build')} judged together)" if len(members) > 1 else ""
    if not missing:
        how = f"{native} native" + (f", {jit} by PTX JIT" if jit else "")
        return passed(
            FAMILY, name, f"runs on every GPU {whose}: {_caps(gpus)} ({how}){together}", rule="coverage"
        )
    findings = [
        Finding(
            f"does not run on {g.label}, which CUDA {train} supports: {reasons[g.capability]}",
            file=members[0] if len(members) == 1 else label,
            arch=g.arch.sass_name,
        )
        for g in missing
    ]
    reason = (
        f"does not run on {len(missing)} of the {len(gpus)} GPU capabilities {whose}: "
        f"{_caps(missing)}{_generations(missing)}{together}"
    )
    return failed(FAMILY, name, reason, findings, rule="coverage")


def _arch_number(name: str) -> int | None:
    try:
        arch = parse_arch(name)
    except (CudashipError, ValueError):
        return None
    return arch.sm if not arch.variant else None


def _loaded_at_run_time(report: FileReport) -> bool:
    """A shared library or program, not a static library or object file: those are linked at build time
    (``libcudadevrt.a``, ``cudadevrt.lib``), so which PTX they carry, relocatable or not, is the linker's."""
    return report.host is not None and report.host.kind not in ("static-library", "object")


def _forward_ptx(libraries: dict[str, FileReport]) -> list[CheckResult]:
    """Each library with SASS also carries loadable generic PTX (``compute_XY``, no a/f variant), which the
    driver JIT-compiles on any GPU of capability X.Y or newer: without it, a GPU none of its SASS runs on (a
    newer one) cannot run the library at all."""
    results = []
    for path, report in libraries.items():
        sass, ptx, _rsass, rptx = _arch_sets(report)
        if not sass or not _loaded_at_run_time(report):
            continue
        name = f"archs: forward-compatible PTX in {path}"
        generic = sort_arch_names({a for a in ptx if _arch_number(a) is not None})
        if generic:
            results.append(passed(FAMILY, name, f"PTX {' '.join(generic)} JIT-compiles on newer GPUs"))
            continue
        if any(_arch_number(a) is not None for a in rptx):
            continue  # only relocatable: the relocatable_ptx check says so, and why it does not count
        numbers = [n for n in (_arch_number(a) for a in sass) if n is not None]
        suggest = f"compute_{max(numbers)}" if numbers else None
        message = (
            f"no loadable generic PTX (SASS only: {_names(sass)}): a GPU none of these runs on, such as any "
            "newer one, cannot run it" + (f" (add PTX {suggest})" if suggest else "")
        )
        results.append(failed(FAMILY, name, message, [Finding(message, file=path, arch=suggest)]))
    return results


def _relocatable_ptx(libraries: dict[str, FileReport]) -> list[CheckResult]:
    results = []
    for path, report in libraries.items():
        _sass, ptx, _rsass, rptx = _arch_sets(report)
        if (not ptx and not rptx) or not _loaded_at_run_time(report):
            continue
        name = f"archs: loadable PTX in {path}"
        if rptx:
            findings = [
                Finding(
                    f"{arch} is only in a relocatable fatbin (__nv_relfatbin): linked, "
                    "never loaded at run time",
                    file=path,
                    arch=arch,
                )
                for arch in sort_arch_names(rptx)
            ]
            results.append(failed(FAMILY, name, f"PTX only relocatable: {_names(rptx)}", findings))
        else:
            results.append(passed(FAMILY, name, f"PTX loaded at run time: {_names(ptx)}"))
    return results


def expected_arch_list(ctx: AuditContext, train: Train | str | None = None) -> tuple[ArchList | None, str]:
    """The expected list for this wheel (or for ``train``: a variant's own) and a one-line account of where
    it came from (or why there is none)."""
    own = train is not None
    if train is None:
        train = ctx.train_or_error
    if isinstance(train, str):
        return None, train
    if ctx.machine is None:
        return (
            None,
            f"the wheel's platform tag ({ctx.platform.tag}) names no machine to look up the arch list for",
        )
    table = ctx.policy.arch_table()
    try:
        archlist = table.lookup(train, ctx.machine)
    except CudashipError as e:
        return None, f"{train.tag} ({'its own train' if own else ctx.train_source}): {e.message}"
    if not archlist.sass_names():
        return None, f"the arch list for {train.tag} {ctx.machine} in {table.source} is empty"
    where = "its own train" if own else _source(ctx)
    return archlist, f"{train.tag} {ctx.machine} ({where}) in {table.source}"


def _source(ctx: AuditContext) -> str:
    """Where the train came from, as it reads in parentheses. A wheel's source is a phrase of its own (``local
    tag +cu130``, ``--train 13.0``, ``inferred from the device code ...``: never ``from inferred from ...``);
    a program's is the evidence itself (``PTX ISA 9.0``), which reads after ``from``."""
    if ctx.is_program and ctx.train_override is None:
        return f"from {ctx.train_source}"
    return ctx.train_source


def _expected(ctx: AuditContext, libraries: dict[str, FileReport]) -> list[CheckResult]:
    policy = ctx.policy.archs
    archlist, source = expected_arch_list(ctx)
    results: list[CheckResult] = []
    targets = {p: r for p, r in libraries.items() if any_match(policy.libraries, p)}
    own_trains = {p: ctx.variants[p].train for p in targets if p in ctx.variants}
    if archlist is None:
        if targets and all(own_trains.get(p) is not None for p in targets):
            # every library is a variant judged against its own train: the wheel needs none
            trains = ", ".join(sorted({t.tag for t in own_trains.values() if t is not None}))
            results.append(
                passed(
                    FAMILY,
                    "archs: expected arch list",
                    f"each library is a variant with its own train ({trains}); the wheel has none: {source}",
                )
            )
            want_sass: set[str] = set()
            want_ptx: set[str] = set()
            return results + _per_library(ctx, targets, None, want_sass, want_ptx)
        results.append(
            failed(FAMILY, "archs: expected arch list", source, [Finding(source, requirement=ctx.local)])
        )
        return results
    want_sass = set(archlist.sass_names())
    want_ptx = set(archlist.ptx_names()) if policy.ptx == "newest" else set()
    shown = _names(want_sass) + (f" + PTX {_names(want_ptx)}" if want_ptx else "")
    results.append(passed(FAMILY, "archs: expected arch list", f"{source}: {shown}"))
    if not targets:
        results.append(
            failed(
                FAMILY,
                "archs: libraries with device code",
                f"no shipped library matching {', '.join(policy.libraries)} carries device code",
                [Finding("expected device code for " + shown)],
            )
        )
        return results
    return results + _per_library(ctx, targets, archlist, want_sass, want_ptx)


def _per_library(
    ctx: AuditContext,
    targets: dict[str, FileReport],
    archlist: ArchList | None,
    wheel_sass: set[str],
    wheel_ptx: set[str],
) -> list[CheckResult]:
    """``archs: <library>``: each target against the wheel's list, or a variant against its own train's."""
    policy = ctx.policy.archs
    results: list[CheckResult] = []
    for path, report in targets.items():
        variant = ctx.variants.get(path)
        label = ctx.local or "expected"
        if variant is not None:
            if variant.train is None:
                results.append(
                    passed(FAMILY, f"archs: {path}", f"a {variant.label} variant: no CUDA train to judge")
                )
                continue
            own, own_source = expected_arch_list(ctx, variant.train)
            if own is None:
                results.append(failed(FAMILY, f"archs: {path}", own_source, [Finding(own_source, file=path)]))
                continue
            want_sass = set(own.sass_names())
            want_ptx = set(own.ptx_names()) if policy.ptx == "newest" else set()
            label = f"{variant.train.tag} variant's"
        else:
            assert archlist is not None  # only variants are judged without the wheel's list
            want_sass, want_ptx = wheel_sass, wheel_ptx
        sass, ptx, rsass, rptx = _arch_sets(report)
        findings: list[Finding] = []
        for arch in sort_arch_names(want_sass - sass):
            extra = " (only in a relocatable fatbin)" if arch in rsass else ""
            findings.append(Finding(f"missing SASS {arch}{extra}", file=path, arch=arch))
        for arch in sort_arch_names(sass - want_sass):
            findings.append(
                Finding(f"unexpected SASS {arch} (not in the {label} list)", file=path, arch=arch)
            )
        for arch in sort_arch_names(want_ptx - ptx):
            if arch in rptx:
                findings.append(
                    Finding(
                        f"PTX {arch} is only relocatable (__nv_relfatbin): not loaded at run time, "
                        "does not count",
                        file=path,
                        arch=arch,
                    )
                )
            else:
                findings.append(Finding(f"missing PTX {arch}", file=path, arch=arch))
        ok = f"SASS {_names(sass)}" + (f", PTX {_names(ptx & want_ptx)}" if want_ptx else "")
        results.append(verdict(FAMILY, f"archs: {path}", findings, ok))
    return results
