"""``cudaship gpus --format markdown``: for a pull-request comment or a job summary."""

from __future__ import annotations

from cudaship.analysis.gpus import GpuReport, GroupVerdicts
from cudaship.knowledge.runs_on import VerdictKind
from cudaship.render.gpus_text import (
    driver_line,
    gpu_label,
    groups_to_show,
    min_driver_line,
    requirement_lines,
    short_label,
)

EMOJI = {VerdictKind.NATIVE: "🟢 native", VerdictKind.JIT: "🟡 jit", VerdictKind.NO: "🔴 no"}


def _cell(text: str) -> str:
    return text.replace("|", "\\|").replace("\n", " ")


def _group(title: str, group: GroupVerdicts, report: GpuReport) -> list[str]:
    lines = [f"### {_cell(title)}", "", "| GPU | verdict | why |", "|---|---|---|"]
    for cv in group.verdicts:
        lines.append(
            f"| {_cell(gpu_label(cv, report))} | {EMOJI[cv.verdict.verdict]} | {_cell(cv.verdict.reason)} |"
        )
    lines += ["", f"**{_cell(min_driver_line(group))}**", ""]
    for vg in group.variant_groups:
        lines += [f"Variants `{_cell(vg.group)}` (one is loaded at run time):", ""]
        lines += ["| variant | CUDA | minimum driver | GPUs |", "|---|---|---|---|"]
        for v in vg.variants:
            cuda = v.build_cuda.version if v.build_cuda else "?"
            lines.append(
                f"| {_cell(v.name)} | {cuda} | {v.min_driver or 'any'} | {' '.join(v.serves) or 'none'} |"
            )
        lines.append("")
    return lines


def render(report: GpuReport) -> str:
    lines = ["## cudaship gpus", "", f"Inputs: `{'`, `'.join(report.inputs)}` · {driver_line(report)}", ""]
    carrying = [f for f in report.files if f.has_device_code]
    if not carrying:
        lines.append("No library with device code: nothing runs on a GPU.")
        lines.extend(f"\n**{_cell(line.strip())}**" for line in requirement_lines(report))
        return "\n".join(lines) + "\n"
    for title, group in groups_to_show(report):
        lines.extend(_group(title, group, report))
    caps = [c.capability for c in report.capabilities]
    lines += ["### Per library", "", "| library | " + " | ".join(caps) + " |", "|---|" + "---|" * len(caps)]
    short = {VerdictKind.NATIVE: "🟢", VerdictKind.JIT: "🟡", VerdictKind.NO: "🔴"}
    for f in carrying:
        cells = " | ".join(short[cv.verdict.verdict] for cv in f.verdicts)
        lines.append(f"| `{_cell(short_label(report, f))}` | {cells} |")
    lines += ["", "🟢 native SASS · 🟡 JIT from PTX (first launch compiles) · 🔴 does not run"]
    for failed in report.failed:
        lines.append(f"\n**error:** `{_cell(failed.label)}`: {_cell(failed.error or '')}")
    required = requirement_lines(report)
    if required:
        lines += ["", f"**{_cell(required[0])}**", *(f"- {_cell(line.strip())}" for line in required[1:])]
    return "\n".join(lines) + "\n"
