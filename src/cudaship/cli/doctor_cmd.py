"""``cudaship doctor [PATH...]``: this machine's GPUs and driver, and whether PATH (or every CUDA-carrying
package installed in this Python) runs here."""

from __future__ import annotations

import json
from dataclasses import dataclass
from typing import Any

import click

from cudaship.analysis.gpus import FileVerdicts, file_verdicts
from cudaship.cli.common import format_option, output_option
from cudaship.exitcodes import ExitCode
from cudaship.render.output import write_report
from cudaship.inspection.records import FileReport
from cudaship.inspection.walk import inspect_file, inspect_paths
from cudaship.knowledge.runs_on import VerdictKind
from cudaship.probe.environment import installed_native_files
from cudaship.probe.gpus import probe
from cudaship.probe.records import GpuInfo, ProbeResult

SCHEMA_VERSION = 1


@dataclass(frozen=True)
class Checked:
    """One file checked against this machine's GPUs."""

    verdicts: FileVerdicts
    distribution: str | None = None  #: "torch 2.11.0+cu130" when found by scanning the environment


def _gpu_line(gpu: GpuInfo) -> str:
    generation = gpu.capability.generation
    cap = f"{gpu.capability.capability} ({generation})" if generation else gpu.capability.capability
    memory = f", {gpu.memory_bytes / 2**30:.0f} GiB" if gpu.memory_bytes else ""
    pools = {True: "yes", False: "no (cudaMallocAsync falls back to cudaMalloc)", None: "unknown"}[
        gpu.memory_pools
    ]
    return f"GPU {gpu.index}: {gpu.name}, compute capability {cap}{memory}, memory pools: {pools}"


def _driver_line(result: ProbeResult) -> str:
    drv = result.driver
    version = drv.version or "version not read"
    cuda = f"supports CUDA {drv.cuda.version} and older" if drv.cuda else "CUDA version unknown"
    return f"driver: {version}, {cuda} (read through {', '.join(result.sources)})"


def _check(report: FileReport, result: ProbeResult, distribution: str | None) -> Checked:
    caps = sorted({g.capability for g in result.gpus})
    return Checked(file_verdicts(report, caps, result.driver), distribution)


def _scan(result: ProbeResult) -> tuple[list[Checked], int, int]:
    checked: list[Checked] = []
    scanned = unreadable = 0
    for item in installed_native_files():
        scanned += 1
        report = inspect_file(item.path, str(item.path))
        if report.error is not None:
            unreadable += 1
            continue
        if report.device_code:
            checked.append(_check(report, result, f"{item.distribution} {item.version}"))
    return checked, scanned, unreadable


def _per_gpu(checked: Checked, result: ProbeResult) -> list[tuple[GpuInfo, Any]]:
    by_cap = {cv.capability: cv.verdict for cv in checked.verdicts.verdicts}
    return [(gpu, by_cap[gpu.capability]) for gpu in result.gpus]


def _text(result: ProbeResult, checked: list[Checked], header: str) -> str:
    lines = [_driver_line(result), *(_gpu_line(g) for g in result.gpus)]
    lines += [f"note: {n}" for n in result.notes]
    lines += ["", header]
    for item in checked:
        f = item.verdicts
        where = f"  {f.label}" + (f"  [{item.distribution}]" if item.distribution else "")
        lines.append(where)
        if f.error is not None:
            lines.append(f"    cannot read: {f.error}")
            continue
        if not f.has_device_code:
            lines.append("    no device code: nothing to run on the GPU (host code only)")
            continue
        for gpu, verdict in _per_gpu(item, result):
            word = {
                VerdictKind.NATIVE: "runs natively",
                VerdictKind.JIT: "runs after JIT",
                VerdictKind.NO: "WILL NOT RUN",
            }[verdict.verdict]
            lines.append(f"    GPU {gpu.index} ({gpu.capability.capability}): {word}: {verdict.reason}")
            if verdict.verdict is not VerdictKind.NO and verdict.min_driver:
                lines.append(
                    f"      needs driver {verdict.min_driver} or newer ({verdict.min_driver_reason})"
                )
    return "\n".join(lines) + "\n"


def _json(result: ProbeResult, checked: list[Checked], scanned: int | None) -> str:
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
        "notes": list(result.notes),
        "scanned_environment": scanned is not None,
        "files": [
            {
                "path": c.verdicts.path,
                "container": c.verdicts.container,
                "distribution": c.distribution,
                "device_code": c.verdicts.has_device_code,
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
                    for gpu, v in (_per_gpu(c, result) if c.verdicts.has_device_code else [])
                ],
            }
            for c in checked
        ],
    }
    return json.dumps(doc, indent=2, ensure_ascii=False) + "\n"


@click.command("doctor")
@click.argument("paths", nargs=-1, type=click.Path(path_type=str))
@format_option(["text", "json"])
@output_option()
def command(paths: tuple[str, ...], fmt: str, output: str | None) -> int:
    """Show this machine's GPUs and driver, and whether each PATH will run here.

    For each GPU: its name, compute capability, memory and whether it supports memory pools
    (cudaMallocAsync); the driver version and the newest CUDA it supports. Read through the CUDA driver API
    (libcuda.so.1 / nvcuda.dll) and NVML; PyTorch is not needed. Without PATH, every native library of the
    packages installed in this Python that carries device code is checked.

    Exit status: 0 everything runs here; 1 something will not run on a GPU here; 2 a PATH could not be read;
    3 no NVIDIA driver or no GPU on this machine.
    """
    result = probe()
    scanned: int | None = None
    if paths:
        inspected = inspect_paths(paths)
        checked = [_check(r, result, None) for r in inspected.files]
        header = "will it run here?"
    else:
        checked, scanned, unreadable = _scan(result)
        header = (
            f"installed packages with device code ({len(checked)} of {scanned} native files"
            + (f"; {unreadable} unreadable" if unreadable else "")
            + "):"
        )
        if not checked:
            header = f"no installed package carries CUDA device code ({scanned} native files scanned)"
    text = _json(result, checked, scanned) if fmt.lower() == "json" else _text(result, checked, header)
    write_report(text, output)
    for item in checked:
        if item.verdicts.error is not None and paths:
            click.echo(f"cudaship: error: {item.verdicts.label}: {item.verdicts.error}", err=True)
    if paths and any(c.verdicts.error is not None for c in checked):
        return int(ExitCode.BAD_INPUT)
    runs_nowhere = any(cv.verdict.verdict is VerdictKind.NO for c in checked for cv in c.verdicts.verdicts)
    return int(ExitCode.FINDINGS if runs_nowhere else ExitCode.OK)
