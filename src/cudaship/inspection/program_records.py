"""Records of a program package: what a ``.pt2`` / ``.pte`` holds and where it came from.

A *program* is a model compiled ahead of time: an AOTInductor package (``.pt2``, a zip of the compiled
wrapper library, per-kernel cubins and metadata JSON) or an ExecuTorch program (``.pte``, a flatbuffer whose
named data holds the compiled library, with weights in a ``.ptd`` beside it). The readers
(:mod:`cudaship.inspection.pt2`, :mod:`cudaship.inspection.pte`, opened by :mod:`cudaship.inspection.program`)
return :class:`ProgramInfo`; ``provenance.json`` (:mod:`cudaship.inspection.provenance`) is a
:class:`Provenance`. Here, below both ``inspection`` (which reads programs as containers for ``inspect`` and
``audit``) and ``program`` (export, check, run), so that both may use them.
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field
from enum import Enum

from cudaship.knowledge.archs import sort_arch_names
from cudaship.knowledge.releases import train_from_ptx
from cudaship.records.binary import DeviceCode, DeviceCodeKind
from cudaship.records.files import FileReport


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
    #: the ``provenance.json`` beside the package that names it (read by :func:`~cudaship.inspection.program.
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
class ImportLibraryRecord:
    """An import library a Windows cross compile linked, and how it was obtained (``provenance.json``'s
    ``import_libraries``): given by the user, or made by cudaship from torch's declarations."""

    library: str  #: ``torch_cuda.lib``
    dll: str  #: ``torch_cuda.dll``
    how: str  #: ``made`` or ``given``
    source: str  #: ``torch 2.11.0+cu130: include/.../{c/shim.h, generated/c_shim_cuda.h}`` or the given path
    sha256: str
    names: tuple[str, ...] = ()  #: the names it provides, sorted


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
    #: Windows cross compile: the import libraries linked and how each was obtained
    import_libraries: tuple[ImportLibraryRecord, ...] = ()
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


_CUDART = re.compile(r"^(?:libcudart\.so\.(\d+)|cudart64_(\d+)\.dll)$", re.IGNORECASE)


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
