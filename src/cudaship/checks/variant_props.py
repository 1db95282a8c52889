"""variant: a variant wheel's ``nvidia`` properties (``.dist-info/variant.json``) agree with its binaries.

The NVIDIA provider offers a variant to a machine by string-matching its properties against what it reports
(:mod:`cudaship.knowledge.variant_provider`; docs/formats.md section 8, docs/variants.md). Each declared
``nvidia`` property is one check, named ``variant: nvidia :: <feature> :: <value>``:

* a value the provider never reports (``12.8.1``, ``86_virtual``, an unknown feature) matches no machine
  (rule ``value``);
* ``sm_arch :: XY_real``: every library with device code carries SASS holding kernels that runs natively on
  X.Y; ``sm_arch :: X0_virtual``: every such library carries PTX (with kernels) that JITs on X.0; and on
  each GPU the value is offered for (``XY_real``: X.Z with Z >= Y; ``X0_virtual``: every X.Z, from the GPU
  table) every such library runs, natively or by JIT (``sm_100a`` declared as ``100_real`` is offered to a
  10.3 GPU it does not run on) (rule ``sm_arch``);
* ``cuda_version_lower_bound :: V``: V is at least the CUDA version the driver must support on every GPU the
  variant is offered for: what the CUDA runtime each library links needs (its major, by minor-version
  compatibility), what the cubins the driver loads need (their toolkit's major), what PTX the driver JITs
  needs (the release that introduced its ISA: no minor-version compatibility for JIT), and ZSTD-compressed
  entries (the first driver that reads them) (rule ``lower_bound``);
* ``cuda_version_upper_bound :: V``: drivers below V can run the CUDA runtime the libraries link (V above its
  major's first release), and the range from the declared lower bound is not empty (rule ``upper_bound``).

Device code no GPU the variant is offered for uses (SASS for another SM, PTX where every offered GPU runs
SASS) is the note ``variant: device code no machine picks this variant for``, with its size (rule
``unadmitted``). A wheel that is not a variant, or declares no ``nvidia`` property, gets one skipped result
saying so: never a silent pass.

:func:`justified` is the other direction, for ``cudaship variant properties``: the properties the binaries
support.
"""

from __future__ import annotations

import posixpath
from collections.abc import Iterable
from dataclasses import dataclass

from cudaship import words
from cudaship.checks.context import AuditContext
from cudaship.errors import KnowledgeError
from cudaship.knowledge.arch_names import Arch
from cudaship.knowledge.archs import parse_arch, sort_arch_names
from cudaship.knowledge.driver import cuda_for_driver
from cudaship.knowledge.gpus import gpu_groups
from cudaship.knowledge.releases import release_for_ptx_isa, zstd_min_driver
from cudaship.knowledge.runs_on import VerdictKind, build_cuda_of, kernel_free, ptx_runs, runs_on, sass_runs
from cudaship.knowledge.variant_provider import (
    LOWER,
    SM_ARCH,
    UPPER,
    SmValue,
    admits,
    cuda_text,
    cuda_value,
    nvidia,
    sm_value,
    value_problem,
)
from cudaship.records.binary import Compression, DeviceCode, DeviceCodeKind
from cudaship.records.files import FileReport
from cudaship.records.findings import CheckResult, Finding, failed, passed, skipped
from cudaship.wheel.records import VariantProperty
from cudaship.words import count

FAMILY = "variant"
ALL = "variant: nvidia properties"
UNADMITTED = "variant: device code no machine picks this variant for"


# --- facts the checks share -----------------------------------------------------------------------------


def _arch(entry: DeviceCode) -> Arch:
    try:
        return Arch.from_sm(entry.sm, entry.variant)
    except KnowledgeError:
        return parse_arch(entry.arch)


def _loadable(report: FileReport) -> list[DeviceCode]:
    """SASS and PTX loaded at run time that may hold kernels."""
    return [
        e
        for e in report.device_code
        if not e.relocatable and e.kind in (DeviceCodeKind.SASS, DeviceCodeKind.PTX) and e.kernels != 0
    ]


