"""``cudaship gpus`` as text: per wheel (and for the whole input) a verdict per GPU generation, then a
library-by-capability grid."""

from __future__ import annotations

from cudaship.analysis.gpus import CapabilityVerdict, FileVerdicts, GpuReport, GroupVerdicts
from cudaship.knowledge.gpus import group_for
from cudaship.knowledge.runs_on import VerdictKind
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


def _group(title: str, group: GroupVerdicts, report: GpuReport) -> list[str]:
    count = len(group.files)
    lines = [f"{title}: {count} {'library' if count == 1 else 'libraries'} with device code"]
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


def render(report: GpuReport) -> str:
    lines = [f"cudaship gpus: {' '.join(report.inputs)}", driver_line(report), ""]
    carrying = [f for f in report.files if f.has_device_code]
    if not carrying:
        lines.append("no library with device code: nothing runs on a GPU")
    else:
        for title, group in groups_to_show(report):
            lines.extend(_group(title, group, report))
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
    required = requirement_lines(report)
    if required:
        lines.extend(["", *required])
    return "\n".join(lines).rstrip() + "\n"
