"""``cudaship audit --format markdown``: a summary and one table per wheel, for a pull-request comment or
``$GITHUB_STEP_SUMMARY``; failures' evidence follows each table in a collapsible block."""

from __future__ import annotations

from cudaship.checks.records import AuditReport
from cudaship.records.findings import CheckResult, Severity, Status
from cudaship.render.audit_text import finding_text
from cudaship.render.style import Style
from cudaship.words import count

_ICON = {Status.PASS: "✅ pass", Status.SKIP: "⏭️ skip"}
_FAILED = {Severity.ERROR: "❌ fail", Severity.WARNING: "⚠️ warning", Severity.NOTE: "📝 note"}


def _icon(check: CheckResult) -> str:
    return _FAILED[check.severity] if check.status is Status.FAIL else _ICON[check.status]


def _cell(text: str) -> str:
    return text.replace("\\", "\\\\").replace("|", "\\|").replace("\n", " ").replace("`", "'")


def render(report: AuditReport, style: Style) -> str:
    out: list[str] = [f"**{_cell(report.ran_code)}**", ""] if report.ran_code else []
    out += ["## cudaship audit", ""]
    summary = report.summary
    policy = f"`{_cell(report.policy_source)}`" if report.policy_source else "none"
    if report.policy_default:
        policy += " (built-in default checks)"
    mark = "❌" if summary.failed else ("⚠️" if summary.warnings else "✅")
    out += [f"{mark} **{report.summary_line()}** · policy: {policy}", ""]
    if report.resolution is not None and (report.resolution.projects or report.resolution.constraints):
        out += [_cell(report.resolution.line), ""]
    for wheel in report.wheels:
        f = wheel.facts
        out.append(f"### `{_cell(f.filename)}`")
        out.append("")
        facts = [x for x in (f"{f.name} {f.version}" if f.name else None, f.platform, f.machine) if x]
        if f.train:
            inferred = f.train_source and not (f.local and f.train_source.startswith("local tag"))
            facts.append(f"train {f.train}" + (f" ({f.train_source})" if inferred else ""))
        if not f.cuda_code:
            facts.append("no CUDA code")
        facts.append(wheel.summary.line())
        out += [" · ".join(_cell(x) for x in facts), ""]
        if wheel.load is not None:
            out += [
                f"**{_cell(wheel.load.line)}**"
                + (f" · loaded in: {_cell(wheel.load.environment)}" if wheel.load.environment else ""),
                "",
            ]
            out += [f"> loader note: {_cell(n)}" for n in wheel.load.notes]
            if wheel.load.notes:
                out.append("")
        out += ["| result | check | reason |", "|---|---|---|"]
        for check in wheel.checks:
            out.append(f"| {_icon(check)} | {_cell(check.name)} | {_cell(check.reason)} |")
        out.append("")
        failures = [c for c in wheel.checks if c.status is Status.FAIL and c.evidence]
        if failures:
            out += [
                f"<details><summary>Evidence for {count(len(failures), 'failed check')} (any severity)"
                "</summary>",
                "",
            ]
            for check in failures:
                out.append(f"**{_cell(check.name)}**")
                out.append("")
                out += [f"- {_cell(finding_text(e))}" for e in check.evidence]
                out.append("")
            out += ["</details>", ""]
    for note in report.notes:
        out.append(f"> note: {_cell(note)}")
    for error in report.errors:  # an input that could not be audited
        out.append(f"> ❗ **error:** {_cell(error)}")
    return "\n".join(out).rstrip("\n") + "\n"
