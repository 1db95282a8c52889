"""``doctor``: files checked against this machine's GPUs and driver (the probe's result).

Which files are checked (the paths named, else every native file with device code that an installed package
ships) and each GPU's verdict are decided here; :mod:`cudaship.render.doctor` prints.
"""

from __future__ import annotations

import os
from collections.abc import Sequence
from dataclasses import dataclass

from cudaship.analysis.gpus import FileVerdicts, file_verdicts
from cudaship.analysis.variant_here import machine_variants, variant_wheels
from cudaship.analysis.variant_pick import VariantRelease, forced_machine, provider_machine
from cudaship.inspection.walk import inspect_file, inspect_paths
from cudaship.knowledge.runs_on import Verdict
from cudaship.probe.environment import installed_native_files
from cudaship.probe.records import GpuInfo, ProbeResult
from cudaship.records.files import FileReport
from cudaship.records.findings import Status
from cudaship.wheel.records import VariantMetadata


@dataclass(frozen=True)
class Checked:
    """One file checked against this machine's GPUs."""

    verdicts: FileVerdicts
    distribution: str | None = None  #: "torch 2.11.0+cu130" when found by scanning the environment

    def per_gpu(self, gpus: Sequence[GpuInfo]) -> list[tuple[GpuInfo, Verdict]]:
        """Each GPU of the machine with this file's verdict for its capability."""
        by_cap = {cv.capability: cv.verdict for cv in self.verdicts.verdicts}
        return [(gpu, by_cap[gpu.capability]) for gpu in gpus]


@dataclass(frozen=True)
class DoctorReport:
    """What ``doctor`` found: the machine, and the files checked against it."""

    probe: ProbeResult | None  #: None: no driver or no GPU, and ``no_gpu`` says why (nothing was checked)
    checked: tuple[Checked, ...]
    #: native files of installed packages looked at; None when the user named the paths
    scanned: int | None = None
    unreadable: int = 0  #: of those scanned, how many could not be read
    no_gpu: str | None = None  #: why the machine could not be probed (no driver, no GPU): exit 3
    #: variant wheels among the paths: per release, the variant this machine gets and whether it runs here
    variants: tuple[VariantRelease, ...] = ()

    @property
    def scanned_environment(self) -> bool:
        return self.scanned is not None

    @property
    def failed(self) -> tuple[Checked, ...]:
        """Files the user named that could not be read (scanned files that fail are only counted)."""
        if self.scanned_environment:
            return ()
        return tuple(c for c in self.checked if c.verdicts.error is not None)

    @property
    def runs_nowhere(self) -> bool:
        """Some file, or the variant an installer picks here, will not run on some GPU of this machine."""
        return any(
            cv.verdict.status is Status.FAIL for c in self.checked for cv in c.verdicts.verdicts
        ) or any(p.runs is False for r in self.variants for p in r.picks)


def without_gpu(reason: str) -> DoctorReport:
    """The report of a machine with no NVIDIA driver or no GPU: that fact, and no file checked (a verdict
    needs a GPU to be about)."""
    return DoctorReport(None, (), no_gpu=reason)


def check(report: FileReport, result: ProbeResult, distribution: str | None = None) -> Checked:
    caps = sorted({g.capability for g in result.gpus})
    return Checked(file_verdicts(report, caps, result.driver), distribution)


def doctor_paths(
    paths: Sequence[str | os.PathLike[str]], result: ProbeResult, index: VariantMetadata | None = None
) -> DoctorReport:
    """Check the files at ``paths`` (walked and opened as ``inspect`` does) against the probed machine; for
    variant wheels among them (and ``index``, a release's ``*-variants.json``), the variant an installer picks
    here (the NVIDIA provider's view: the highest GPU and the driver's CUDA version, its override variables
    over them) and whether it runs on every GPU here."""
    inspected = inspect_paths(paths)
    variants: tuple[VariantRelease, ...] = ()
    if index is not None or variant_wheels(inspected):
        caps = sorted({g.capability for g in result.gpus})
        cuda = result.driver.cuda
        machine = provider_machine(forced_machine(), caps, (cuda.major, cuda.minor) if cuda else None)
        variants = machine_variants(inspected, machine, caps, result.driver, index)
    return DoctorReport(result, tuple(check(r, result) for r in inspected.files), variants=variants)


def without_gpu_variants(
    paths: Sequence[str | os.PathLike[str]], reason: str, index: VariantMetadata | None = None
) -> DoctorReport:
    """A machine with no NVIDIA driver or no GPU (``reason``): nothing checked, but for variant wheels among
    ``paths`` the variant an installer picks here (none of the provider's values without a driver, so the
    null variant; its override variables stand for the GPU and driver when set, as they do for it)."""
    inspected = inspect_paths(paths)
    variants: tuple[VariantRelease, ...] = ()
    if index is not None or variant_wheels(inspected):
        machine = forced_machine()
        variants = machine_variants(inspected, machine, [], None, index)
    return DoctorReport(None, (), no_gpu=reason, variants=variants)


def doctor_environment(result: ProbeResult) -> DoctorReport:
    """Check every native file with device code that a package installed in this Python ships."""
    checked: list[Checked] = []
    scanned = unreadable = 0
    for item in installed_native_files():
        scanned += 1
        report = inspect_file(item.path, str(item.path))
        if report.error is not None:
            unreadable += 1
            continue
        if report.device_code:
            checked.append(check(report, result, f"{item.distribution} {item.version}"))
    return DoctorReport(result, tuple(checked), scanned=scanned, unreadable=unreadable)
