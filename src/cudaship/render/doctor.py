"""``cudaship doctor``: ``text`` (the machine, then each file with each GPU's verdict) and ``json`` (the
machine and each file's verdict per GPU)."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from cudaship.analysis.doctor import Checked, DoctorReport
from cudaship.knowledge.runs_on import VerdictKind
from cudaship.probe.records import GpuInfo, ProbeResult
from cudaship.render import variant_here
from cudaship.render.jsonify import dumps
from cudaship.render.style import Renderer, Style
from cudaship.words import count, size

SCHEMA_VERSION = 1

_WORD = {
    VerdictKind.NATIVE: "runs natively",
    VerdictKind.JIT: "runs after JIT",
    VerdictKind.NO: "WILL NOT RUN",
}


def _gpu_line(gpu: GpuInfo) -> str:
    generation = gpu.capability.generation
    cap = f"{gpu.capability.capability} ({generation})" if generation else gpu.capability.capability
    memory = f", {size(gpu.memory_bytes)}" if gpu.memory_bytes else ""
    pools = {True: "yes", False: "no (cudaMallocAsync falls back to cudaMalloc)", None: "unknown"}[
        gpu.memory_pools
    ]
    return f"GPU {gpu.index}: {gpu.name}, compute capability {cap}{memory}, memory pools: {pools}"


def _driver_line(result: ProbeResult) -> str:
    drv = result.driver
    version = drv.version or "version not read"
    cuda = f"supports CUDA {drv.cuda.version} and older" if drv.cuda else "CUDA version unknown"
    return f"driver: {version}, {cuda} (read through {', '.join(result.sources)})"


def _header(report: DoctorReport) -> str:
    if report.scanned is None:
        return "will it run here?"
    if not report.checked:
        return (
            f"no installed package carries CUDA device code ({count(report.scanned, 'native file')} scanned)"
        )
    unreadable = f"; {report.unreadable} unreadable" if report.unreadable else ""
    counted = f"{len(report.checked)} of {count(report.scanned, 'native file')}{unreadable}"
    return f"installed packages with device code ({counted}):"


def text(report: DoctorReport, style: Style) -> str:
    result = report.probe
    if result is None:
        head = f"no GPU to check against: {report.no_gpu}\n"
        if report.variants:
            head += "\n" + "\n".join(variant_here.lines(report.variants)).rstrip() + "\n"
        return head
    lines = [_driver_line(result), *(_gpu_line(g) for g in result.gpus)]
    lines += [f"note: {n}" for n in result.notes]
    lines += ["", _header(report)]
    for item in report.checked:
        f = item.verdicts
        lines.append(f"  {f.label}" + (f"  [{item.distribution}]" if item.distribution else ""))
        if f.error is not None:
            lines.append(f"    cannot read: {f.error}")
            continue
        if f.no_kernels:
            lines.append(f"    {f.no_kernels}: nothing to launch, so it restricts no GPU")
            continue
        if not f.has_device_code:
            lines.append("    no device code: nothing to run on the GPU (host code only)")
            continue
        for gpu, verdict in item.per_gpu(result.gpus):
            where = f"GPU {gpu.index} ({gpu.capability.capability})"
            lines.append(f"    {where}: {_WORD[verdict.verdict]}: {verdict.reason}")
            if verdict.verdict is not VerdictKind.NO and verdict.min_driver:
                lines.append(
                    f"      needs driver {verdict.min_driver} or newer ({verdict.min_driver_reason})"
                )
    if report.variants:
        lines += ["", *variant_here.lines(report.variants)]
    return "\n".join(lines).rstrip() + "\n"


def _file(c: Checked, result: ProbeResult) -> dict[str, Any]:
    return {
        "path": c.verdicts.path,
        "container": c.verdicts.container,
        "distribution": c.distribution,
        "device_code": c.verdicts.has_device_code,
        "no_kernels": c.verdicts.no_kernels,
        "error": c.verdicts.error,
        "gpus": [
            {
                "index": gpu.index,
                "capability": gpu.capability.capability,
                "verdict": v.verdict.value,
                "reason": v.reason,
                "entry": v.entry.arch if v.entry else None,
                "min_driver": v.min_driver,
                "min_driver_reason": v.min_driver_reason,
            }
            for gpu, v in (c.per_gpu(result.gpus) if c.verdicts.has_device_code else [])
        ],
    }


def json(report: DoctorReport, style: Style) -> str:
    result = report.probe
    if result is None:  # no driver or no GPU: the fact, with nothing checked
        return dumps(
            {
                "schema": SCHEMA_VERSION,
                "driver": {"version": None, "cuda": None, "sources": []},
                "gpus": [],
                "no_gpu": report.no_gpu,
                "notes": [],
                "scanned_environment": False,
                "files": [],
                "variant_releases": variant_here.to_json(report.variants),
            },
            ascii=False,
        )
    drv = result.driver
    doc = {
        "schema": SCHEMA_VERSION,
        "driver": {
            "version": drv.version,
            "cuda": drv.cuda.version if drv.cuda else None,
            "sources": list(result.sources),
        },
        "gpus": [
            {
                "index": g.index,
                "name": g.name,
                "capability": g.capability.capability,
                "generation": g.capability.generation,
                "memory_bytes": g.memory_bytes,
                "memory_pools": g.memory_pools,
            }
            for g in result.gpus
        ],
        "no_gpu": None,
        "notes": list(result.notes),
        "scanned_environment": report.scanned_environment,
        "files": [_file(c, result) for c in report.checked],
        "variant_releases": variant_here.to_json(report.variants),
    }
    return dumps(doc, ascii=False)


FORMATS: Mapping[str, Renderer[DoctorReport]] = {"text": text, "json": json}
