"""Records of the program layer: what a program package holds, where it came from, how it checked and ran.

A *program* is a model compiled ahead of time: an AOTInductor package (``.pt2``, a zip of the compiled
wrapper library, per-kernel cubins and metadata JSON) or an ExecuTorch program (``.pte``, a flatbuffer whose
named data holds the compiled library, with weights in a ``.ptd`` beside it). The readers
(:mod:`cudaship.program.pt2`, :mod:`cudaship.program.pte`) return :class:`ProgramInfo`; checks return
:class:`CheckReport`; runs return :class:`RunReport`. Renderers in ``cudaship.render.program_*`` print them.
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field
from enum import Enum

from cudaship.analysis.summary import Summary
from cudaship.knowledge.archs import sort_arch_names
from cudaship.knowledge.releases import train_from_ptx
from cudaship.records.binary import DeviceCode, DeviceCodeKind, FileFormat
from cudaship.records.files import FileReport
from cudaship.records.findings import CheckResult, Status


class ProgramKind(str, Enum):
    PT2 = "pt2"  #: an AOTInductor package (zip)
    PTE = "pte"  #: an ExecuTorch program (flatbuffer + segments)


class MemberRole(str, Enum):
    WRAPPER = (
        "wrapper-library"  #: the compiled model (AOTInductor's ``*.wrapper.so``, the .pte's ``so_blob``)
    )
    LIBRARY = "library"  #: another native library in the package (``*.kernel.so``)
    CUBIN = "cubin"  #: device code of one kernel
    METADATA = "metadata"  #: ``*_metadata.json``
    SOURCE = "source"  #: generated C++ kept for reproducibility
    WEIGHTS = "weights"  #: constants stored beside the library
    OTHER = "other"


@dataclass(frozen=True)
class ProgramMember:
    """One file of a package (zip member) or one named data blob of a .pte."""

    name: str
    role: MemberRole
    size: int
    report: FileReport | None = None  #: for native libraries and cubins: what inspect reads from it


@dataclass(frozen=True)
class ProgramInfo:
    """What ``program inspect`` knows about one package or program file."""

    path: str
    kind: ProgramKind
    members: tuple[ProgramMember, ...]
    device: str | None = None  #: ``cuda`` or ``cpu`` (AOTI_DEVICE_KEY; the backend for a .pte)
    platform: str | None = None  #: ``linux`` / ``windows`` (AOTI_PLATFORM, else from the library's format)
    machine: str | None = None  #: ``x86_64`` ...
    cpu_isa: str | None = None  #: AOTI_CPU_ISA as recorded
    compute_capability: str | None = None  #: AOTI_COMPUTE_CAPABILITY as ``9.0``
    models: tuple[str, ...] = ()  #: model names in a .pt2; method names in a .pte
    backends: tuple[str, ...] = ()  #: .pte delegate ids (``CudaBackend``)
    metadata: tuple[tuple[str, str], ...] = ()  #: recorded key/value pairs, as written
    notes: tuple[str, ...] = field(default=())
    #: the ``provenance.json`` beside the package that names it (read by :func:`~cudaship.program.reader.
    #: read_program`), None for a bare package
    provenance: Provenance | None = None

    @property
    def libraries(self) -> tuple[ProgramMember, ...]:
        return tuple(m for m in self.members if m.role in (MemberRole.WRAPPER, MemberRole.LIBRARY))

    @property
    def device_code(self) -> tuple[tuple[str, DeviceCode], ...]:
        """Every piece of device code with the member that holds it."""
        return tuple((m.name, d) for m in self.members if m.report is not None for d in m.report.device_code)

    @property
    def sass(self) -> tuple[str, ...]:
        return sort_arch_names({d.arch for _, d in self.device_code if d.kind is DeviceCodeKind.SASS})

    @property
    def ptx(self) -> tuple[str, ...]:
        return sort_arch_names({d.arch for _, d in self.device_code if d.kind is DeviceCodeKind.PTX})

    @property
    def cudart_majors(self) -> tuple[int, ...]:
        """The ``cudart`` majors the libraries import (``libcudart.so.13``, ``cudart64_13.dll``)."""
        found = {cudart_major_of(m.report) for m in self.libraries if m.report is not None}
        return tuple(sorted(x for x in found if x is not None))

    @property
    def recorded_toolkits(self) -> tuple[str, ...]:
        """Toolkit versions the cubins record (``.note.nv.tkinfo``): of the ptxas that made them."""
        return tuple(sorted({d.toolkit_version for _, d in self.device_code if d.toolkit_version}))

    @property
    def ptx_train(self) -> tuple[str, str] | None:
        """``("13.0", "PTX ISA 9.0")``: the CUDA release of the newest PTX ISA in the program's device code
        (an ExecuTorch CUDA program carries PTX inside its library); None without such PTX."""
        return train_from_ptx(d for _, d in self.device_code)

    @property
    def train(self) -> TrainAnswer:
        """The program's CUDA train and where that answer comes from: one answer for ``program inspect``,
        ``program check`` and ``audit`` (see :func:`train_answer`)."""
        return train_answer(self, self.provenance)

    @property
    def errors(self) -> tuple[str, ...]:
        return tuple(
            f"{m.name}: {m.report.error}" for m in self.members if m.report is not None and m.report.error
        )


@dataclass(frozen=True)
class Provenance:
    """``provenance.json``: how a program was exported. Written by ``program export``; read by check, run."""

    package: str  #: the package file, relative to the export directory
    package_sha256: str
    torch_version: str  #: ``2.11.0+cu130``
    cuda_train: str | None  #: ``13.0`` (torch.version.cuda at export); None for a CPU-only torch
    device: str  #: ``cuda`` or ``cpu``
    target_platform: str  #: ``linux-x86_64``
    device_code_archs: tuple[str, ...] = ()
    gpu_name: str | None = None
    gpu_capability: str | None = None  #: ``9.0``
    driver: str | None = None
    compiler: str | None = None  #: the C++ compiler AOTInductor used, with its version line
    python: str | None = None
    model: str | None = None  #: the MODEL argument
    reference: str | None = None  #: reference inputs/outputs file, relative
    exported_program: str | None = None  #: the torch.export program (eager at run time), relative
    created: str | None = None  #: ISO 8601, UTC
    schema: int = 1


@dataclass(frozen=True)
class TrainAnswer:
    """What is known of the CUDA train a program was made for, and from where."""

    version: str | None  #: ``13.0``; None when nothing says
    source: str  #: ``provenance.json (torch 2.11.0+cu130)``, ``PTX ISA 9.0``, or why nothing is known
    recorded: bool = False  #: True: recorded at export (provenance.json); False: inferred or unknown

    @property
    def phrase(self) -> str:
        """``13.0, from provenance.json (torch 2.11.0+cu130)`` / ``13.0, from PTX ISA 9.0`` / ``not
        recorded (...)``."""
        if self.version is None:
            return f"not recorded ({self.source})"
        return f"{self.version}, from {self.source}"


def train_answer(info: ProgramInfo | None, prov: Provenance | None) -> TrainAnswer:
    """The one answer to "which CUDA train": ``provenance.json``'s ``cuda_train`` (what torch was built with,
    recorded at export), else the CUDA release of the newest PTX ISA in the device code (a lower bound: the
    toolkit that wrote the PTX is that release or newer), else unknown with the reason. The cubins' ptxas
    version is never the answer: Triton bundles its own ptxas."""
    if prov is not None and prov.cuda_train:
        return TrainAnswer(prov.cuda_train, f"provenance.json (torch {prov.torch_version})", recorded=True)
    ptx = info.ptx_train if info is not None else None
    if ptx is not None:
        return TrainAnswer(ptx[0], ptx[1])
    if prov is not None:
        return TrainAnswer(None, f"provenance.json: torch {prov.torch_version} without CUDA; no PTX")
    toolkits = info.recorded_toolkits if info is not None else ()
    ptxas = f"; the cubins only say ptxas of CUDA {', '.join(toolkits)} made them" if toolkits else ""
    return TrainAnswer(None, f"no provenance.json and no PTX in the device code{ptxas}")


#: The family (mechanism) of every :class:`~cudaship.records.findings.CheckResult` ``program check`` returns.
FAMILY = "program"


def outcome(item: CheckResult) -> str:
    """``program check``'s word for a result: ``pass``, ``skip`` (not decidable with what was given: no
    train, no GPU named), ``fail`` (a failure of severity error) or ``warn`` (a failure of severity warning:
    it passes, but a person should know, e.g. an 'a' cubin runs on one GPU generation only)."""
    if item.status is not Status.FAIL:
        return str(item.status.value)
    return "fail" if item.is_error else "warn"


@dataclass(frozen=True)
class Target:
    """What the program is checked against (from the options, a wheel or this machine)."""

    train: str | None = None  #: ``13.2``
    train_source: str | None = None  #: ``--train``, the wheel's file name, ...
    capability: str | None = None  #: ``8.6``
    gpu: str | None = None  #: GPU name, when known
    driver: str | None = None
    platform: str | None = None  #: ``linux-x86_64``
    runtime: str | None = None  #: a label for the table: the wheel's file name, ``torch 2.11.0+cu130``


@dataclass(frozen=True)
class CheckReport:
    directory: str
    provenance: Provenance | None
    program: ProgramInfo | None
    target: Target
    items: tuple[CheckResult, ...]  #: one per check (``name``: package, reference, platform, train, ...)

    @property
    def summary(self) -> Summary:
        return Summary.of(self.items)

    @property
    def passed(self) -> bool:
        return not self.summary.failed

    @property
    def counts(self) -> tuple[int, int]:
        """(checks passed, checks decided): warnings pass, skips are not counted."""
        s = self.summary
        return s.decided - s.failed, s.decided


@dataclass(frozen=True)
class Environment:
    """What a person needs when a run fails: the machine's GPU, driver and runtimes."""

    python: str | None = None
    torch: str | None = None
    torch_cuda: str | None = None  #: torch.version.cuda
    gpu: str | None = None
    capability: str | None = None
    driver: str | None = None
    driver_cuda: str | None = None  #: the newest CUDA the driver supports (``13.0``)
    memory_pools: bool | None = None  #: CU_DEVICE_ATTRIBUTE_MEMORY_POOLS_SUPPORTED
    cudart: tuple[str, ...] = ()  #: libcudart files found beside torch / in the NVIDIA wheels
    compiler_on_path: str | None = None  #: a C++ compiler the run could see (None: none, as intended)
    error: str | None = None  #: why the probe could not say more


