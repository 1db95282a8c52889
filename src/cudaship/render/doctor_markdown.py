"""``cudaship doctor`` as Markdown: the machine, then a table of each file against each GPU here."""

from __future__ import annotations

from cudaship.analysis.doctor import DoctorReport
from cudaship.knowledge.runs_on import VerdictKind
from cudaship.render.doctor_text import _WORD, _driver_line, _gpu_line, _header


def _cell(text: str) -> str:
    return text.replace("|", "\\|").replace("\n", " ")


def render(report: DoctorReport) -> str:
    result = report.probe
    lines = ["# cudaship doctor", "", f"- {_cell(_driver_line(result))}"]
    lines += [f"- {_cell(_gpu_line(g))}" for g in result.gpus]
    lines += [f"- note: {_cell(n)}" for n in result.notes]
    lines += ["", f"## {_cell(_header(report))}", ""]
    if not report.checked:
        return "\n".join(lines)
    lines += ["| file | package | GPU | verdict | reason | minimum driver |", "|---|---|---|---|---|---|"]
    for item in report.checked:
        f = item.verdicts
        file, package = f"`{_cell(f.label)}`", _cell(item.distribution or "")
        if f.error is not None:
            lines.append(f"| {file} | {package} | | cannot read | {_cell(f.error)} | |")
            continue
        if not f.has_device_code:
            lines.append(f"| {file} | {package} | | no device code | host code only | |")
            continue
        for gpu, verdict in item.per_gpu(result.gpus):
            where = f"{gpu.index} ({gpu.capability.capability})"
            runs = verdict.verdict is not VerdictKind.NO
            minimum = verdict.min_driver if runs and verdict.min_driver else ""
            lines.append(
                f"| {file} | {package} | {where} | {_WORD[verdict.verdict]} | {_cell(verdict.reason)} "
                f"| {minimum} |"
            )
    return "\n".join(lines) + "\n"
