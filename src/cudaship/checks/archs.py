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
and, without an ``[audit.archs]`` table, libraries with no loadable PTX for their newest SASS arch or newer
(rule ``forward_ptx``, a warning by default: GPUs newer than every SASS cannot JIT them).

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
from cudaship.knowledge.trains import Train

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
    else:
        results.extend(_forward_ptx(libraries))
    return results


def _arch_number(name: str) -> int | None:
    try:
        arch = parse_arch(name)
    except (CudashipError, ValueError):
        return None
    return arch.sm if not arch.variant else None


def _forward_ptx(libraries: dict[str, FileReport]) -> list[CheckResult]:
    """Each library with SASS also carries loadable PTX for its newest generic SASS arch or a newer one."""
    results = []
    for path, report in libraries.items():
        sass, ptx, _rsass, rptx = _arch_sets(report)
        sass_numbers = [n for n in (_arch_number(a) for a in sass) if n is not None]
        if not sass_numbers:
            continue
        newest = max(sass_numbers)
        name = f"archs: forward-compatible PTX in {path}"
        ptx_numbers = [n for n in (_arch_number(a) for a in ptx) if n is not None]
        good = sort_arch_names({a for a in ptx if (_arch_number(a) or 0) >= newest})
        if good:
            results.append(
                passed(FAMILY, name, f"PTX {' '.join(good)} JIT-compiles on GPUs after sm_{newest}")
            )
            continue
        if any((_arch_number(a) or 0) >= newest for a in rptx):
            continue  # only relocatable: the relocatable_ptx check says so, and why it does not count
        have = f"loadable PTX {_names(ptx)}" if ptx_numbers else "no loadable PTX"
        message = (
            f"newest SASS is sm_{newest} and {have}: GPUs newer than sm_{newest} cannot run it "
            f"(add PTX compute_{newest})"
        )
        results.append(failed(FAMILY, name, message, [Finding(message, file=path, arch=f"compute_{newest}")]))
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
    where = "its own train" if own else _from(ctx)
    return archlist, f"{train.tag} {ctx.machine} (from {where}) in {table.source}"


def _from(ctx: AuditContext) -> str:
    source = ctx.train_source
    if source.startswith("local tag "):
        return source[len("local tag ") :]
    return source


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
    for path, report in targets.items():
        variant = ctx.variants.get(path)
        label = ctx.local
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
            want_sass = set(archlist.sass_names())
            want_ptx = set(archlist.ptx_names()) if policy.ptx == "newest" else set()
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