def device_libraries(ctx: AuditContext) -> dict[str, FileReport]:
    """Shared libraries and executables (ELF, PE, Mach-O; not static archives, which are linked, never
    loaded) with device code that holds kernels: what the properties describe. By installed path."""
    return {
        p: r for p, r in sorted(ctx.libraries.items()) if _loadable(r) and kernel_free(r.device_code) is None
    }


def known_capabilities(ctx: AuditContext) -> tuple[Arch, ...]:
    """The capabilities of the GPU table with a GPU on the wheel's machine (all when it names none)."""
    machine = ctx.machine
    return tuple(g.arch for g in gpu_groups() if machine is None or not g.machines or machine in g.machines)


def _size(entries: Iterable[DeviceCode]) -> int:
    return sum(e.uncompressed_size or e.stored_size for e in entries)


def _mb(n: int) -> str:
    return words.size(n)


def _name(path: str) -> str:
    return posixpath.basename(path)


@dataclass(frozen=True)
class Need:
    """What one library needs the driver's CUDA version to be, and why."""

    version: tuple[int, int]
    why: str
    file: str


def _platform(ctx: AuditContext) -> str:
    return "windows" if ctx.os == "windows" else "linux"


def driver_needs(ctx: AuditContext, libs: dict[str, FileReport], caps: Iterable[Arch]) -> list[Need]:
    """Every reason a driver must support some CUDA version, for the GPUs ``caps`` (where the code runs)."""
    needs: list[Need] = []
    caps = tuple(caps)
    for path, report in sorted(ctx.libraries.items()):
        link = report.linkage
        if link is not None and link.cudart_major is not None:
            how = link.runtime.value
            needs.append(
                Need(
                    (link.cudart_major, 0),
                    f"{_name(path)} links the CUDA {link.cudart_major} runtime ({how}), which needs a CUDA "
                    f"{link.cudart_major}.x driver (minor-version compatibility)",
                    path,
                )
            )
    for path, report in libs.items():
        sass_used = False
        for cap in caps:
            v = runs_on(report.device_code, cap, platform=_platform(ctx))
            if not v.runs or v.entry is None:
                continue
            entry = v.entry
            if v.verdict is VerdictKind.JIT and entry.version:
                try:
                    release = release_for_ptx_isa(entry.version)
                except KnowledgeError:
                    release = None
                if release is not None:
                    needs.append(
                        Need(
                            (release.train.major, release.train.minor),
                            f"{entry.arch} PTX ISA {entry.version} in {_name(path)}, JIT on "
                            f"{cap.capability}, "
                            f"needs a driver that knows PTX ISA {entry.version} (CUDA "
                            f"{release.train.version})",
                            path,
                        )
                    )
            elif v.verdict is VerdictKind.NATIVE:
                sass_used = True
            if entry.compression is Compression.ZSTD:
                drv = zstd_min_driver()
                cuda = cuda_for_driver(drv, _platform(ctx))
                if cuda is not None:
                    needs.append(
                        Need(
                            (cuda.major, cuda.minor),
                            f"{entry.arch} in {_name(path)} is ZSTD-compressed: driver {drv} or newer "
                            f"(CUDA {cuda.version})",
                            path,
                        )
                    )
        build = build_cuda_of(report.device_code) if sass_used else None
        if build is not None:
            needs.append(
                Need(
                    (build.major, 0),
                    f"{_name(path)}'s device code is built with CUDA {build.version}: its cubins need a CUDA "
                    f"{build.major}.x driver (minor-version compatibility)",
                    path,
                )
            )
    return needs


def runtime_majors(ctx: AuditContext) -> dict[int, str]:
    """CUDA runtime major → the first library linking it (None found: the device code's build majors)."""
    out: dict[int, str] = {}
    for path, report in sorted(ctx.libraries.items()):
        link = report.linkage
        if link is not None and link.cudart_major is not None:
            out.setdefault(link.cudart_major, f"{_name(path)} links the CUDA {link.cudart_major} runtime")
    if not out:
        for path, report in device_libraries(ctx).items():
            build = build_cuda_of(report.device_code)
            if build is not None:
                out.setdefault(build.major, f"{_name(path)}'s device code is built with CUDA {build.version}")
    return out


# --- the checks -----------------------------------------------------------------------------------------


