"""``cudaship gpus`` for people: ``text`` (per wheel, and for the whole input, a verdict per GPU generation,
then a library-by-capability grid), ``markdown`` (for a pull-request comment or a job summary) and ``html``
(one self-contained page, no scripts, no external files: a heatmap of libraries by compute capability,
coloured native / jit / no, each cell's reason as its tooltip). ``json`` is :mod:`cudaship.render.gpus_json`.
"""

from __future__ import annotations

from collections.abc import Mapping
from html import escape

from cudaship.analysis.gpus import CapabilityVerdict, FileVerdicts, GpuReport, GroupVerdicts
from cudaship.knowledge.gpus import group_for
from cudaship.knowledge.runs_on import VerdictKind
from cudaship.render import gpus_json, variant_here
from cudaship.render.escape import markdown_cell as cell
from cudaship.render.style import Renderer, Style
from cudaship.words import agree, count

SYMBOL = {VerdictKind.NATIVE: "N", VerdictKind.JIT: "J", VerdictKind.NO: "-"}
LEGEND = "N native SASS · J JIT from PTX (first launch compiles) · - does not run"


def gpu_label(cv: CapabilityVerdict, report: GpuReport | None = None) -> str:
    """``8.6 Ampere (A10G, A10)``; the names the user asked for instead of the examples when there are any
    (``--gpu "RTX 3090"``: ``8.6 Ampere (RTX 3090)``)."""
    group = group_for(cv.capability)
    asked = report.asked_names(cv.capability) if report is not None else ()
    if not asked:
        return group.label if group else cv.capability.capability
    head = cv.capability.capability
    if group is not None and group.generation:
        head = f"{head} {group.generation}"
    return f"{head} ({', '.join(asked)})"


def requirement_lines(report: GpuReport) -> list[str]:
    """With ``--require``: whether every row runs the input, naming each that does not."""
    if not report.required:
        return []
    unmet = report.unmet
    total = len(report.overall.verdicts)
    gpus = count(total, "GPU")
    driver = f" with driver {report.driver.describe()}" if report.driver is not None else ""
    if not unmet:
        where = "the GPU" if total == 1 else f"all {gpus}"
        return [f"required (--require): met: the input runs on {where} asked{driver}"]
    which = "the GPU" if total == 1 else f"{len(unmet)} of the {gpus}"
    lines = [f"required (--require): NOT met: {which} asked cannot run the input{driver}"]
    lines.extend(f"  {gpu_label(cv, report)}: {cv.verdict.reason}" for cv in unmet)
    return lines


def groups_to_show(report: GpuReport) -> list[tuple[str, GroupVerdicts]]:
    """Each wheel, then the whole input when it is not just that one wheel."""
    shown = [(f"{w.kind.noun if w.kind else 'wheel'} {w.path}", w) for w in report.wheels]
    loose = [f for f in report.files if f.container is None and f.has_device_code]
    if len(report.wheels) != 1 or loose:
        shown.append(("all inputs", report.overall))
    return shown


def driver_line(report: GpuReport) -> str:
    if report.driver is None:
        return "driver: not given (verdicts hold for a new enough driver; see minimum driver)"
    return f"driver: {report.driver.describe()}"


def min_driver_line(group: GroupVerdicts) -> str:
    if group.min_driver is None:
        return "minimum driver: no requirement found"
    return f"minimum driver: {group.min_driver} ({group.min_driver_reason})"


def _text_group(title: str, group: GroupVerdicts, report: GpuReport) -> list[str]:
    where = ""
    if group.path is None and group.containers > 1:
        nouns = {w.kind.noun if w.kind else "wheel" for w in report.wheels if w.files}
        where = f" in {count(group.containers, nouns.pop() if len(nouns) == 1 else 'container')}"
    lines = [f"{title}: {count(len(group.files), 'library')} with device code{where}"]
    labels = [gpu_label(cv, report) for cv in group.verdicts]
    width = max((len(label) for label in labels), default=10)
    for label, cv in zip(labels, group.verdicts, strict=True):
        lines.append(f"  {label:<{width}}  {cv.verdict.verdict.value:<6}  {cv.verdict.reason}")
    lines.append(f"  {min_driver_line(group)}")
    lines.extend(variant_lines(group))
    return lines


