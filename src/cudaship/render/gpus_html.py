"""``cudaship gpus --format html``: one self-contained page (no scripts, no external files) with a heatmap of
libraries by compute capability, coloured native / jit / no, each cell's reason as its tooltip."""

from __future__ import annotations

from html import escape

from cudaship.analysis.gpus import CapabilityVerdict, GpuReport
from cudaship.knowledge.gpus import group_for
from cudaship.knowledge.runs_on import VerdictKind
from cudaship.render.gpus_text import (
    driver_line,
    groups_to_show,
    min_driver_line,
    requirement_lines,
    short_label,
)

STYLE = """
body { font-family: system-ui, sans-serif; margin: 2em; color: #222; }
h1 { font-size: 1.4em; } h2 { font-size: 1.1em; margin-top: 2em; }
table.heat { border-collapse: collapse; font-size: 0.9em; }
table.heat th, table.heat td { border: 1px solid #fff; padding: 0.35em 0.6em; text-align: center; }
table.heat th.lib, table.heat td.lib { text-align: left; font-family: ui-monospace, monospace; }
table.heat thead th { background: #eee; vertical-align: bottom; }
table.heat thead th small { display: block; font-weight: normal; color: #555; }
tr.group td.lib { font-weight: bold; }
td.native { background: #2e9d4a; color: #fff; }
td.jit { background: #f0b429; color: #222; }
td.no { background: #d64545; color: #fff; }
.legend span { display: inline-block; padding: 0.2em 0.6em; margin-right: 0.5em; }
p.meta { color: #555; }
"""


def _cell(cv: CapabilityVerdict) -> str:
    verdict = cv.verdict
    tip = verdict.reason
    if verdict.min_driver and verdict.verdict is not VerdictKind.NO:
        tip += f" (minimum driver {verdict.min_driver})"
    kind = verdict.verdict.value  # the CSS class: native, jit or no
    return f'<td class="{kind}" title="{escape(tip)}">{kind}</td>'


def render(report: GpuReport) -> str:
    caps = report.capabilities
    head = []
    for cap in caps:
        gpus = group_for(cap)
        names = ", ".join(report.asked_names(cap) or (gpus.names[:2] if gpus else ()))
        head.append(f"<th>{escape(cap.capability)}<small>{escape(names)}</small></th>")
    rows = []
    for title, group in groups_to_show(report):
        cells = "".join(_cell(cv) for cv in group.verdicts)
        rows.append(f'<tr class="group"><td class="lib">{escape(title)}</td>{cells}</tr>')
    for f in report.files:
        if f.has_device_code:
            cells = "".join(_cell(cv) for cv in f.verdicts)
            rows.append(f'<tr><td class="lib">{escape(short_label(report, f))}</td>{cells}</tr>')
    drivers = "".join(
        f"<li>{escape(title)}: {escape(min_driver_line(group))}</li>"
        for title, group in groups_to_show(report)
    )
    variants = "".join(
        f"<li>{escape(vg.group)}: "
        + "; ".join(
            escape(
                f"{v.name} (CUDA {v.build_cuda.version if v.build_cuda else '?'}, "
                f"driver {v.min_driver or 'any'}): {' '.join(v.serves) or 'no GPU'}"
            )
            for v in vg.variants
        )
        + "</li>"
        for _title, group in groups_to_show(report)
        for vg in group.variant_groups
    )
    required = requirement_lines(report)
    errors = "".join(f"<li>{escape(f.label)}: {escape(f.error or '')}</li>" for f in report.failed)
    body = (
        f'<table class="heat"><thead><tr><th class="lib">library</th>{"".join(head)}</tr></thead>'
        f"<tbody>{''.join(rows)}</tbody></table>"
        if rows
        else "<p>No library with device code: nothing runs on a GPU.</p>"
    )
    return (
        "<!DOCTYPE html>\n"
        '<html lang="en"><head><meta charset="utf-8">'
        "<title>cudaship gpus</title>"
        f"<style>{STYLE}</style></head><body>"
        "<h1>Which GPUs it runs on</h1>"
        f'<p class="meta">{escape(" ".join(report.inputs))}<br>{escape(driver_line(report))}</p>'
        f"{body}"
        '<p class="legend"><span class="native" style="background:#2e9d4a;color:#fff">native SASS</span>'
        '<span style="background:#f0b429">jit from PTX (first launch compiles)</span>'
        '<span style="background:#d64545;color:#fff">does not run</span></p>'
        f"<h2>Minimum driver</h2><ul>{drivers}</ul>"
        + (f"<h2>Variants (one is loaded at run time)</h2><ul>{variants}</ul>" if variants else "")
        + (f"<h2>Unreadable files</h2><ul>{errors}</ul>" if errors else "")
        + (
            f"<h2>Requirement</h2><p>{escape(required[0])}</p>"
            + "".join(f"<li>{escape(line.strip())}</li>" for line in required[1:])
            if required
            else ""
        )
        + "</body></html>\n"
    )