def run(ctx: AuditContext) -> list[CheckResult]:
    variant = ctx.scan.dist.variant if not ctx.is_program else None
    if variant is None:
        return [
            skipped(
                FAMILY,
                ALL,
                "not a variant wheel: no variant label in the file name and no .dist-info/variant.json",
            )
        ]
    desc = variant.description
    ns = nvidia().namespace
    props = [p for p in desc.properties if p.namespace == ns]
    if not props:
        other = ", ".join(desc.namespaces())
        what = "the null variant" if desc.is_null else f"its properties are of {other} only"
        return [skipped(FAMILY, ALL, f"variant {desc.label} declares no {ns} properties ({what})")]

    results: list[CheckResult] = []
    valid: list[VariantProperty] = []
    for p in props:
        problem = value_problem(p.feature, p.value)
        if problem is None:
            valid.append(p)
        else:
            results.append(
                failed(
                    FAMILY, f"variant: {p.text}", problem, [Finding(problem, version=p.value)], rule="value"
                )
            )
    libs = device_libraries(ctx)
    known = known_capabilities(ctx)
    sm_values = [sv for p in valid if p.feature == SM_ARCH for sv in [sm_value(p.value)] if sv is not None]
    offered = (
        tuple(c for c in known if any(admits(sv, c) for sv in sm_values))
        if any(p.feature == SM_ARCH for p in props)
        else known
    )
    lower_values = [cuda_value(p.value) for p in valid if p.feature == LOWER]
    for p in valid:
        if p.feature == SM_ARCH:
            results.append(_sm_arch(ctx, p, libs, known))
        elif p.feature == LOWER:
            results.append(_lower(ctx, p, libs, offered))
        elif p.feature == UPPER:
            results.append(_upper(ctx, p, [v for v in lower_values if v is not None]))
    if sm_values:
        results.append(_unadmitted(libs, offered, sm_values))
    return results


def _sm_arch(
    ctx: AuditContext, p: VariantProperty, libs: dict[str, FileReport], known: tuple[Arch, ...]
) -> CheckResult:
    name = f"variant: {p.text}"
    sv = sm_value(p.value)
    assert sv is not None
    cap = sv.arch
    if not libs:
        return skipped(
            FAMILY,
            name,
            "no library in the wheel carries device code with kernels: nothing to check it against",
        )
    offered_on = [c for c in known if admits(sv, c)]
    findings: list[Finding] = []
    how: list[str] = []
    for path, report in libs.items():
        loadable = _loadable(report)
        if sv.real:
            sass = [e for e in loadable if e.kind is DeviceCodeKind.SASS]
            native = [e for e in sass if sass_runs(_arch(e), cap)]
            if not native:
                have = " ".join(sort_arch_names({e.arch for e in sass})) or "none"
                empty = sorted(
                    {
                        e.arch
                        for e in report.device_code
                        if e.kind is DeviceCodeKind.SASS and e.kernels == 0 and _arch(e).base == cap
                    }
                )
                extra = f"; {' '.join(empty)} holds no kernel" if empty else ""
                findings.append(
                    Finding(
                        f"{path}: no SASS with kernels runs natively on {cap.capability} (SASS with kernels: "
                        f"{have}{extra})",
                        file=path,
                        arch=f"sm_{cap.sm}",
                    )
                )
                continue
            exact = [e for e in native if _arch(e).base == cap]
            how.append((exact or native)[0].arch)
        else:
            ptx = [e for e in loadable if e.kind is DeviceCodeKind.PTX]
            fits = [e for e in ptx if ptx_runs(_arch(e), cap)]
            if not fits:
                have = " ".join(sort_arch_names({e.arch for e in ptx})) or "none"
                findings.append(
                    Finding(
                        f"{path}: no PTX that JITs on {cap.capability} (PTX: {have})",
                        file=path,
                        arch=f"compute_{cap.sm}",
                    )
                )
                continue
            how.append(max(fits, key=_arch).arch)
        for gpu in offered_on:
            v = runs_on(report.device_code, gpu, platform=_platform(ctx))
            if not v.runs:
                findings.append(
                    Finding(
                        f"{path}: offered to {gpu.capability} GPUs by {p.value}, but does not run there "
                        f"({v.reason})",
                        file=path,
                        arch=f"sm_{gpu.sm}",
                    )
                )
    kind = "SASS" if sv.real else "PTX"
    if findings:
        first = findings[0].message
        more = f" (and {count(len(findings) - 1, 'more finding')})" if len(findings) > 1 else ""
        return failed(FAMILY, name, f"{p.value} does not hold: {first}{more}", findings)
    shown = " ".join(sort_arch_names(set(how)))
    return passed(
        FAMILY,
        name,
        f"{count(len(libs), 'library', 'libraries')} with device code, each with {kind} for {cap.capability} "
        f"({shown}), run on every GPU the value is offered to",
    )


