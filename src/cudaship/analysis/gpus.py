"""``gpus`` and ``doctor`` verdicts over inspected files: per library, per wheel and for the whole input.

A wheel (or the whole input) runs on a GPU only where every library with device code does: its verdict for a
capability is the worst of its libraries' (``no`` over ``jit`` over ``native``). Files without device code do
not constrain it, nor do files whose device code holds no kernel (nothing in it can be launched:
:func:`~cudaship.knowledge.runs_on.kernel_free`; :attr:`FileVerdicts.no_kernels` says so). The minimum driver
of a group is the highest any of its verdicts needs.

Two exceptions, both about libraries that are not all loaded together:

* Variants (:mod:`cudaship.knowledge.variants`: ``libbitsandbytes_cuda118.so`` ... ``_cuda132.so``, one of
  which is loaded) count as one unit whose verdict for a GPU is the *best* of its CUDA variants'; the wheel's
  report says which variant serves which GPU and with which minimum driver.
* A library no other file of the wheel imports (loaded on demand, like torch's ``libtorch_cuda_linalg.so``)
  that does not run on a GPU that the wheel's other libraries run on does not sink the wheel's verdict for
  that GPU: the verdict is the others', and its reason names the library that does not run there.
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from dataclasses import dataclass, replace

from cudaship.analysis.variant_pick import VariantRelease
from cudaship.inspection.report import InspectReport
from cudaship.knowledge.archs import Arch
from cudaship.knowledge.driver import Driver, driver_key
from cudaship.knowledge.gpus import default_capabilities
from cudaship.knowledge.platforms import platform_from_tag
from cudaship.knowledge.runs_on import Verdict, VerdictKind, build_cuda_of, kernel_free, runs_on
from cudaship.knowledge.trains import Train
from cudaship.knowledge.variants import Variant, recognise
from cudaship.records.binary import FileFormat
from cudaship.records.files import ContainerKind, FileReport
from cudaship.words import agree, count

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
    imports: tuple[str, ...] = ()  #: lower-cased base names of the libraries it imports
    #: why a file with device code has no verdicts: its loaded device code holds no kernel, so it restricts
    #: no GPU (``"SASS sm_75 holds no kernel"``); None otherwise
    no_kernels: str | None = None

    @property
    def has_device_code(self) -> bool:
        return bool(self.verdicts)

    @property
    def label(self) -> str:
        return f"{self.container}!{self.path}" if self.container else self.path


@dataclass(frozen=True)
class VariantService:
    """One variant of a group: the GPUs it serves (native or JIT) and the oldest driver it needs."""

    label: str  #: the file's label
    name: str  #: ``cuda128``
    build_cuda: Train | None
    serves: tuple[str, ...]  #: capabilities (``"12.0"``) it runs on
    min_driver: str | None
    min_driver_reason: str | None


@dataclass(frozen=True)
class VariantGroupVerdicts:
    """A group of alternatives in a wheel (``bitsandbytes/libbitsandbytes_*.so``): what each serves."""

    group: str
    variants: tuple[VariantService, ...]


@dataclass(frozen=True)
class GroupVerdicts:
    """A wheel or the whole input: the worst verdict per capability over its libraries with device code
    (variants and on-demand libraries as the module's docstring says)."""

    path: str | None  #: the wheel's path; None for the whole input
    files: tuple[str, ...]  #: labels of the libraries with device code it covers
    verdicts: tuple[CapabilityVerdict, ...]
    min_driver: str | None
    min_driver_reason: str | None
    variant_groups: tuple[VariantGroupVerdicts, ...] = ()
    #: what ``path`` is: ``wheel``, ``pt2`` or ``pte`` (a program read as a container); None for the input
    kind: ContainerKind | None = None
    #: the whole input: how many of the wheels (and programs) read hold the libraries of ``files``
    containers: int = 0


@dataclass(frozen=True)
class GpuReport:
    """What ``cudaship gpus`` reports."""

    inputs: tuple[str, ...]
    capabilities: tuple[Arch, ...]
    driver: Driver | None
    files: tuple[FileVerdicts, ...]
    wheels: tuple[GroupVerdicts, ...]
    overall: GroupVerdicts
    #: the GPUs the user named (``--gpu "RTX 3090"``), as (capability, name); a capability given as a number
    #: has no name here
    asked: tuple[tuple[Arch, str], ...] = ()
    #: ``--require``: the rows (the GPUs asked, else the default ones) under the driver given are required
    required: bool = False
    #: variant wheels among the inputs: per release, which variant each row gets (and whether it runs)
    variants: tuple[VariantRelease, ...] = ()

    @property
    def failed(self) -> tuple[FileVerdicts, ...]:
        return tuple(f for f in self.files if f.error is not None)

    def asked_names(self, capability: Arch) -> tuple[str, ...]:
        """The names the user gave for ``capability`` (``("RTX 3090",)``), in the order given."""
        return tuple(dict.fromkeys(name for cap, name in self.asked if cap == capability.base))

    @property
    def unmet(self) -> tuple[CapabilityVerdict, ...]:
        """With ``--require``: the rows the input as a whole does not run on (every wheel and library with
        device code counted, under the driver given); empty when the requirement holds or none was made."""
        if not self.required:
            return ()
        return tuple(cv for cv in self.overall.verdicts if not cv.verdict.runs)


def _build_cuda(report: FileReport) -> Train | None:
    inferred = build_cuda_of(report.device_code)
    major = report.linkage.cudart_major if report.linkage else None
    if major is not None and (inferred is None or inferred.major < major):
        return Train(major, 0)
    return inferred


def file_verdicts(
    report: FileReport,
    capabilities: Sequence[Arch],
    driver: Driver | None = None,
    *,
    platform: str | None = None,
) -> FileVerdicts:
    """Verdicts for one inspected file (none when it carries no device code); ``platform``: whose driver
    minimums apply (``linux``, ``windows``; default: the file's own, Windows for a PE file)."""
    if platform is None:
        platform = "windows" if report.format is FileFormat.PE else "linux"
    build = _build_cuda(report)
    verdicts: tuple[CapabilityVerdict, ...] = ()
    no_kernels = kernel_free(report.device_code)
    if report.device_code and no_kernels is None:
        if driver is not None and driver.platform != platform:
            driver = replace(driver, platform=platform)
        verdicts = tuple(
            CapabilityVerdict(
                cap, runs_on(report.device_code, cap, driver, platform=platform, build_cuda=build)
            )
            for cap in capabilities
        )
    imports = tuple(
        sorted({imp.library.replace("\\", "/").rsplit("/", 1)[-1].lower() for imp in report.host.imports})
        if report.host is not None
        else ()
    )
    return FileVerdicts(
        path=report.path,
        container=report.container,
        platform=platform,
        build_cuda=build,
        verdicts=verdicts,
        error=report.error,
        imports=imports,
        no_kernels=no_kernels,
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


def combine(
    path: str | None, files: Sequence[FileVerdicts], capabilities: Sequence[Arch], noun: str = "library"
) -> GroupVerdicts:
    """The worst verdict per capability over ``files`` that carry device code (``noun``: what each of
    ``files`` is, in the reasons: ``input`` when some stand for a whole wheel)."""
    carrying = [f for f in files if f.has_device_code]
    verdicts = []
    nothing = "no library carries device code"
    if any(f.no_kernels for f in files):
        nothing = "no library carries device code that holds a kernel"
    for index, cap in enumerate(capabilities):
        if not carrying:
            verdicts.append(CapabilityVerdict(cap, Verdict(VerdictKind.NO, None, nothing)))
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
            reason = (
                f"all {count(len(carrying), noun)} with device code run natively"
                if len(carrying) > 1
                else f"the {noun} with device code runs natively"
            )
        elif kind is VerdictKind.JIT:
            jitting = [label for label, cv in per_file if cv.verdict.verdict is VerdictKind.JIT]
            reason = (
                f"{_names(jitting)} {agree(len(jitting), 'JIT-compiles', 'JIT-compile')}: "
                f"{worst.verdict.reason}"
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


def _best(per_file: Sequence[tuple[str, CapabilityVerdict]]) -> tuple[str, CapabilityVerdict]:
    """The best verdict among alternatives; among equals, the one needing the oldest driver."""

    def key(pair: tuple[str, CapabilityVerdict]) -> tuple[int, tuple[float, ...]]:
        minimum = pair[1].verdict.min_driver
        return (_RANK[pair[1].verdict.verdict], driver_key(minimum) if minimum else ())

    return min(per_file, key=key)


def _variant_unit(
    members: Sequence[FileVerdicts], variants: dict[str, Variant], capabilities: Sequence[Arch]
) -> tuple[FileVerdicts, VariantGroupVerdicts]:
    """A group of variants as one unit (best verdict per capability) and what each variant serves."""
    cuda = [f for f in members if variants[f.path].is_cuda] or list(members)
    group = variants[members[0].path].group
    verdicts = []
    for index, cap in enumerate(capabilities):
        per_file = [(f.label, f.verdicts[index]) for f in cuda]
        label, best = _best(per_file)
        names = {f.label: variants[f.path].label for f in cuda}
        serving = [names[lab] for lab, cv in per_file if cv.verdict.verdict is best.verdict.verdict]
        if best.verdict.verdict is VerdictKind.NO:
            reason = f"no variant of {group} runs: {best.verdict.reason}"
        else:
            shown = ", ".join(serving)
            noun = agree(len(serving), "variant", "variants")
            reason = f"{best.verdict.verdict.value} with the {shown} {noun}"
        verdict = Verdict(
            best.verdict.verdict,
            best.verdict.entry,
            reason,
            best.verdict.min_driver,
            best.verdict.min_driver_reason,
        )
        verdicts.append(CapabilityVerdict(cap, verdict, label))
    unit = FileVerdicts(
        path=group,
        container=members[0].container,
        platform=members[0].platform,
        build_cuda=None,
        verdicts=tuple(verdicts),
        imports=tuple(sorted({i for f in members for i in f.imports})),
    )
    services = []
    for f in sorted(members, key=lambda m: (variants[m.path].train or Train(0, 0), m.path)):
        serves = tuple(cv.capability.capability for cv in f.verdicts if cv.verdict.runs)
        minimum, why = _max_driver((f.label, cv) for cv in f.verdicts)
        services.append(
            VariantService(
                f.label, variants[f.path].label, variants[f.path].train or f.build_cuda, serves, minimum, why
            )
        )
    return unit, VariantGroupVerdicts(group, tuple(services))


def combine_wheel(path: str, files: Sequence[FileVerdicts], capabilities: Sequence[Arch]) -> GroupVerdicts:
    """A wheel's verdicts: variants as one unit each, and on-demand libraries (imported by no other file of
    the wheel) that fail alone on a GPU the others serve leave that GPU's verdict to the others."""
    carrying = [f for f in files if f.has_device_code]
    variants = recognise(f.path for f in carrying)
    units: list[FileVerdicts] = [f for f in carrying if f.path not in variants]
    groups: dict[str, list[FileVerdicts]] = {}
    for f in carrying:
        if f.path in variants:
            groups.setdefault(variants[f.path].group, []).append(f)
    variant_groups = []
    for members in groups.values():
        unit, services = _variant_unit(members, variants, capabilities)
        units.append(unit)
        variant_groups.append(services)
    imported = {name for f in files for name in f.imports}
    on_demand = {
        u.label for u in units if len(units) > 1 and _base(u.path) not in imported and u.path not in groups
    }
    base = combine(path, units, capabilities)
    verdicts = list(base.verdicts)
    for index, cap in enumerate(capabilities):
        failing = [u for u in units if not u.verdicts[index].verdict.runs]
        serving = [u for u in units if u.verdicts[index].verdict.runs]
        if not failing or not serving or any(u.label not in on_demand for u in failing):
            continue
        others = combine(path, serving, [cap]).verdicts[0]
        names = _names([u.label for u in failing])
        if any(_base(u.path) == _base(f.path) for u in failing for f in serving):
            names = ", ".join(u.path for u in failing)  # the same base name serves: say which one fails
        reason = (
            f"{others.verdict.reason}; except {names} (loaded on demand: no other file imports it), "
            f"which does not run here: {failing[0].verdicts[index].verdict.reason}"
        )
        v = others.verdict
        verdicts[index] = CapabilityVerdict(
            cap, Verdict(v.verdict, v.entry, reason, v.min_driver, v.min_driver_reason), failing[0].label
        )
    minimum, why = _max_driver((u.label, cv) for u in units for cv in u.verdicts)
    return GroupVerdicts(
        path=path,
        files=tuple(f.label for f in carrying),
        verdicts=tuple(verdicts),
        min_driver=minimum,
        min_driver_reason=why,
        variant_groups=tuple(variant_groups),
    )


def _base(path: str) -> str:
    return path.replace("\\", "/").rsplit("/", 1)[-1].lower()


def _names(labels: Sequence[str]) -> str:
    short = [label.rsplit("!", 1)[-1].rsplit("/", 1)[-1] for label in labels]
    if len(set(short)) < len(short):  # two _C.pyd: name them by their path in the wheel
        short = [label.rsplit("!", 1)[-1] for label in labels]
    if len(short) <= 2:
        return " and ".join(short)
    return f"{short[0]}, {short[1]} and {len(short) - 2} more"


def gpu_report(
    report: InspectReport,
    *,
    capabilities: Sequence[Arch] | None = None,
    driver: Driver | None = None,
    asked: Sequence[tuple[Arch, str]] = (),
    required: bool = False,
) -> GpuReport:
    """Verdicts for every file of an inspect run, per wheel and overall (default rows: the GPUs of the
    inputs' machines, :func:`input_machines`). ``asked``: the GPU names the user gave, shown in their rows;
    ``required``: ``--require``."""
    caps = tuple(capabilities) if capabilities is not None else default_capabilities(input_machines(report))
    files = tuple(file_verdicts(f, caps, driver) for f in report.files)
    wheels = []
    for wheel in report.wheels:
        members = [f for f in files if f.container == wheel.path]
        wheels.append(replace(combine_wheel(wheel.path, members, caps), kind=wheel.kind))
    loose = [f for f in files if f.container is None]
    units = [_as_unit(w) for w in wheels if w.files] + loose
    holding = [w for w in wheels if w.files]
    noun = "library" if not holding else ("wheel" if len(units) == len(holding) else "input")
    overall = combine(None, units, caps, noun=noun)
    # the whole input covers every library with device code, however many each wheel holds
    libraries = tuple(label for w in holding for label in w.files) + tuple(
        f.label for f in loose if f.has_device_code
    )
    overall = replace(overall, files=libraries, containers=len(holding))
    if len(wheels) == 1 and not [f for f in loose if f.has_device_code]:
        only = wheels[0]
        overall = GroupVerdicts(
            None, only.files, only.verdicts, only.min_driver, only.min_driver_reason, containers=len(holding)
        )
    return GpuReport(
        inputs=report.inputs,
        capabilities=caps,
        driver=driver,
        files=files,
        wheels=tuple(wheels),
        overall=overall,
        asked=tuple(asked),
        required=required,
    )


def input_machines(report: InspectReport) -> tuple[str | None, ...]:
    """The machines the inputs that carry device code are built for: a wheel's from its platform tags
    (``win_amd64`` and ``manylinux_2_28_x86_64``: ``x86_64``), a loose library's from its header; None for
    one that names none (``py3-none-any``, a bare cubin or PTX file)."""
    machines: list[str | None] = []
    for wheel in report.wheels:
        if not any(f.device_code for f in wheel.files):
            continue
        tags = wheel.info.tags if wheel.info is not None else ()
        machines += [platform_from_tag(t.rsplit("-", 1)[-1]).machine for t in tags] or [None]
    for f in report.files:
        if f.container is None and f.device_code:
            machines.append(f.host.machine.value if f.host is not None else None)
    return tuple(dict.fromkeys(machines))


def _as_unit(group: GroupVerdicts) -> FileVerdicts:
    """A wheel's verdicts as one unit of the whole input (its variants and on-demand libraries resolved)."""
    return FileVerdicts(
        path=group.path or "",
        container=None,
        platform="linux",
        build_cuda=None,
        verdicts=group.verdicts,
    )
