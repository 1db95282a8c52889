"""archs: every library with device code carries exactly the expected SASS set, both directions, and the
newest
expected arch also as PTX that is loaded at run time.

The expected list comes from the arch table (the policy's ``[archs]``, else the built-in one), looked up with
the
train of the wheel's OWN local version tag (``+cu132``) and the machine of its platform tag. Nothing is read
from
the environment. An unknown train is a failure naming the trains the table knows.

PTX in a relocatable fatbin (``__nv_relfatbin``, from ``-rdc``) is linked, never loaded, so it does not count;
the built-in default flags libraries whose PTX is only there.
"""

from __future__ import annotations

from cudaship.binary.records import DeviceCodeKind
from cudaship.checks.context import AuditContext
from cudaship.checks.policy import any_match
from cudaship.checks.records import CheckResult, Finding, failed, passed, verdict
from cudaship.errors import CudashipError
from cudaship.inspection.records import FileReport
from cudaship.knowledge.archs import ArchList, sort_arch_names

FAMILY = "archs"


def _with_device_code(ctx: AuditContext) -> dict[str, FileReport]:
    return {p: r for p, r in sorted(ctx.reports.items()) if r.device_code and r.host is not None}


def _arch_sets(report: FileReport) -> tuple[set[str], set[str], set[str], set[str]]:
    """(loadable SASS, loadable PTX, relocatable-only SASS, relocatable-only PTX) arch names."""
    sass = {d.arch for d in report.device_code if d.kind is DeviceCodeKind.SASS and not d.relocatable}
    ptx = {d.arch for d in report.device_code if d.kind is DeviceCodeKind.PTX and not d.relocatable}
    rsass = {d.arch for d in report.device_code if d.kind is DeviceCodeKind.SASS and d.relocatable} - sass
    rptx = {d.arch for d in report.device_code if d.kind is DeviceCodeKind.PTX and d.relocatable} - ptx
    return sass, ptx, rsass, rptx


def _names(names: set[str] | tuple[str, ...]) -> str:
    return " ".join(sort_arch_names(names)) or "none"


def run(ctx: AuditContext) -> list[CheckResult]:
    results: list[CheckResult] = []
    libraries = _with_device_code(ctx)
    if ctx.policy.archs.relocatable_ptx:
        results.extend(_relocatable_ptx(libraries))
    if "archs" in ctx.policy.configured:
        results.extend(_expected(ctx, libraries))
    return results


def _relocatable_ptx(libraries: dict[str, FileReport]) -> list[CheckResult]:
    results = []
    for path, report in libraries.items():
        _sass, ptx, _rsass, rptx = _arch_sets(report)
        if not ptx and not rptx:
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


def expected_arch_list(ctx: AuditContext) -> tuple[ArchList | None, str]:
    """The expected list for this wheel and a one-line account of where it came from (or why there is
    none)."""
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
        return None, f"+{ctx.local}: {e.message}"
    if not archlist.sass_names():
        return None, f"the arch list for {train.tag} {ctx.machine} in {table.source} is empty"
    origin = ctx.train_source if ctx.is_program else f"+{ctx.local}"
    return archlist, f"{train.tag} {ctx.machine} (from {origin}) in {table.source}"


def _expected(ctx: AuditContext, libraries: dict[str, FileReport]) -> list[CheckResult]:
    policy = ctx.policy.archs
    archlist, source = expected_arch_list(ctx)
    results: list[CheckResult] = []
    if archlist is None:
        results.append(
            failed(FAMILY, "archs: expected arch list", source, [Finding(source, requirement=ctx.local)])
        )
        return results
    want_sass = set(archlist.sass_names())
    want_ptx = set(archlist.ptx_names()) if policy.ptx == "newest" else set()
    shown = _names(want_sass) + (f" + PTX {_names(want_ptx)}" if want_ptx else "")
    results.append(passed(FAMILY, "archs: expected arch list", f"{source}: {shown}"))
    targets = {p: r for p, r in libraries.items() if any_match(policy.libraries, p)}
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
    listed = ctx.local or "expected"
    for path, report in targets.items():
        sass, ptx, rsass, rptx = _arch_sets(report)
        findings: list[Finding] = []
        for arch in sort_arch_names(want_sass - sass):
            extra = " (only in a relocatable fatbin)" if arch in rsass else ""
            findings.append(Finding(f"missing SASS {arch}{extra}", file=path, arch=arch))
        for arch in sort_arch_names(sass - want_sass):
            findings.append(
                Finding(f"unexpected SASS {arch} (not in the {listed} list)", file=path, arch=arch)
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