def variant_lines(group: GroupVerdicts) -> list[str]:
    """Per group of alternatives: each variant, the GPUs it runs on and the oldest driver it needs."""
    lines: list[str] = []
    for vg in group.variant_groups:
        lines.append(f"  variants {vg.group} (one is loaded at run time):")
        width = max(len(v.name) for v in vg.variants)
        for v in vg.variants:
            cuda = f"CUDA {v.build_cuda.version}" if v.build_cuda else "CUDA ?"
            gpus = " ".join(v.serves) or "no GPU"
            driver = f"driver >= {v.min_driver}" if v.min_driver else "any driver"
            lines.append(f"    {v.name:<{width}}  {cuda:<9}  {driver:<22}  GPUs {gpus}")
    return lines


def short_label(report: GpuReport, f: FileVerdicts) -> str:
    """A wheel member by its path in the wheel (after the wheel file name when there are several)."""
    if f.container is None:
        return f.path
    if len(report.wheels) > 1:
        return f"{f.container.replace(chr(92), '/').rsplit('/', 1)[-1]}!{f.path}"
    return f.path


def _grid(report: GpuReport, files: list[FileVerdicts]) -> list[str]:
    caps = [c.capability for c in report.capabilities]
    names = [short_label(report, f) for f in files]
    width = max(len(n) for n in names)
    head = " ".join(f"{c:>4}" for c in caps)
    lines = [f"  {'library':<{width}}  {head}"]
    for name, f in zip(names, files, strict=True):
        cells = " ".join(f"{SYMBOL[cv.verdict.verdict]:>4}" for cv in f.verdicts)
        lines.append(f"  {name:<{width}}  {cells}")
    lines.append(f"  {LEGEND}")
    return lines


def text(report: GpuReport, style: Style) -> str:
    lines = [f"cudaship gpus: {' '.join(report.inputs)}", driver_line(report), ""]
    carrying = [f for f in report.files if f.has_device_code]
    if not carrying:
        lines.append("no library with device code: nothing runs on a GPU")
    else:
        for title, group in groups_to_show(report):
            lines.extend(_text_group(title, group, report))
            lines.append("")
        lines.append("per library:")
        lines.extend(_grid(report, carrying))
    without = [f for f in report.files if not f.has_device_code and f.error is None and not f.no_kernels]
    empty = [f for f in report.files if f.no_kernels and f.error is None]
    if without or empty:
        lines.append("")
    if without:
        lines.append(
            f"{count(len(without), 'file')} without device code "
            f"({agree(len(without), 'it does', 'they do')} not limit the GPUs)"
        )
    if empty:
        lines.append(
            f"{count(len(empty), 'file')} whose device code holds no kernel "
            f"({agree(len(empty), 'it does', 'they do')} not limit the GPUs):"
        )
        lines.extend(f"  {short_label(report, f)}: {f.no_kernels}, nothing to launch" for f in empty)
    for failed in report.failed:
        lines.append(f"error: {failed.label}: {failed.error}")
    if report.variants:
        lines.extend(["", *variant_here.lines(report.variants)])
    required = requirement_lines(report)
    if required:
        lines.extend(["", *required])
    return "\n".join(lines).rstrip() + "\n"


EMOJI = {VerdictKind.NATIVE: "🟢 native", VerdictKind.JIT: "🟡 jit", VerdictKind.NO: "🔴 no"}


