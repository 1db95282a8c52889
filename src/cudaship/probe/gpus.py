"""Probe the NVIDIA driver and GPUs through the CUDA driver API and NVML (ctypes; ``pynvml`` when installed).

Nothing here raises anything but :class:`~cudaship.errors.NoGpuError` (no driver, no GPU: exit 3). The
environment variable ``CUDASHIP_LIBCUDA`` names the driver library to load instead of the system's.
"""

from __future__ import annotations

import ctypes
import importlib
import sys
from dataclasses import dataclass
from typing import Any

from cudaship import envvars
from cudaship.errors import KnowledgeError, NoGpuError
from cudaship.knowledge.archs import Arch
from cudaship.knowledge.driver import Driver, cuda_for_driver, cuda_from_driver_api
from cudaship.probe.records import GpuInfo, ProbeResult

# CUdevice_attribute values (cuda.h)
CU_DEVICE_ATTRIBUTE_COMPUTE_CAPABILITY_MAJOR = 75
CU_DEVICE_ATTRIBUTE_COMPUTE_CAPABILITY_MINOR = 76
CU_DEVICE_ATTRIBUTE_MEMORY_POOLS_SUPPORTED = 115
CUDA_SUCCESS = 0
CUDA_ERROR_NO_DEVICE = 100
CUDA_ERROR_INSUFFICIENT_DRIVER = 35

DRIVER_LIBRARIES = ("nvcuda.dll",) if sys.platform == "win32" else ("libcuda.so.1", "libcuda.so")
NVML_LIBRARIES = ("nvml.dll",) if sys.platform == "win32" else ("libnvidia-ml.so.1", "libnvidia-ml.so")


@dataclass(frozen=True)
class _DriverApi:
    version: int  #: cuDriverGetVersion: 13000
    gpus: tuple[GpuInfo, ...]
    library: str


def _load(names: tuple[str, ...]) -> tuple[Any, str] | None:
    for name in names:
        try:
            loader = ctypes.WinDLL if sys.platform == "win32" else ctypes.CDLL  # type: ignore[attr-defined]
            return loader(name), name
        except OSError:
            continue
    return None


def _error_name(lib: Any, code: int) -> str:
    try:
        fn = lib.cuGetErrorName
        text = ctypes.c_char_p()
        if fn(code, ctypes.byref(text)) == CUDA_SUCCESS and text.value:
            return f"{text.value.decode(errors='replace')} ({code})"
    except AttributeError:
        pass
    return f"CUDA error {code}"


def _driver_api() -> _DriverApi:

    override = envvars.get("CUDASHIP_LIBCUDA")
    loaded = _load((override,) if override else DRIVER_LIBRARIES)
    if loaded is None:
        names = override or " / ".join(DRIVER_LIBRARIES)
        raise NoGpuError(f"no NVIDIA driver on this machine: cannot load {names}")
    lib, name = loaded
    try:
        cu_init = lib.cuInit
        get_version = lib.cuDriverGetVersion
        get_count = lib.cuDeviceGetCount
        get_device = lib.cuDeviceGet
        get_name = lib.cuDeviceGetName
        get_attribute = lib.cuDeviceGetAttribute
    except AttributeError as e:
        raise NoGpuError(f"{name} is not a CUDA driver library (no {e.args[0].split()[-1]})") from e
    version = ctypes.c_int(0)
    if get_version(ctypes.byref(version)) != CUDA_SUCCESS:
        raise NoGpuError(f"{name}: cuDriverGetVersion failed")
    status = cu_init(0)
    if status == CUDA_ERROR_NO_DEVICE:
        raise NoGpuError(
            f"no NVIDIA GPU on this machine (driver supports CUDA {_cuda(version.value)}, cuInit: no device)"
        )
    if status != CUDA_SUCCESS:
        raise NoGpuError(f"the NVIDIA driver did not start: cuInit returned {_error_name(lib, status)}")
    count = ctypes.c_int(0)
    if get_count(ctypes.byref(count)) != CUDA_SUCCESS or count.value <= 0:
        raise NoGpuError("no NVIDIA GPU on this machine (the driver sees none)")
    total_mem = getattr(lib, "cuDeviceTotalMem_v2", None)
    gpus = []
    for index in range(count.value):
        device = ctypes.c_int(0)
        if get_device(ctypes.byref(device), index) != CUDA_SUCCESS:
            continue
        buf = ctypes.create_string_buffer(256)
        get_name(buf, 256, device)
        major, minor, pools = ctypes.c_int(0), ctypes.c_int(0), ctypes.c_int(0)
        get_attribute(ctypes.byref(major), CU_DEVICE_ATTRIBUTE_COMPUTE_CAPABILITY_MAJOR, device)
        get_attribute(ctypes.byref(minor), CU_DEVICE_ATTRIBUTE_COMPUTE_CAPABILITY_MINOR, device)
        pools_ok = get_attribute(ctypes.byref(pools), CU_DEVICE_ATTRIBUTE_MEMORY_POOLS_SUPPORTED, device)
        memory: int | None = None
        if total_mem is not None:
            size = ctypes.c_size_t(0)
            if total_mem(ctypes.byref(size), device) == CUDA_SUCCESS:
                memory = size.value
        gpus.append(
            GpuInfo(
                index=index,
                name=buf.value.decode(errors="replace") or f"GPU {index}",
                capability=Arch(max(major.value, 1), minor.value),
                memory_bytes=memory,
                memory_pools=bool(pools.value) if pools_ok == CUDA_SUCCESS else None,
            )
        )
    if not gpus:
        raise NoGpuError("no NVIDIA GPU on this machine (no device could be opened)")
    return _DriverApi(version.value, tuple(gpus), name)


