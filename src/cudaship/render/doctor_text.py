"""``cudaship doctor`` as text: the machine, then each file with each GPU's verdict."""

from __future__ import annotations

from cudaship.analysis.doctor import DoctorReport
from cudaship.knowledge.runs_on import VerdictKind
from cudaship.probe.records import GpuInfo, ProbeResult
from cudaship.words import count

_WORD = {
    VerdictKind.NATIVE: "runs natively",
    VerdictKind.JIT: "runs after JIT",
    VerdictKind.NO: "WILL NOT RUN",
}


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


def render(report: DoctorReport) -> str:
    result = report.probe
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
    return "\n".join(lines) + "\n"
