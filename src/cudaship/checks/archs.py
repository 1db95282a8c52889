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
"""

from __future__ import annotations

from cudaship.binary.records import DeviceCodeKind
from cudaship.checks.context import AuditContext
from cudaship.checks.policy import any_match
from cudaship.checks.records import CheckResult, Finding, failed, passed, verdict
from cudaship.errors import CudashipError
from cudaship.inspection.records import FileReport
from cudaship.knowledge.archs import ArchList, parse_arch, sort_arch_names
from cudaship.knowledge.runs_on import kernel_free
from cudaship.knowledge.trains import Train

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
    return results


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
