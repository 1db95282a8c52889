"""Which variant of a release an installer picks on a machine, and whether it runs there: the variant sections
of ``gpus`` (each GPU row, under the driver given or every driver) and ``doctor`` (this machine as the NVIDIA
provider sees it).

The pick is :func:`cudaship.analysis.variant_pick.pick` (the provider's values and PEP 825's ordering, as
``variant release`` decides it); whether the picked wheel runs is ``gpus``' own verdict for that GPU under
that driver (:func:`cudaship.analysis.gpus.file_verdicts` over the wheel's libraries,
combined as for the wheel).
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import replace

from cudaship.analysis.gpus import GpuReport, combine_wheel, file_verdicts
from cudaship.analysis.variant_pick import (
    ProviderMachine,
    VariantPick,
    VariantRelease,
    default_drivers,
    pick,
    release_variants,
)
from cudaship.errors import WheelError
from cudaship.inspection.report import InspectReport, WheelReport
from cudaship.knowledge.arch_names import Arch
from cudaship.knowledge.driver import Driver
from cudaship.knowledge.trains import Train
from cudaship.knowledge.variant_provider import cuda_text
from cudaship.wheel.records import VariantMetadata


def variant_wheels(report: InspectReport) -> list[WheelReport]:
    """The variant wheels of an inspect run; a malformed variant is a WheelError naming the wheel."""
    for wheel in report.wheels:
        if wheel.variant_error is not None:
            raise WheelError(wheel.variant_error)
    return [w for w in report.wheels if w.variant is not None]


def _releases(
    wheels: Sequence[WheelReport], index: VariantMetadata | None
) -> list[tuple[str, list[WheelReport], VariantMetadata | None]]:
    groups: dict[str, list[WheelReport]] = {}
    for w in wheels:
        name = f"{w.info.name} {w.info.version}" if w.info is not None else w.path
        groups.setdefault(name, []).append(w)
    if not groups and index is not None:
        return [(index.source, [], index)]
    # the index is the release's: with one release, that one; else the release its file name starts with
    out = []
    for name, members in groups.items():
        stem = name.replace(" ", "-").lower()
        mine = (
            index
            if index is not None and (len(groups) == 1 or _stem(index.source).startswith(stem))
            else None
        )
        out.append((name, members, mine))
    return out


def _stem(source: str) -> str:
    return source.replace("\\", "/").rsplit("/", 1)[-1].lower().replace("_", "-")


def _judge(report: InspectReport, wheel: WheelReport, cap: Arch, driver: Driver | None) -> tuple[bool, str]:
    members = [f for f in report.files if f.container == wheel.path]
    verdicts = [file_verdicts(f, [cap], driver) for f in members]
    group = combine_wheel(wheel.path, verdicts, [cap])
    if not group.files:
        return True, "no library with device code"
    verdict = group.verdicts[0].verdict
    return verdict.runs, verdict.reason


def _driver(cuda: tuple[int, int] | None) -> Driver | None:
    return Driver(None, Train(*cuda)) if cuda is not None else None


def _one(
    report: InspectReport,
    variants: Sequence[WheelReport],
    index: VariantMetadata | None,
    cap: Arch,
    cuda: tuple[int, int] | None,
    driver: Driver | None,
    runs_from: dict[tuple[str, Arch], str] | None = None,
) -> VariantPick:
    descriptions, priorities = release_variants([w.variant for w in variants if w.variant], index)
    cuda_shown = cuda_text(cuda) if cuda is not None else None
    best = pick(descriptions, priorities, cap, cuda) if priorities is not None else None
    if best is None:
        return VariantPick(
            cap.capability, cuda_shown, None, None, None, None, "no variant fits and no null variant"
        )
    wheel = next((w for w in variants if w.variant is not None and w.variant.label == best.label), None)
    name = wheel.path if wheel is not None else None
    if best.is_null:
        return VariantPick(
            cap.capability, cuda_shown, None, best.label, name, None, "no variant fits: the null variant"
        )
    if wheel is None:
        return VariantPick(
            cap.capability, cuda_shown, None, best.label, None, None, "its wheel was not given"
        )
    known = runs_from.get((wheel.path, cap)) if runs_from is not None else None
    if known is not None:
        return VariantPick(cap.capability, cuda_shown, None, best.label, name, True, known)
    ok, why = _judge(report, wheel, cap, driver)
    if ok and runs_from is not None:
        runs_from[(wheel.path, cap)] = why
    return VariantPick(cap.capability, cuda_shown, None, best.label, name, ok, why)


def gpus_variants(
    report: InspectReport,
    capabilities: Sequence[Arch],
    driver: Driver | None,
    index: VariantMetadata | None = None,
) -> tuple[VariantRelease, ...]:
    """``gpus``: for each release among the inputs' variant wheels (and the index), the variant each GPU row
    gets: under ``driver`` when given (one pick per row), else under every CUDA version a driver may report
    (from 11.0), consecutive drivers that get the same variant and the same verdict as one range."""
    out = []
    for name, wheels, idx in _releases(variant_wheels(report), index):
        labels, _ = release_variants([w.variant for w in wheels if w.variant], idx)
        picks: list[VariantPick] = []
        for cap in capabilities:
            if driver is not None:
                cuda = (driver.cuda.major, driver.cuda.minor) if driver.cuda is not None else None
                picks.append(_one(report, wheels, idx, cap, cuda, driver))
                continue
            row: list[VariantPick] = []
            # drivers in ascending order: a wheel that runs with one runs with every newer one (drivers run
            # the code and runtimes of older CUDA releases), so it is judged once per GPU from there on
            runs_from: dict[tuple[str, Arch], str] = {}
            for cuda in default_drivers():
                p = _one(report, wheels, idx, cap, cuda, _driver(cuda), runs_from)
                last = row[-1] if row else None
                if last is not None and (last.label, last.runs, last.reason) == (p.label, p.runs, p.reason):
                    row[-1] = VariantPick(
                        last.capability, last.cuda, p.cuda, last.label, last.wheel, last.runs, last.reason
                    )
                else:
                    row.append(p)
            picks += row
        out.append(
            VariantRelease(
                name, tuple(d.label for d in labels), idx.source if idx else None, None, tuple(picks)
            )
        )
    return tuple(out)


def machine_variants(
    report: InspectReport,
    machine: ProviderMachine,
    capabilities: Sequence[Arch],
    driver: Driver | None,
    index: VariantMetadata | None = None,
) -> tuple[VariantRelease, ...]:
    """``doctor``: for each release, the variant this machine gets (``machine``: what the provider sees) and
    whether it runs on every GPU here (``capabilities``, with ``driver``; the forced capability and CUDA
    version when the provider's override variables set them)."""
    out = []
    for name, wheels, idx in _releases(variant_wheels(report), index):
        labels, priorities = release_variants([w.variant for w in wheels if w.variant], idx)
        cap = machine.capability
        if cap is None or machine.cuda is None:
            # the provider reports no nvidia value: only a variant without nvidia properties fits
            best = pick(labels, priorities, None, None) if priorities is not None else None
            label = best.label if best is not None else None
            wheel = next((w.path for w in wheels if w.variant and w.variant.label == label), None)
            why = "no NVIDIA driver or GPU here: the provider reports nothing, " + (
                "so the null variant is installed" if label is not None else "and there is no null variant"
            )
            picks: tuple[VariantPick, ...] = (VariantPick("-", None, None, label, wheel, None, why),)
        else:
            judged = (
                [cap] if machine.forced and machine.capability is not None else list(capabilities) or [cap]
            )
            if machine.cuda is not None and (driver is None or driver.cuda is None or machine.forced):
                driver = _driver(machine.cuda)
            first = _one(report, wheels, idx, cap, machine.cuda, driver)
            picks_list = [first]
            if first.runs is not None:
                for other in judged:
                    if other.base == cap.base:
                        continue
                    # the provider looks at the highest GPU only; the variant it picks runs on every GPU here
                    chosen = next(w for w in wheels if w.path == first.wheel)
                    ok, why = _judge(report, chosen, other, driver)
                    picks_list.append(
                        VariantPick(other.capability, first.cuda, None, first.label, first.wheel, ok, why)
                    )
            picks = tuple(picks_list)
        out.append(
            VariantRelease(
                name, tuple(d.label for d in labels), idx.source if idx else None, machine.text, picks
            )
        )
    return tuple(out)


def with_variants(gpu: GpuReport, report: InspectReport, index: VariantMetadata | None = None) -> GpuReport:
    """``gpu`` with its variant sections, when the inputs hold variant wheels (or ``index`` is given)."""
    if index is None and not variant_wheels(report):
        return gpu
    return replace(gpu, variants=gpus_variants(report, gpu.capabilities, gpu.driver, index))