@dataclass(frozen=True)
class RunReport:
    directory: str
    provenance: Provenance | None
    ok: bool
    run_directory: str  #: where it ran (the non-ASCII copy when asked)
    runs: int
    tolerance: float
    max_abs_diff: float | None = None
    load_s: float | None = None
    latency_ms: float | None = None  #: median of the program
    eager_latency_ms: float | None = None  #: median of eager in the same process
    failure: str | None = None  #: one line: what failed (the signal for a crash)
    signal: str | None = None  #: ``SIGSEGV`` when the child died of a signal
    exit_code: int | None = None
    environment: Environment | None = None
    stderr_tail: str | None = None  #: the child's last lines, for a crash
    loader: str | None = None  #: the loader API used
    notes: tuple[str, ...] = ()


_CUDART = re.compile(r"^(?:libcudart\.so\.(\d+)|cudart64_(\d+)\.dll)$", re.IGNORECASE)
_LOCALE_SYMBOL = "_ZNSt6locale"


def cudart_major_of(report: FileReport | None) -> int | None:
    """The ``cudart`` major a library imports or links (``libcudart.so.13`` → 13), None when it needs none."""
    if report is None:
        return None
    if report.linkage is not None and report.linkage.cudart_major is not None:
        return report.linkage.cudart_major
    if report.host is not None:
        for imp in report.host.imports:
            match = _CUDART.match(imp.library)
            if match:
                return int(match.group(1) or match.group(2))
    return None


def libstdcxx_copy(report: FileReport | None) -> int:
    """How many ``std::locale`` symbols a library defines while needing no ``libstdc++`` (0: not a copy).

    A library linked with ``-static-libstdc++`` carries its own C++ runtime. Loaded into a process that has
    ``libstdc++.so.6`` already (any Python with torch), its references to exported libstdc++ symbols bind to
    the process's copy while its inlined code uses its own: the two halves disagree about the locale's
    facets and the first ``std::regex`` crashes (seen on the H200: see docs/program.md).
    """
    if report is None or report.host is None or report.format is not FileFormat.ELF:
        return 0
    if any(imp.library.startswith("libstdc++") for imp in report.host.imports):
        return 0
    return sum(1 for name in report.host.exports if name.startswith(_LOCALE_SYMBOL))
