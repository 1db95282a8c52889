"""Records describing one inspected input file, shared by inspect, audit, gpus and program."""

from __future__ import annotations

from dataclasses import dataclass, field
from enum import Enum

from cudaship.records.binary import DeviceCode, FatbinContainer, FileFormat, HostBinary, LinkerScript


class RuntimeLinkage(str, Enum):
    DYNAMIC = "dynamic"
    STATIC = "static"
    NONE = "none"


class DriverAccess(str, Enum):
    IMPORT = "import"  #: libcuda.so.1 / nvcuda.dll is an import
    DLOPEN = "dlopen"  #: its name is stored as a string (dlopen / LoadLibrary)
    NONE = "none"


@dataclass(frozen=True)
class CudaLinkage:
    """How a host binary gets the CUDA runtime and reaches the driver, with the evidence for each."""

    runtime: RuntimeLinkage
    cudart_major: int | None
    runtime_evidence: tuple[str, ...]
    driver: DriverAccess
    driver_evidence: tuple[str, ...]


class ContainerKind(str, Enum):
    """What holds a set of members that commands read in place: a wheel or an exported program."""

    WHEEL = "wheel"
    PT2 = "pt2"  #: an AOTInductor package (zip)
    PTE = "pte"  #: an ExecuTorch program (flatbuffer with named data)

    @property
    def noun(self) -> str:
        """How reports name it: ``wheel``, ``AOTInductor package``, ``ExecuTorch program``."""
        return {"wheel": "wheel", "pt2": "AOTInductor package", "pte": "ExecuTorch program"}[self.value]


@dataclass(frozen=True)
class WheelInfo:
    """A wheel's own facts (from its file name, METADATA and WHEEL)."""

    filename: str
    name: str
    version: str  #: full version, with local tag (``1.6.0+cu132``)
    local: str | None  #: the local tag (``cu132``)
    tags: tuple[str, ...]  #: ``py3-none-win_amd64`` ...


@dataclass(frozen=True)
class FileReport:
    """Everything inspect knows about one native or device-code file.

    ``path`` is the path as given, or for a wheel member its path inside the wheel (with ``/``); ``container``
    is then the wheel's path. When the file could not be read, ``error`` holds the one-line reason and the
    other fields hold what was read before the problem (often nothing).
    """

    path: str
    format: FileFormat | None
    size: int
    container: str | None = None
    host: HostBinary | None = None
    linkage: CudaLinkage | None = None
    containers: tuple[FatbinContainer, ...] = ()
    device_code: tuple[DeviceCode, ...] = ()
    error: str | None = None
    notes: tuple[str, ...] = field(default=())
    linker_script: LinkerScript | None = None  #: what a GNU ld linker script names (format LINKER_SCRIPT)
