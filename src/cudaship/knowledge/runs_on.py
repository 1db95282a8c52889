"""The runs-on rule: will this device code run on a GPU of capability X.Y, with this driver?

Given the device code entries of one library, :func:`runs_on` decides as the CUDA driver does at load time:

* **native**: a SASS entry the GPU executes. Plain ``sm_XY`` runs on ``X.z`` with ``z >= Y`` (never across
  majors); ``sm_XYa`` only on exactly ``X.Y``; ``sm_XYf`` within its family (same major, ``z >= Y``).
* **jit**: no SASS fits but a PTX entry does: ``compute_XY`` on any capability ``>= X.Y`` of any major
  (``a`` / ``f`` PTX as for SASS), if the driver knows its PTX ISA version. The first launch compiles.
* **no**, with the reason: no SASS of that major, an 'a' entry for another GPU, an 'f' entry outside its
  family, PTX newer than the GPU, PTX newer than the driver knows, ZSTD-compressed entries on a driver too old
  for them, a CUDA major newer than the driver.

Entries in relocatable fatbins (``-rdc``, linked, never loaded), LTO-IR and unknown entry kinds never count,
nor do entries known to hold no kernel (``DeviceCode.kernels == 0``: a cubin without a function marked as a
kernel, PTX without ``.entry``): nothing in them can be launched, so no GPU is refused for want of them. A
library whose loadable device code all holds no kernel runs on every GPU as far as device code goes
(:func:`kernel_free`).
The facts come from data/releases.toml, whose comments give their sources (NVIDIA's CUDA Toolkit release
notes, the PTX ISA release history and the CUDA Compatibility guide); see docs/knowledge.md.
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from dataclasses import dataclass, replace
from enum import Enum

from cudaship.errors import KnowledgeError
from cudaship.knowledge.archs import Arch, parse_arch
from cudaship.knowledge.driver import Driver, driver_key, parse_driver
from cudaship.knowledge.releases import (
    Release,
    isa_tuple,
    minor_compat_floor,
    release_for_ptx_isa,
    zstd_min_driver,
)
from cudaship.knowledge.trains import Train, as_train, parse_train
from cudaship.records.binary import Compression, DeviceCode, DeviceCodeKind
from cudaship.records.findings import Status
from cudaship.words import agree


class VerdictKind(str, Enum):
    NATIVE = "native"
    JIT = "jit"
    NO = "no"


@dataclass(frozen=True)
class Verdict:
    """What :func:`runs_on` decided: one library on one GPU capability, native, JIT or not at all. Not a
    finding (a :class:`~cudaship.records.findings.CheckResult`): ``gpus`` prints a table of these, ``doctor``
    one per file and GPU, and the checks that judge them (``archs``, ``program check``'s ``arch`` and
    ``driver``, ``doctor --env``'s ``device-code``) turn a ``no`` into a finding.

    ``entry`` is the SASS (native) or PTX (jit) entry the driver would load, None for ``no``.
    ``min_driver`` is the oldest driver this verdict holds for (``"580.65.06"``, ``"r595 branch"``), None
    when nothing requires more than any driver; ``min_driver_reason`` says why.
    """

    verdict: VerdictKind
    entry: DeviceCode | None
    reason: str
    min_driver: str | None = None
    min_driver_reason: str | None = None

    @property
    def runs(self) -> bool:
        return self.verdict is not VerdictKind.NO

    @property
    def status(self) -> Status:
        """The answer in the shared finding vocabulary: ``pass`` (native or JIT) or ``fail`` (no). A verdict
        is never ``skip``: with no device code to decide on there is no verdict (``gpus`` and ``doctor`` leave
        such a file out)."""
        return Status.PASS if self.runs else Status.FAIL


#: For SASS that fits one capability, the driver prefers the most specific build: 'a', then 'f', then plain.
_SPECIFICITY = {"": 0, "f": 1, "a": 2}


def _variant_fits(arch: Arch, device: Arch) -> bool:
    """Whether code for ``arch`` runs on ``device`` under the SASS rules, considering the variant."""
    if arch.variant == "a":
        return arch.base == device
    return arch.major == device.major and device.minor >= arch.minor


def sass_runs(arch: Arch, device: Arch) -> bool:
    """SASS ``arch`` on a GPU ``device``: same major and minor at least (``a``: exactly; ``f``: family)."""
    return _variant_fits(arch, device.base)


def ptx_runs(arch: Arch, device: Arch) -> bool:
    """PTX ``arch`` on ``device`` (ignoring the driver): plain PTX on any capability at least its own;
    ``a`` and ``f`` PTX as the SASS rules."""
    if arch.variant:
        return _variant_fits(arch, device.base)
    return device.base >= arch.base


def _arch_of(entry: DeviceCode) -> Arch:
    try:
        return Arch.from_sm(entry.sm, entry.variant)
    except KnowledgeError:
        return parse_arch(entry.arch)


def _sass_reject(arch: Arch, device: Arch) -> str:
    if arch.variant == "a":
        return f"{arch.sass_name} runs only on {arch.capability}"
    if arch.variant == "f" and arch.major != device.major:
        return f"{arch.sass_name} runs only in the {arch.major}.x family"
    if arch.major != device.major:
        return f"no SASS for {device.major}.x"
    return f"{arch.sass_name} needs {arch.capability} or newer"


def _ptx_reject(arch: Arch) -> str:
    if arch.variant == "a":
        return f"{arch.ptx_name} runs only on {arch.capability}"
    if arch.variant == "f":
        return f"{arch.ptx_name} runs only in the {arch.major}.x family from {arch.capability}"
    return f"{arch.ptx_name} needs {arch.capability} or newer"


def build_cuda_of(entries: Iterable[DeviceCode]) -> Train | None:
    """The newest CUDA release the entries prove they were built with: toolkit notes of cubins, else the
    release that introduced the newest PTX ISA among them. None when nothing says. Entries holding no kernel
    count: they still say which toolkit built the library."""
    best: Train | None = None
    for entry in entries:
        found: Train | None = None
        if entry.toolkit_version:
            try:
                found = parse_train(entry.toolkit_version).line
            except KnowledgeError:
                found = None
        elif entry.kind is DeviceCodeKind.PTX:
            release = _ptx_release(entry)
            found = release.train if release else None
        if found is not None and (best is None or found > best):
            best = found
    return best


def _ptx_release(entry: DeviceCode) -> Release | None:
    if not entry.version:
        return None
    try:
        return release_for_ptx_isa(entry.version)
    except KnowledgeError:
        return None


def _loadable(entries: Iterable[DeviceCode]) -> list[DeviceCode]:
    """SASS and PTX entries loaded at run time (not relocatable), less those known to hold no kernel."""
    return [
        e
        for e in entries
        if not e.relocatable and e.kind in (DeviceCodeKind.SASS, DeviceCodeKind.PTX) and e.kernels != 0
    ]


def kernel_free(entries: Iterable[DeviceCode]) -> str | None:
    """Why ``entries`` restrict no GPU although they are device code: every entry loaded at run time holds no
    kernel (``"SASS sm_75 holds no kernel"``). None when some loaded entry holds one, or may (not read), or
    when nothing is loaded at run time at all."""
    loaded = [e for e in entries if not e.relocatable and e.kind in (DeviceCodeKind.SASS, DeviceCodeKind.PTX)]
    if not loaded or any(e.kernels != 0 for e in loaded):
        return None
    sass = sorted({e.arch for e in loaded if e.kind is DeviceCodeKind.SASS})
    ptx = sorted({e.arch for e in loaded if e.kind is DeviceCodeKind.PTX})
    parts = ([f"SASS {' '.join(sass)}"] if sass else []) + ([f"PTX {' '.join(ptx)}"] if ptx else [])
    return f"{' and '.join(parts)} {agree(len(sass) + len(ptx), 'holds', 'hold')} no kernel"


def _max_driver(*candidates: tuple[str | None, str | None]) -> tuple[str | None, str | None]:
    best: tuple[str | None, str | None] = (None, None)
    for minimum, why in candidates:
        if minimum is not None and (best[0] is None or driver_key(minimum) > driver_key(best[0])):
            best = (minimum, why)
    return best


def runs_on(
    entries: Iterable[DeviceCode],
    capability: Arch | str,
    driver: Driver | str | None = None,
    *,
    platform: str = "linux",
    build_cuda: Train | str | None = None,
) -> Verdict:
    """Decide whether ``entries`` (one library's device code) run on a GPU of ``capability`` ("8.6").

    ``driver`` (a :class:`~cudaship.knowledge.driver.Driver` or text :func:`parse_driver` reads) adds the
    driver rules; without it the verdict holds for a new enough driver and ``min_driver`` says which. A ``no``
    that only the driver causes carries the ``min_driver`` that would run the code; a ``no`` no driver
    changes gives the code's reason and no ``min_driver``.
    ``build_cuda`` is the CUDA release the library was built with, when the caller knows it (e.g. from the
    runtime it links); otherwise it is read from the entries (:func:`build_cuda_of`).
    """
    device = (capability if isinstance(capability, Arch) else parse_arch(capability)).base
    drv = parse_driver(driver, platform) if isinstance(driver, str) else driver
    all_entries = tuple(entries)
    verdict = _decide(all_entries, device, drv, platform, build_cuda)
    if verdict.verdict is VerdictKind.NO and drv is not None:
        unbound = _decide(all_entries, device, None, platform, build_cuda)
        if unbound.verdict is VerdictKind.NO:
            return unbound  # no driver runs it: the reason is the code's, not this driver's
        # the driver is what stops it: say which driver would run it (the verdict without the driver rules)
        return replace(verdict, min_driver=unbound.min_driver, min_driver_reason=unbound.min_driver_reason)
    return verdict


def _decide(
    all_entries: tuple[DeviceCode, ...],
    device: Arch,
    drv: Driver | None,
    platform: str,
    build_cuda: Train | str | None,
) -> Verdict:
    loadable = _loadable(all_entries)
    if not loadable:
        empty = kernel_free(all_entries)
        if empty is not None:  # nothing to launch: no GPU is refused for want of it
            return Verdict(VerdictKind.NATIVE, None, f"{empty}: nothing to launch, so it restricts no GPU")
        return Verdict(VerdictKind.NO, None, _nothing_loadable(all_entries))
    build = as_train(build_cuda).line if build_cuda is not None else build_cuda_of(loadable)

    # The CUDA major the library was built with must not be newer than the driver's.
    floor_driver: tuple[str | None, str | None] = (None, None)
    if build is not None:
        floor = minor_compat_floor(build.major, platform)
        if floor is not None:
            floor_driver = (
                floor,
                f"CUDA {build.major}.x code (the {build.major}.x minor-version compatibility floor)",
            )
        if drv is not None and drv.cuda is not None and drv.cuda.major < build.major:
            return Verdict(
                VerdictKind.NO,
                None,
                f"built with CUDA {build.version}: a newer CUDA major than {drv.phrase} supports",
                *floor_driver,
            )
        if drv is not None and drv.version is not None and floor is not None and not drv.meets(floor):
            return Verdict(
                VerdictKind.NO,
                None,
                f"built with CUDA {build.major}.x, which needs driver {floor} or newer; have {drv.version}",
                *floor_driver,
            )

    rejects: list[str] = []
    zstd = zstd_min_driver()
    zstd_ok = drv is None or drv.meets(zstd)
    usable: list[DeviceCode] = []
    for entry in loadable:
        if entry.compression is Compression.ZSTD and not zstd_ok:
            rejects.append(f"{entry.arch} is ZSTD-compressed, which needs driver {zstd} or newer")
        else:
            usable.append(entry)

    # Native: the best SASS entry for this GPU (exact capability first, then the newest that fits).
    sass = [e for e in usable if e.kind is DeviceCodeKind.SASS]
    fitting = [e for e in sass if sass_runs(_arch_of(e), device)]
    if fitting:
        chosen = max(fitting, key=lambda e: (_arch_of(e).base, _SPECIFICITY[_arch_of(e).variant]))
        arch = _arch_of(chosen)
        how = "built for it" if arch.base == device else f"{arch.major}.x SASS runs on {device.capability}"
        extra = _zstd_need(chosen, zstd)
        minimum, why = _max_driver(floor_driver, extra)
        return Verdict(VerdictKind.NATIVE, chosen, f"{arch.sass_name} ({how})", minimum, why)
    for entry in sass:
        rejects.append(_sass_reject(_arch_of(entry), device))

    # JIT: the newest PTX entry that fits the GPU and whose ISA the driver knows.
    ptx_fitting: list[tuple[DeviceCode, Release | None]] = []
    for entry in (e for e in usable if e.kind is DeviceCodeKind.PTX):
        arch = _arch_of(entry)
        if not ptx_runs(arch, device):
            rejects.append(_ptx_reject(arch))
            continue
        release = _ptx_release(entry)
        if drv is not None and entry.version:
            too_new = _ptx_too_new(entry.version, release, drv)
            if too_new:
                rejects.append(f"{arch.ptx_name}: {too_new}")
                continue
        ptx_fitting.append((entry, release))
    if ptx_fitting:
        chosen, release = max(ptx_fitting, key=lambda pair: (_arch_of(pair[0]), _isa_key(pair[0].version)))
        arch = _arch_of(chosen)
        isa = f"PTX ISA {chosen.version}" if chosen.version else "PTX ISA unknown"
        ptx_need: tuple[str | None, str | None] = (None, None)
        if release is not None:
            ptx_need = (
                release.min_driver_text(platform),
                f"{isa} needs a driver for CUDA {release.train.version}",
            )
        elif chosen.version:
            ptx_need = ("unknown", f"{isa} is newer than every CUDA release cudaship knows")
        minimum, why = _max_driver(floor_driver, ptx_need, _zstd_need(chosen, zstd))
        reason = f"JIT from {arch.ptx_name} ({isa}); the first launch compiles"
        return Verdict(VerdictKind.JIT, chosen, reason, minimum, why)
    has_ptx = any(e.kind is DeviceCodeKind.PTX for e in loadable)
    return Verdict(VerdictKind.NO, None, _summarize(device, rejects, sass, has_ptx))


def _isa_key(version: str | None) -> tuple[int, int]:
    try:
        return isa_tuple(version) if version else (0, 0)
    except KnowledgeError:
        return (0, 0)


def _ptx_too_new(version: str, release: Release | None, drv: Driver) -> str | None:
    if drv.cuda is None:
        return f"PTX ISA {version} is newer than {drv.phrase} knows"
    if release is None:
        return f"PTX ISA {version} is newer than every CUDA release cudaship knows"
    if release.train > drv.cuda:
        return (
            f"PTX ISA {version} (CUDA {release.train.version}) is newer than the driver knows "
            f"(it reports CUDA {drv.cuda.version})"
        )
    return None


def _zstd_need(entry: DeviceCode, zstd: str) -> tuple[str | None, str | None]:
    if entry.compression is Compression.ZSTD:
        return (zstd, f"{entry.arch} is ZSTD-compressed")
    return (None, None)


def _nothing_loadable(entries: Sequence[DeviceCode]) -> str:
    if not entries:
        return "no device code"
    kinds = []
    if any(e.relocatable for e in entries):
        kinds.append("relocatable device code (-rdc: linked into a program, never loaded)")
    if any(e.kind is DeviceCodeKind.LTOIR and not e.relocatable for e in entries):
        kinds.append("LTO-IR (linked, never loaded)")
    if any(e.kind is DeviceCodeKind.UNKNOWN and not e.relocatable for e in entries):
        kinds.append("entries of an unknown kind")
    return "only " + " and ".join(kinds)


def _summarize(device: Arch, rejects: list[str], sass: Sequence[DeviceCode], has_ptx: bool) -> str:
    unique: list[str] = []
    for reason in rejects:
        if reason not in unique:
            unique.append(reason)
    other_major = sorted(
        {_arch_of(e) for e in sass if _arch_of(e).major != device.major and not _arch_of(e).variant}
    )
    text = "; ".join(unique) if unique else "no SASS or PTX for it"
    if other_major and f"no SASS for {device.major}.x" in unique:
        names = " ".join(a.sass_name for a in other_major)
        text = text.replace(f"no SASS for {device.major}.x", f"no SASS for {device.major}.x (has {names})", 1)
    if not sass:
        text = f"no SASS; {text}"
    return text if has_ptx else f"{text}; no PTX to JIT"
