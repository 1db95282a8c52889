"""``gpus`` and ``doctor`` verdicts over inspected files: per library, per wheel and for the whole input.

A wheel (or the whole input) runs on a GPU only where every library with device code does: its verdict for a
capability is the worst of its libraries' (``no`` over ``jit`` over ``native``). Files without device code do
not constrain it. The minimum driver of a group is the highest any of its verdicts needs.
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from dataclasses import dataclass, replace

from cudaship.binary.records import FileFormat
from cudaship.inspection.records import ContainerKind, FileReport
from cudaship.inspection.report import InspectReport
from cudaship.knowledge.archs import Arch
from cudaship.knowledge.driver import Driver, driver_key
from cudaship.knowledge.gpus import shown_capabilities
from cudaship.knowledge.runs_on import Verdict, VerdictKind, build_cuda_of, runs_on
from cudaship.knowledge.trains import Train

_RANK = {VerdictKind.NATIVE: 0, VerdictKind.JIT: 1, VerdictKind.NO: 2}


@dataclass(frozen=True)
class CapabilityVerdict:
    """One verdict for one capability."""

    capability: Arch
    verdict: Verdict
    file: str | None = None  #: for a group: the library that decided it (the worst one), None when all agree


@dataclass(frozen=True)
class FileVerdicts:
    """The verdicts of one file, one per capability (empty when it has no device code or was unreadable)."""

    path: str  #: as ``inspect`` names it (a wheel member's path inside the wheel)
    container: str | None  #: the wheel's path, for a wheel member
    platform: str  #: "linux" or "windows" (PE files): which driver minimums apply
    build_cuda: Train | None  #: the CUDA release the file proves it was built with, when it does
    verdicts: tuple[CapabilityVerdict, ...]
    error: str | None = None

    @property
    def has_device_code(self) -> bool:
        return bool(self.verdicts)

    @property
    def label(self) -> str:
        return f"{self.container}!{self.path}" if self.container else self.path


@dataclass(frozen=True)
class GroupVerdicts:
    """A wheel or the whole input: the worst verdict per capability over its libraries with device code."""

    path: str | None  #: the wheel's path; None for the whole input
    files: tuple[str, ...]  #: labels of the libraries with device code it covers
    verdicts: tuple[CapabilityVerdict, ...]
    min_driver: str | None
    min_driver_reason: str | None
    #: what ``path`` is: ``wheel``, ``pt2`` or ``pte`` (a program read as a container); None for the input
    kind: ContainerKind | None = None


@dataclass(frozen=True)
class GpuReport:
    """What ``cudaship gpus`` reports."""

    inputs: tuple[str, ...]
    capabilities: tuple[Arch, ...]
    driver: Driver | None
    files: tuple[FileVerdicts, ...]
    wheels: tuple[GroupVerdicts, ...]
    overall: GroupVerdicts

    @property
    def failed(self) -> tuple[FileVerdicts, ...]:
        return tuple(f for f in self.files if f.error is not None)


def _build_cuda(report: FileReport) -> Train | None:
    inferred = build_cuda_of(report.device_code)
    major = report.linkage.cudart_major if report.linkage else None
    if major is not None and (inferred is None or inferred.major < major):
        return Train(major, 0)
    return inferred


def file_verdicts(
    report: FileReport, capabilities: Sequence[Arch], driver: Driver | None = None
) -> FileVerdicts:
    """Verdicts for one inspected file (none when it carries no device code)."""
    platform = "windows" if report.format is FileFormat.PE else "linux"
    build = _build_cuda(report)
    verdicts: tuple[CapabilityVerdict, ...] = ()
    if report.device_code:
        if driver is not None and driver.platform != platform:
            driver = replace(driver, platform=platform)
        verdicts = tuple(
            CapabilityVerdict(
                cap, runs_on(report.device_code, cap, driver, platform=platform, build_cuda=build)
            )
            for cap in capabilities
        )
    return FileVerdicts(
        path=report.path,
        container=report.container,
        platform=platform,
        build_cuda=build,
        verdicts=verdicts,
        error=report.error,
    )


def _max_driver(verdicts: Iterable[tuple[str, CapabilityVerdict]]) -> tuple[str | None, str | None]:
    best: tuple[str | None, str | None] = (None, None)
    for label, cv in verdicts:
        # a "no" verdict carries a minimum only when the driver given is what stops it: that one counts too
        minimum = cv.verdict.min_driver
        if minimum is None:
            continue
        if best[0] is None or driver_key(minimum) > driver_key(best[0]):
            why = cv.verdict.min_driver_reason or "required"
            if cv.verdict.verdict is VerdictKind.JIT:
                why = f"{why}, to JIT on {cv.capability.capability}"
            best = (minimum, f"{label}: {why}")
    return best


def combine(path: str | None, files: Sequence[FileVerdicts], capabilities: Sequence[Arch]) -> GroupVerdicts:
    """The worst verdict per capability over ``files`` that carry device code."""
    carrying = [f for f in files if f.has_device_code]
    verdicts = []
    for index, cap in enumerate(capabilities):
        if not carrying:
            verdicts.append(
                CapabilityVerdict(cap, Verdict(VerdictKind.NO, None, "no library carries device code"))
            )
            continue
        per_file = [(f.label, f.verdicts[index]) for f in carrying]
        worst_label, worst = max(per_file, key=lambda pair: _RANK[pair[1].verdict.verdict])
        kind = worst.verdict.verdict
        minimum, why = _max_driver(per_file)
        if len(carrying) == 1:
            verdict = Verdict(kind, worst.verdict.entry, worst.verdict.reason, minimum, why)
            verdicts.append(CapabilityVerdict(cap, verdict, worst_label))
            continue
        if kind is VerdictKind.NATIVE:
            reason = f"all {len(carrying)} libraries with device code run natively"
        elif kind is VerdictKind.JIT:
            jitting = [label for label, cv in per_file if cv.verdict.verdict is VerdictKind.JIT]
            reason = (
                f"{_names(jitting)} JIT-compile{'s' if len(jitting) == 1 else ''}: {worst.verdict.reason}"
            )
        else:
            failing = [label for label, cv in per_file if cv.verdict.verdict is VerdictKind.NO]
            reason = f"{_names(failing)}: {worst.verdict.reason}"
        verdicts.append(
            CapabilityVerdict(
                cap,
                Verdict(kind, None, reason, minimum, why),
                None if kind is VerdictKind.NATIVE else worst_label,
            )
        )
    minimum, why = _max_driver((f.label, cv) for f in carrying for cv in f.verdicts)
    return GroupVerdicts(
        path=path,
        files=tuple(f.label for f in carrying),
        verdicts=tuple(verdicts),
        min_driver=minimum,
        min_driver_reason=why,
    )


def _names(labels: Sequence[str]) -> str:
    short = [label.rsplit("!", 1)[-1].rsplit("/", 1)[-1] for label in labels]
    if len(short) <= 2:
        return " and ".join(short)
    return f"{short[0]}, {short[1]} and {len(short) - 2} more"


def gpu_report(
    report: InspectReport,
    *,
    capabilities: Sequence[Arch] | None = None,
    driver: Driver | None = None,
) -> GpuReport:
    """Verdicts for every file of an inspect run, per wheel and overall (default rows: 7.5 to 12.1)."""
    caps = tuple(capabilities) if capabilities is not None else shown_capabilities()
    files = tuple(file_verdicts(f, caps, driver) for f in report.files)
    wheels = []
    for wheel in report.wheels:
        members = [f for f in files if f.container == wheel.path]
        wheels.append(replace(combine(wheel.path, members, caps), kind=wheel.kind))
    return GpuReport(
        inputs=report.inputs,
        capabilities=caps,
        driver=driver,
        files=files,
        wheels=tuple(wheels),
        overall=combine(None, files, caps),
    )
