"""What the probe found: the driver and each GPU."""

from __future__ import annotations

from dataclasses import dataclass

from cudaship.knowledge.archs import Arch
from cudaship.knowledge.driver import Driver


@dataclass(frozen=True)
class GpuInfo:
    """One GPU as the driver reports it."""

    index: int
    name: str
    capability: Arch  #: compute capability, no variant
    memory_bytes: int | None  #: total device memory, None when not read
    memory_pools: bool | None  #: CU_DEVICE_ATTRIBUTE_MEMORY_POOLS_SUPPORTED (cudaMallocAsync); None: unknown


@dataclass(frozen=True)
class ProbeResult:
    """The driver (version and/or the CUDA version it supports) and the GPUs it sees."""

    driver: Driver
    gpus: tuple[GpuInfo, ...]
    sources: tuple[str, ...]  #: what answered: "cuda-driver-api (libcuda.so.1)", "nvml (nvidia-ml-py)", ...
    notes: tuple[str, ...] = ()  #: what could not be read, one line each