def _markdown_group(title: str, group: GroupVerdicts, report: GpuReport) -> list[str]:
    lines = [f"### {cell(title)}", "", "| GPU | verdict | why |", "|---|---|---|"]
    for cv in group.verdicts:
        lines.append(
            f"| {cell(gpu_label(cv, report))} | {EMOJI[cv.verdict.verdict]} | {cell(cv.verdict.reason)} |"
        )
    lines += ["", f"**{cell(min_driver_line(group))}**", ""]
    for vg in group.variant_groups:
        lines += [f"Variants `{cell(vg.group)}` (one is loaded at run time):", ""]
        lines += ["| variant | CUDA | minimum driver | GPUs |", "|---|---|---|---|"]
        for v in vg.variants:
            cuda = v.build_cuda.version if v.build_cuda else "?"
            lines.append(
                f"| {cell(v.name)} | {cuda} | {v.min_driver or 'any'} | {' '.join(v.serves) or 'none'} |"
            )
        lines.append("")
    return lines


def markdown(report: GpuReport, style: Style) -> str:
    lines = ["## cudaship gpus", "", f"Inputs: `{'`, `'.join(report.inputs)}` · {driver_line(report)}", ""]
    carrying = [f for f in report.files if f.has_device_code]
    if not carrying:
        lines.append("No library with device code: nothing runs on a GPU.")
        lines.extend(f"\n**{cell(line.strip())}**" for line in requirement_lines(report))
        return "\n".join(lines) + "\n"
    for title, group in groups_to_show(report):
        lines.extend(_markdown_group(title, group, report))
    caps = [c.capability for c in report.capabilities]
    lines += ["### Per library", "", "| library | " + " | ".join(caps) + " |", "|---|" + "---|" * len(caps)]
    short = {VerdictKind.NATIVE: "🟢", VerdictKind.JIT: "🟡", VerdictKind.NO: "🔴"}
    for f in carrying:
        cells = " | ".join(short[cv.verdict.verdict] for cv in f.verdicts)
        lines.append(f"| `{cell(short_label(report, f))}` | {cells} |")
    lines += ["", "🟢 native SASS · 🟡 JIT from PTX (first launch compiles) · 🔴 does not run"]
    for failed in report.failed:
        lines.append(f"\n**error:** `{cell(failed.label)}`: {cell(failed.error or '')}")
    lines += variant_here.markdown(report.variants)
    required = requirement_lines(report)
    if required:
        lines += [
            "",
            f"**{cell(required[0])}**",
            *(f"- {cell(line.strip())}" for line in required[1:]),
        ]
    return "\n".join(lines) + "\n"


CSS = """
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


def _html_cell(cv: CapabilityVerdict) -> str:
    verdict = cv.verdict
    tip = verdict.reason
    if verdict.min_driver and verdict.verdict is not VerdictKind.NO:
        tip += f" (minimum driver {verdict.min_driver})"
    kind = verdict.verdict.value  # the CSS class: native, jit or no
    return f'<td class="{kind}" title="{escape(tip)}">{kind}</td>'


def html(report: GpuReport, style: Style) -> str:
    caps = report.capabilities
    head = []
    for cap in caps:
        gpus = group_for(cap)
        names = ", ".join(report.asked_names(cap) or (gpus.names[:2] if gpus else ()))
        head.append(f"<th>{escape(cap.capability)}<small>{escape(names)}</small></th>")
    rows = []
    for title, group in groups_to_show(report):
        cells = "".join(_html_cell(cv) for cv in group.verdicts)
        rows.append(f'<tr class="group"><td class="lib">{escape(title)}</td>{cells}</tr>')
    for f in report.files:
        if f.has_device_code:
            cells = "".join(_html_cell(cv) for cv in f.verdicts)
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
        f"<style>{CSS}</style></head><body>"
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


FORMATS: Mapping[str, Renderer[GpuReport]] = {
    "text": text,
    "json": lambda report, style: gpus_json.render(report),
    "markdown": markdown,
    "html": html,
}
