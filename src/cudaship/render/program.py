"""``cudaship program``: the text reports of inspect, check, run and export, the ``markdown`` of check and run
(a release test plan table: one row per (train, runtime): train · export torch · runtime · checks passed ·
max diff · latency), and each subcommand's formats (``json``: :mod:`cudaship.render.program_json`)."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import TYPE_CHECKING

from cudaship import words
from cudaship.inspection.program_records import MemberRole, ProgramInfo
from cudaship.program.records import CheckReport, RunReport, libstdcxx_copy, outcome
from cudaship.render import program_json
from cudaship.render.escape import markdown_cell as cell
from cudaship.render.style import Renderer, Style

if TYPE_CHECKING:
    from cudaship.program.export import ExportResult

_MARK = {"pass": "PASS", "fail": "FAIL", "warn": "WARN", "skip": "skip"}


def render_inspect(info: ProgramInfo) -> str:
    lines = [f"{info.path}: {'AOTInductor package' if info.kind.value == 'pt2' else 'ExecuTorch program'}"]
    target = "-".join(x for x in (info.platform, info.machine) if x) or "unknown"
    lines.append(f"  target        {target}, device {info.device or 'unknown'}")
    if info.cpu_isa:
        lines.append(f"  cpu isa       {info.cpu_isa}")
    if info.compute_capability:
        lines.append(f"  compiled for  capability {info.compute_capability} (AOTI_COMPUTE_CAPABILITY)")
    if info.models:
        label = "models" if info.kind.value == "pt2" else "methods"
        lines.append(f"  {label:<13} {', '.join(info.models)}")
    if info.backends:
        lines.append(f"  backends      {', '.join(info.backends)}")
    majors = info.cudart_majors
    lines.append(
        "  cudart        "
        + (", ".join(f"cudart {m} (dynamic)" for m in majors) if majors else "none imported by the libraries")
    )
    lines.append("  CUDA train    " + info.train.phrase)
    for m in info.libraries:
        lines.append(f"  library       {m.name} ({words.byte_count(m.size)})")
        if m.report is not None and m.report.host is not None:
            imports = ", ".join(i.library for i in m.report.host.imports)
            lines.append(f"    imports     {imports or '(none)'}")
        count = libstdcxx_copy(m.report)
        if count:
            lines.append(
                f"    WARNING     links libstdc++ statically ({count} std::locale symbols, no libstdc++.so.6 "
                "needed): crashes when loaded next to another libstdc++ (see docs/program.md)"
            )
    code = info.device_code
    cubins = [m for m in info.members if m.role is MemberRole.CUBIN]
    holders = len({name for name, _ in code})
    lines.append(
        f"  device code   {words.count(len(code), 'entry')} in {words.count(holders, 'file')} "
        f"({words.count(len(cubins), 'cubin')}): "
        f"{' '.join((*info.sass, *info.ptx)) or '(none)'}"
    )
    for member, entry in code:
        short = member.rsplit("/", 1)[-1]
        tool = f", ptxas {entry.toolkit_version}" if entry.toolkit_version else ""
        lines.append(f"    {entry.arch:<12} {entry.kind.value:<5} {short}{tool}")
    specific = [a for a in info.sass if a.endswith("a")]
    if specific:
        lines.append(
            f"  !! ARCH-SPECIFIC: {' '.join(specific)} runs on exactly one GPU generation "
            f"(capability {', '.join(a[3:-2] + '.' + a[-2] for a in specific)}), nowhere else; "
            "no PTX to fall back on"
            if not info.ptx
            else f"  !! ARCH-SPECIFIC: {' '.join(specific)} runs on exactly one GPU generation"
        )
    for note in info.notes:
        lines.append(f"  note          {note}")
    return "\n".join(lines) + "\n"


def render_inspect_all(infos: Sequence[ProgramInfo], style: Style) -> str:
    return "\n".join(render_inspect(i) for i in infos)


def render_export(result: ExportResult, style: Style) -> str:
    prov = result.provenance
    lines = [
        f"{result.directory}: exported {prov.model or 'the model'} with torch {prov.torch_version} "
        f"(CUDA {prov.cuda_train or '-'}) for {prov.device} {prov.target_platform} "
        f"in {result.export_s:.1f} s; "
        f"device code {' '.join(prov.device_code_archs) or '(none)'}"
    ]
    lines += [f"note: {n}" for n in result.notes]
    lines += [f"warning: {w}" for w in result.warnings]
    lines += [f"FAILED: {p}" for p in result.problems]
    return "\n".join(lines) + "\n"


def render_check(report: CheckReport, style: Style) -> str:
    t = report.target
    head = f"{report.directory}: program check"
    lines = [head]
    prov = report.provenance
    if prov is not None:
        lines.append(
            f"  exported      torch {prov.torch_version}, CUDA {prov.cuda_train or '-'}, {prov.device}, "
            f"{prov.target_platform}"
            + (f", on {prov.gpu_name} ({prov.gpu_capability})" if prov.gpu_name else "")
        )
    parts = [
        f"train {t.train}" if t.train else None,
        f"GPU {t.gpu or t.capability}" if t.capability else None,
        f"driver {t.driver}" if t.driver else None,
        t.platform,
    ]
    lines.append(f"  target        {', '.join(p for p in parts if p) or '(nothing given)'}")
    for item in report.items:
        lines.append(f"  {_MARK[outcome(item)]:<5} {item.name:<10} {item.reason}")
    lines.append("  " + verdict_line(report))
    return "\n".join(lines) + "\n"


def verdict_line(report: CheckReport) -> str:
    """``passed: 6 of 6 checks passed`` / ``FAILED: 4 of 7 checks failed (3 passed)``; every check counts,
    the skipped ones too, and they are named as skipped (``passed: 3 of 6 checks passed, 3 skipped``: issue 35
    found "3 of 3 checks passed" beside three skipped rows). A warning passes."""
    passed, decided = report.counts
    failed = decided - passed
    skipped = report.summary.skipped
    total = decided + skipped
    if report.passed:
        return f"passed: {passed} of {total} {_checks(total)} passed" + (
            f", {skipped} skipped" if skipped else ""
        )
    also = f", {skipped} skipped" if skipped else ""
    return f"FAILED: {failed} of {total} {_checks(total)} failed ({passed} passed{also})"


def _checks(n: int) -> str:
    return "check" if n == 1 else "checks"


def render_run(report: RunReport, style: Style) -> str:
    lines = [f"{report.directory}: program run ({report.runs} runs) in {report.run_directory}"]
    if report.ok:
        lines.append(f"  OK            max abs diff {report.max_abs_diff:.3g} <= {report.tolerance:g}")
    else:
        lines.append(f"  FAILED        {report.failure}")
    if report.load_s is not None:
        lines.append(f"  load          {report.load_s:.3f} s ({report.loader})")
    if report.latency_ms is not None:
        eager = f", eager {report.eager_latency_ms:.3f} ms" if report.eager_latency_ms is not None else ""
        lines.append(f"  latency       {report.latency_ms:.3f} ms median{eager}")
    for note in report.notes:
        lines.append(f"  note          {note}")
    env = report.environment
    if env is not None and (env.driver or env.gpu or not report.ok):
        lines.append(
            f"  environment   driver {env.driver or '?'} (CUDA {env.driver_cuda or '?'}), "
            f"GPU {env.gpu or '?'} (capability {env.capability or '?'}), "
            f"memory pools {'yes' if env.memory_pools else 'no' if env.memory_pools is not None else '?'}"
        )
        lines.append(
            f"  runtimes      python {env.python or '?'}, torch {env.torch or '?'} "
            f"(CUDA {env.torch_cuda or '-'}), "
            f"cudart {' '.join(env.cudart) or 'none found'}"
        )
        lines.append(f"  compiler      {env.compiler_on_path or 'none on PATH (as intended)'}")
        if env.error:
            lines.append(f"  probe         {env.error}")
    if not report.ok and report.stderr_tail:
        lines.append("  last output of the run process:")
        lines.extend(f"    {line}" for line in report.stderr_tail.splitlines())
    return "\n".join(lines) + "\n"


HEADER = (
    "| train | export torch | runtime | checks passed | max diff | latency |\n|---|---|---|---|---|---|\n"
)


def check_row(report: CheckReport) -> str:
    prov = report.provenance
    train = report.target.train or (prov.cuda_train if prov else None) or "-"
    runtime = report.target.runtime or (
        f"GPU {report.target.capability}" if report.target.capability else "-"
    )
    passed, decided = report.counts
    skipped = report.summary.skipped
    failed = [i.name for i in report.items if i.is_error]
    notes = ([f"failed: {', '.join(failed)}"] if failed else []) + ([f"{skipped} skipped"] if skipped else [])
    checks = f"{passed}/{decided + skipped}" + (f" ({'; '.join(notes)})" if notes else "")
    cells = (train, prov.torch_version if prov else "-", runtime, checks, "-", "-")
    return "| " + " | ".join(cell(c) for c in cells) + " |\n"


def run_row(report: RunReport) -> str:
    prov = report.provenance
    env = report.environment
    train = (prov.cuda_train if prov else None) or "-"
    runtime = f"torch {env.torch}" if env is not None and env.torch else "-"
    if env is not None and env.gpu:
        runtime += f" on {env.gpu}"
    checks = "run ok" if report.ok else f"run failed: {report.signal or report.failure}"
    diff = f"{report.max_abs_diff:.2g}" if report.max_abs_diff is not None else "-"
    latency = "-"
    if report.latency_ms is not None:
        latency = f"{report.latency_ms:.3f} ms"
        if report.eager_latency_ms is not None:
            latency += f" (eager {report.eager_latency_ms:.3f} ms)"
    cells = (train, prov.torch_version if prov else "-", runtime, checks, diff, latency)
    return "| " + " | ".join(cell(c) for c in cells) + " |\n"


def render_markdown(report: CheckReport | RunReport, style: Style) -> str:
    """One check or run as a release-plan table of one row."""
    return HEADER + (check_row(report) if isinstance(report, CheckReport) else run_row(report))


INSPECT_FORMATS: Mapping[str, Renderer[list[ProgramInfo]]] = {
    "text": render_inspect_all,
    "json": program_json.render_inspect,
}
CHECK_FORMATS: Mapping[str, Renderer[CheckReport]] = {
    "text": render_check,
    "json": program_json.render_check,
    "markdown": render_markdown,
}
RUN_FORMATS: Mapping[str, Renderer[RunReport]] = {
    "text": render_run,
    "json": program_json.render_run,
    "markdown": render_markdown,
}
EXPORT_FORMATS: Mapping[str, Renderer[ExportResult]] = {
    "text": render_export,
    "json": program_json.render_export,
}