def _lower(
    ctx: AuditContext, p: VariantProperty, libs: dict[str, FileReport], offered: tuple[Arch, ...]
) -> CheckResult:
    name = f"variant: {p.text}"
    declared = cuda_value(p.value)
    assert declared is not None
    needs = driver_needs(ctx, libs, offered)
    if not needs:
        return passed(
            FAMILY, name, "nothing in the wheel needs a particular driver (no CUDA runtime, no device code)"
        )
    top = max(n.version for n in needs)
    above = sorted(
        (n for n in needs if n.version > declared), key=lambda n: (n.version, n.file), reverse=True
    )
    if above:
        worst = above[0]
        findings = [Finding(n.why, file=n.file, version=cuda_text(n.version)) for n in above]
        return failed(
            FAMILY,
            name,
            f"admits drivers for CUDA {p.value}, but the binaries need CUDA {cuda_text(worst.version)}: "
            f"{worst.why}",
            findings,
        )
    why = next(n.why for n in needs if n.version == top)
    return passed(
        FAMILY, name, f"the binaries need CUDA {cuda_text(top)} at most ({why}); declares {p.value}"
    )


def _upper(ctx: AuditContext, p: VariantProperty, lowers: list[tuple[int, int]]) -> CheckResult:
    name = f"variant: {p.text}"
    declared = cuda_value(p.value)
    assert declared is not None
    majors = runtime_majors(ctx)
    findings: list[Finding] = []
    for major, why in sorted(majors.items()):
        if declared <= (major, 0):
            findings.append(
                Finding(
                    f"{why}: it needs a CUDA {major}.x driver, and drivers below CUDA {p.value} are older",
                    version=str(major),
                )
            )
    for lower in lowers:
        if declared <= lower:
            findings.append(
                Finding(
                    f"the lower bound {cuda_text(lower)} is not below the upper bound {p.value}: no driver "
                    "is in "
                    "the range",
                    version=cuda_text(lower),
                )
            )
    if findings:
        return failed(
            FAMILY,
            name,
            f"admits only drivers older than CUDA {p.value}, which cannot run the variant: "
            f"{findings[0].message}",
            findings,
        )
    if not majors:
        return passed(
            FAMILY, name, "no CUDA runtime and no device code: nothing bounds the driver from below"
        )
    shown = "; ".join(majors[m] for m in sorted(majors))
    return passed(
        FAMILY, name, f"drivers below CUDA {p.value} run the CUDA runtime the wheel links ({shown})"
    )


def _unadmitted(
    libs: dict[str, FileReport], offered: tuple[Arch, ...], sm_values: list[SmValue]
) -> CheckResult:
    findings: list[Finding] = []
    total = 0
    for path, report in libs.items():
        loadable = _loadable(report)
        unused = [
            e
            for e in loadable
            if e.kind is DeviceCodeKind.SASS and not any(sass_runs(_arch(e), c) for c in offered)
        ]
        # PTX of a major the variant declares X0_virtual for is what that value stands for: never counted
        virtual = {sv.arch.major for sv in sm_values if not sv.real}
        ptx = [e for e in loadable if e.kind is DeviceCodeKind.PTX and _arch(e).major not in virtual]
        if ptx:
            native_everywhere = all(
                runs_on(report.device_code, c).verdict is VerdictKind.NATIVE for c in offered
            )
            unused += [e for e in ptx if native_everywhere or not any(ptx_runs(_arch(e), c) for c in offered)]
        if not unused:
            continue
        size = _size(unused)
        total += size
        archs = " ".join(sort_arch_names({e.arch for e in unused}))
        findings.append(Finding(f"{path}: {archs} ({_mb(size)})", file=path))
    declared = " ".join(sv.text for sv in sorted(sm_values, key=lambda v: (v.arch, not v.real)))
    if findings:
        return failed(
            FAMILY,
            UNADMITTED,
            f"{_mb(total)} of device code in {count(len(findings), 'library', 'libraries')} runs on no GPU "
            "that "
            f"sm_arch {declared} is offered to (the installer picks another variant there)",
            findings,
        )
    return passed(
        FAMILY, UNADMITTED, f"all device code is used on some GPU that sm_arch {declared} is offered to"
    )


