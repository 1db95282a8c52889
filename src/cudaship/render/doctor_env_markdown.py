"""``doctor --env`` as markdown (a CI job summary): the verdict, where it was simulated, the findings."""

from __future__ import annotations

from cudaship.checks.environment import EnvReport
from cudaship.render.doctor_env_text import settings_lines, verdict
from cudaship.render.escape import markdown_cell as cell


def render_markdown(report: EnvReport) -> str:
    lines = ["## cudaship doctor --env", "", f"**{verdict(report)}**", ""]
    lines += [f"- {line}" for line in settings_lines(report)]
    if report.findings:
        lines += ["", "| severity | rule | finding |", "|---|---|---|"]
        for f in report.findings:
            message = f.reason + (f" (source: {f.subject.source})" if f.subject.source else "")
            lines.append(f"| {f.severity.value} | {f.name} | {cell(message)} |")
    return "\n".join(lines) + "\n"
