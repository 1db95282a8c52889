"""``--format markdown`` for ``program check`` and ``program run``: a release test plan table.

One row per (train, runtime): train · export torch · runtime · checks passed · max diff · latency.
"""

from __future__ import annotations

from collections.abc import Sequence

from cudaship.program.records import CheckReport, RunReport
from cudaship.render.escape import markdown_cell as cell

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
    failed = [i.name for i in report.items if i.is_error]
    checks = f"{passed}/{decided}" + (f" (failed: {', '.join(failed)})" if failed else "")
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


def render(reports: Sequence[CheckReport | RunReport]) -> str:
    rows = [check_row(r) if isinstance(r, CheckReport) else run_row(r) for r in reports]
    return HEADER + "".join(rows)


def render_one(report: CheckReport | RunReport) -> str:
    """One check or run as a release-plan table of one row."""
    return render([report])