# --- the other direction: what the binaries justify ------------------------------------------------------


@dataclass(frozen=True)
class Justified:
    """One property the binaries support, and why."""

    property: VariantProperty
    why: str


def justified(ctx: AuditContext) -> list[Justified]:
    """The ``nvidia`` properties this wheel's binaries support: ``XY_real`` for each capability every library
    with device code runs natively on (its SASS archs), ``X0_virtual`` for each major every such library has
    PTX of that JITs on X.0, the lower bound the drivers of those GPUs need, and the upper bound the next
    major of the CUDA runtime linked. Empty when nothing in the wheel is CUDA."""
    ns = nvidia().namespace
    libs = device_libraries(ctx)
    out: list[Justified] = []
    sm_values: list[SmValue] = []
    if libs:
        candidates = sorted(
            {_arch(e).base for r in libs.values() for e in _loadable(r) if e.kind is DeviceCodeKind.SASS}
        )
        for cap in candidates:
            if all(
                any(sass_runs(_arch(e), cap) for e in _loadable(r) if e.kind is DeviceCodeKind.SASS)
                for r in libs.values()
            ):
                sv = SmValue(cap, True)
                sm_values.append(sv)
                out.append(
                    Justified(
                        VariantProperty(ns, SM_ARCH, sv.text),
                        f"every library with device code ({len(libs)}) carries SASS that runs natively on "
                        f"{cap.capability}",
                    )
                )
        majors = sorted(
            {_arch(e).major for r in libs.values() for e in _loadable(r) if e.kind is DeviceCodeKind.PTX}
        )
        for major in majors:
            base = Arch(major, 0)
            if all(
                any(
                    ptx_runs(_arch(e), base) and _arch(e).major == major
                    for e in _loadable(r)
                    if e.kind is DeviceCodeKind.PTX
                )
                for r in libs.values()
            ):
                sv = SmValue(base, False)
                sm_values.append(sv)
                out.append(
                    Justified(
                        VariantProperty(ns, SM_ARCH, sv.text),
                        f"every library with device code carries {major}.x PTX that JITs on {major}.0",
                    )
                )
    known = known_capabilities(ctx)
    offered = tuple(c for c in known if any(admits(sv, c) for sv in sm_values)) if sm_values else known
    needs = driver_needs(ctx, libs, offered)
    if needs:
        top = max(needs, key=lambda n: n.version)
        out.insert(0, Justified(VariantProperty(ns, LOWER, cuda_text(top.version)), top.why))
    majors_rt = runtime_majors(ctx)
    if majors_rt:
        major = max(majors_rt)
        out.insert(
            1 if needs else 0,
            Justified(
                VariantProperty(ns, UPPER, str(major + 1)),
                f"{majors_rt[major]}: the variant for CUDA {major}.x drivers (a CUDA {major + 1} driver gets "
                f"the CUDA {major + 1} variant)",
            ),
        )
    return out


@dataclass(frozen=True)
class PropertiesReport:
    """``cudaship variant properties``: what one wheel's binaries justify, and what it declares."""

    wheel: str  #: file name
    label: str | None  #: the variant label, when the wheel is a variant
    justified: tuple[Justified, ...]
    declared: tuple[str, ...]  #: the declared properties (``ns :: feature :: value``), none for a plain wheel


def properties_report(ctx: AuditContext) -> PropertiesReport:
    variant = ctx.scan.dist.variant if not ctx.is_program else None
    declared = tuple(p.text for p in variant.description.properties) if variant is not None else ()
    return PropertiesReport(
        ctx.scan.filename, variant.label if variant is not None else None, tuple(justified(ctx)), declared
    )