def _cuda(value: int) -> str:
    try:
        return cuda_from_driver_api(value).version
    except KnowledgeError:
        return str(value)


def _nvml_driver_version() -> tuple[str | None, str]:
    """The driver version string from NVML: pynvml when importable, else ctypes. (None, why) when neither."""
    try:
        pynvml = importlib.import_module("pynvml")
    except ImportError:
        pynvml = None
    if pynvml is not None:
        try:
            pynvml.nvmlInit()
            try:
                raw = pynvml.nvmlSystemGetDriverVersion()
            finally:
                pynvml.nvmlShutdown()
            text = raw.decode() if isinstance(raw, bytes) else str(raw)
            return text, "nvml (nvidia-ml-py)"
        except Exception as e:  # pynvml raises NVMLError subclasses created at run time
            return None, f"nvml (nvidia-ml-py) failed: {e}"
    loaded = _load(NVML_LIBRARIES)
    if loaded is None:
        return None, f"nvml: cannot load {' / '.join(NVML_LIBRARIES)}"
    lib, name = loaded
    try:
        init = getattr(lib, "nvmlInit_v2", None) or lib.nvmlInit
        if init() != 0:
            return None, f"nvml ({name}): nvmlInit failed"
        buf = ctypes.create_string_buffer(96)
        status = lib.nvmlSystemGetDriverVersion(buf, 96)
        lib.nvmlShutdown()
    except AttributeError:
        return None, f"{name} is not NVML"
    if status != 0:
        return None, f"nvml ({name}): nvmlSystemGetDriverVersion failed"
    return buf.value.decode(errors="replace"), f"nvml ({name})"


def probe() -> ProbeResult:
    """The driver and GPUs of this machine. Raises NoGpuError (exit 3) when there is no driver or no GPU."""
    api = _driver_api()
    platform = "windows" if sys.platform == "win32" else "linux"
    version, nvml_source = _nvml_driver_version()
    notes = []
    try:
        cuda = cuda_from_driver_api(api.version)
    except KnowledgeError:
        cuda = None
        notes.append(f"cuDriverGetVersion returned {api.version}")
    if version is not None and cuda is None:
        cuda = cuda_for_driver(version, platform)
    sources = [f"cuda-driver-api ({api.library})"]
    if version is not None:
        sources.append(nvml_source)
    else:
        notes.append(f"driver version string not read: {nvml_source}")
    return ProbeResult(
        driver=Driver(version, cuda, platform),
        gpus=api.gpus,
        sources=tuple(sources),
        notes=tuple(notes),
    )
