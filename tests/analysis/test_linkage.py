"""CUDA runtime / driver linkage on real binaries (nvcc ``-cudart static`` vs ``shared``, mingw-w64 DLLs, the
bitsandbytes and CUDA runtime wheels), and the NVIDIA library name knowledge it rests on."""

from __future__ import annotations

import re
import zipfile
from collections.abc import Callable
from pathlib import Path

import pytest

from cudaship.analysis.linkage import cuda_linkage
from cudaship.binary.elf import read_elf
from cudaship.binary.macho import read_macho
from cudaship.binary.pe import read_pe
from cudaship.errors import KnowledgeError
from cudaship.knowledge import libraries
from cudaship.records.binary import (
    FileFormat,
    HostBinary,
    Import,
    ImportedSymbol,
    ImportKind,
    Machine,
    Section,
)
from cudaship.records.files import DriverAccess, RuntimeLinkage


def read_host(data: bytes) -> HostBinary:
    if data[:4] == b"\x7fELF":
        return read_elf(data)
    if data[:2] == b"MZ":
        return read_pe(data)
    return read_macho(data)


# -- nvcc builds ---------------------------------------------------------------------------------------------


def test_cudart_shared_is_dynamic(nvcc_build: Callable[[str], Path], nvcc_version: str) -> None:
    linkage = cuda_linkage(read_host(nvcc_build("cudart_shared").read_bytes()))
    assert linkage.runtime is RuntimeLinkage.DYNAMIC
    assert linkage.cudart_major == int(nvcc_version.split(".")[0])
    assert linkage.runtime_evidence == (f"DT_NEEDED libcudart.so.{linkage.cudart_major}",)
    assert linkage.driver is DriverAccess.NONE  # libcudart reaches the driver, not the library itself


@pytest.mark.parametrize("name", ["cudart_static", "multi_arch"], ids=str)
def test_cudart_static_is_static_and_dlopens_the_driver(nvcc_build: Callable[[str], Path], name: str) -> None:
    linkage = cuda_linkage(read_host(nvcc_build(name).read_bytes()))
    assert linkage.runtime is RuntimeLinkage.STATIC
    assert linkage.cudart_major is None
    assert any("cudaGetExportTable" in e for e in linkage.runtime_evidence)
    assert any(".nvFatBinSegment" in e for e in linkage.runtime_evidence)
    assert linkage.driver is DriverAccess.DLOPEN
    assert linkage.driver_evidence == ("stores libcuda.so.1 as a string (dlopen / LoadLibrary)",)


# -- mingw-w64 DLLs ------------------------------------------------------------------------------------------

MINGW_CASES = {
    "cuda_consumer.dll": (RuntimeLinkage.DYNAMIC, 13, DriverAccess.IMPORT),
    "cuda_consumer_arm64.dll": (RuntimeLinkage.DYNAMIC, 13, DriverAccess.IMPORT),
    "cuda_consumer_x86.dll": (RuntimeLinkage.DYNAMIC, 13, DriverAccess.IMPORT),
    "delay_consumer.dll": (RuntimeLinkage.NONE, None, DriverAccess.IMPORT),
    "fatbin_carrier.dll": (RuntimeLinkage.DYNAMIC, 13, DriverAccess.NONE),
    "driver_loader.dll": (RuntimeLinkage.NONE, None, DriverAccess.DLOPEN),
    "_C.pyd": (RuntimeLinkage.NONE, None, DriverAccess.NONE),
    "exporter.dll": (RuntimeLinkage.NONE, None, DriverAccess.NONE),
}


@pytest.mark.parametrize("name", list(MINGW_CASES), ids=list(MINGW_CASES))
def test_mingw_dll_linkage(mingw_build: Callable[[str], Path], name: str) -> None:
    runtime, major, driver = MINGW_CASES[name]
    linkage = cuda_linkage(read_host(mingw_build(name).read_bytes()))
    assert (linkage.runtime, linkage.cudart_major, linkage.driver) == (runtime, major, driver)
    assert bool(linkage.runtime_evidence) == (runtime is not RuntimeLinkage.NONE)
    assert bool(linkage.driver_evidence) == (driver is not DriverAccess.NONE)


# -- real wheels ---------------------------------------------------------------------------------------------


def _members(wheel: Path, suffix: str) -> dict[str, bytes]:
    with zipfile.ZipFile(wheel) as zf:
        return {Path(n).name: zf.read(n) for n in zf.namelist() if n.endswith(suffix) and "cuda" in n}


def _train_major(name: str) -> int:
    """libbitsandbytes_cuda126.so → 12 (the CUDA train is in the file name)."""
    match = re.search(r"cuda(\d+)(\d)\.", name)
    assert match
    return int(match.group(1))


@pytest.mark.network
def test_bitsandbytes_linux_libraries_link_cudart_dynamically(bitsandbytes_linux_wheel: Path) -> None:
    members = _members(bitsandbytes_linux_wheel, ".so")
    assert len(members) >= 7
    for name, data in members.items():
        linkage = cuda_linkage(read_host(data))
        assert linkage.runtime is RuntimeLinkage.DYNAMIC, name
        assert linkage.cudart_major == _train_major(name), name


@pytest.mark.network
def test_bitsandbytes_windows_libraries(bitsandbytes_windows_wheel: Path) -> None:
    """CUDA 11/12 builds import cudart64_110.dll / cudart64_12.dll; the CUDA 13 builds link the runtime
    statically (no cudart import, nvcudart_hybrid64.dll and nvcuda.dll stored as strings)."""
    members = _members(bitsandbytes_windows_wheel, ".dll")
    assert len(members) >= 7
    for name, data in members.items():
        linkage = cuda_linkage(read_host(data))
        if _train_major(name) >= 13:
            assert linkage.runtime is RuntimeLinkage.STATIC, name
            assert any("nvcudart_hybrid64.dll" in e for e in linkage.runtime_evidence), name
            assert linkage.driver is DriverAccess.DLOPEN, name
        else:
            assert linkage.runtime is RuntimeLinkage.DYNAMIC, name
            assert linkage.cudart_major == _train_major(name), name


@pytest.mark.network
@pytest.mark.parametrize("fixture", ["cudart_linux_wheel", "cudart_windows_wheel"], ids=str)
def test_the_runtime_library_itself_carries_the_runtime(request: pytest.FixtureRequest, fixture: str) -> None:
    wheel: Path = request.getfixturevalue(fixture)
    suffix = ".so.13" if "linux" in fixture else "cudart64_13.dll"
    (data,) = _members(wheel, suffix).values()
    linkage = cuda_linkage(read_host(data))
    assert linkage.runtime is RuntimeLinkage.STATIC
    assert any(e.startswith("defines cudaGetExportTable") for e in linkage.runtime_evidence)
    assert linkage.driver is DriverAccess.DLOPEN


@pytest.mark.network
def test_cpu_library_has_no_cuda(bitsandbytes_linux_wheel: Path) -> None:
    with zipfile.ZipFile(bitsandbytes_linux_wheel) as zf:
        data = zf.read("bitsandbytes/libbitsandbytes_cpu.so")
    linkage = cuda_linkage(read_host(data))
    assert (linkage.runtime, linkage.driver) == (RuntimeLinkage.NONE, DriverAccess.NONE)


# -- decision rules on records -------------------------------------------------------------------------------


def _record(**fields: object) -> HostBinary:
    base: dict[str, object] = {
        "format": FileFormat.ELF,
        "machine": Machine.X86_64,
        "bits": 64,
        "kind": "shared-library",
    }
    base.update(fields)
    return HostBinary(**base)  # type: ignore[arg-type]


def test_undefined_registration_means_dynamic_with_unknown_major() -> None:
    host = _record(
        undefined_symbols=(ImportedSymbol("__cudaRegisterFatBinary"),),
        sections=(Section(".nvFatBinSegment", 0, 24),),
    )
    linkage = cuda_linkage(host)
    assert (linkage.runtime, linkage.cudart_major) == (RuntimeLinkage.DYNAMIC, None)


def test_macho_underscore_exports_count() -> None:
    host = _record(format=FileFormat.MACHO, exports=("_cudaGetExportTable",))
    assert cuda_linkage(host).runtime is RuntimeLinkage.STATIC


# -- the library name knowledge ------------------------------------------------------------------------------

IDENTIFY = [
    ("libcudart.so.13", "cudart", "linux", (13,), False),
    ("libcudart.so.13.0.96", "cudart", "linux", (13,), False),
    ("libcudart.so.11.0", "cudart", "linux", (11,), False),
    ("libcudart.so", "cudart", "linux", (), False),
    ("cudart64_110.dll", "cudart", "windows", (11,), False),
    ("cudart64_12.dll", "cudart", "windows", (12,), False),
    ("CUDART64_13.DLL", "cudart", "windows", (13,), False),
    ("libcublasLt.so.13", "cublasLt", "linux", (13,), False),
    ("cublasLt64_13.dll", "cublasLt", "windows", (13,), False),
    ("libcufft.so.12", "cufft", "linux", (13,), False),
    ("libcufft.so.11", "cufft", "linux", (12,), False),
    ("libcurand.so.10", "curand", "linux", (11, 12, 13), False),
    ("libcusolver.so.12", "cusolver", "linux", (13,), False),
    ("nvrtc64_130_0.dll", "nvrtc", "windows", (13,), False),
    ("libnvJitLink.so.13", "nvJitLink", "linux", (13,), False),
    ("libcudnn.so.9", "cudnn", "linux", (12, 13), False),
    ("libcuda.so.1", "cuda", "linux", (), True),
    ("/usr/lib/x86_64-linux-gnu/libcuda.so.1", "cuda", "linux", (), True),
    ("nvcuda.dll", "cuda", "windows", (), True),
    ("NVCUDA.DLL", "cuda", "windows", (), True),
]


@pytest.mark.parametrize(
    ("name", "component", "os", "majors", "driver"), IDENTIFY, ids=[c[0] for c in IDENTIFY]
)
def test_identify(name: str, component: str, os: str, majors: tuple[int, ...], driver: bool) -> None:
    found = libraries.identify(name)
    assert found is not None
    assert (found.component, found.os, found.cuda_majors, found.driver) == (component, os, majors, driver)
    assert libraries.is_cuda_library(name)
    assert libraries.is_driver(name) is driver


NOT_NVIDIA = [
    "libc.so.6",
    "KERNEL32.dll",
    "libcudaship.so",
    "libcuda.so.x",
    "cudart64_.dll",
    "libcudart.a",
    "libcudart_static.a",
    "cudart.lib",
]


@pytest.mark.parametrize("name", NOT_NVIDIA, ids=NOT_NVIDIA)
def test_other_names_are_not_nvidia_libraries(name: str) -> None:
    assert libraries.identify(name) is None
    assert not libraries.is_cuda_library(name) and not libraries.is_driver(name)


CUDART_MAJORS = [
    ("cudart64_110.dll", 11),
    ("cudart64_102.dll", 10),
    ("cudart64_92.dll", 9),
    ("cudart64_65.dll", 6),
    ("cudart64_12.dll", 12),
    ("cudart64_14.dll", 14),
    ("cudart32_80.dll", 8),
    ("libcudart.so.14", 14),
    ("libcudart.so.10.2", 10),
    ("libcublas.so.13", None),
    ("libcudart.so", None),
]


@pytest.mark.parametrize(("name", "major"), CUDART_MAJORS, ids=[c[0] for c in CUDART_MAJORS])
def test_cudart_major(name: str, major: int | None) -> None:
    assert libraries.cudart_major(name) == major


def test_pypi_packages() -> None:
    assert libraries.pypi_package("cudart", 13, "linux") == libraries.PypiPackage(
        "nvidia-cuda-runtime", "nvidia/cu13/lib"
    )
    assert libraries.pypi_package("cudart", 13, "windows") == libraries.PypiPackage(
        "nvidia-cuda-runtime", "nvidia/cu13/bin/x86_64"
    )
    assert libraries.pypi_package("cudart", 12, "linux") == libraries.PypiPackage(
        "nvidia-cuda-runtime-cu12", "nvidia/cuda_runtime/lib"
    )
    assert libraries.pypi_package("nccl", 13, "windows") is None  # Linux only
    assert libraries.pypi_package("cudart", 99, "linux") is None
    with pytest.raises(KnowledgeError):
        libraries.pypi_package("cudartt", 13, "linux")


def test_every_row_names_a_file_that_identifies_back() -> None:
    for component in libraries.components():
        for major in (11, 12, 13):
            for os in ("linux", "windows"):
                name = libraries.library_file(component, major, os)
                if name is None:
                    continue
                found = libraries.identify(name)
                assert found is not None and found.component == component, name
                assert major in found.cuda_majors, name


@pytest.mark.network
@pytest.mark.parametrize(
    ("fixture", "os"),
    [("cudart_linux_wheel", "linux"), ("cudart_windows_wheel", "windows")],
    ids=["linux", "windows"],
)
def test_runtime_wheel_installs_where_the_data_says(
    request: pytest.FixtureRequest, fixture: str, os: str
) -> None:
    wheel: Path = request.getfixturevalue(fixture)
    package = libraries.pypi_package("cudart", 13, os)  # type: ignore[arg-type]
    name = libraries.library_file("cudart", 13, os)  # type: ignore[arg-type]
    assert package is not None and name is not None
    assert wheel.name.startswith(package.project.replace("-", "_") + "-")
    with zipfile.ZipFile(wheel) as zf:
        assert f"{package.directory}/{name}" in zf.namelist()


@pytest.mark.slow
@pytest.mark.network
def test_cublas_wheel_installs_where_the_data_says(cublas_linux_wheel: Path) -> None:
    """nvidia-cublas for CUDA 13 (the real wheel, downloaded once into the test cache)."""
    package = libraries.pypi_package("cublasLt", 13, "linux")
    assert package is not None
    with zipfile.ZipFile(cublas_linux_wheel) as zf:
        names = set(zf.namelist())
    for component in ("cublas", "cublasLt"):
        assert f"{package.directory}/{libraries.library_file(component, 13, 'linux')}" in names


@pytest.mark.network
def test_an_auditwheel_copy_of_the_runtime_is_dynamic_linkage_with_its_major(
    cumm118_vendoring_wheel: Path,
) -> None:
    """auditwheel renames the runtime it grafts (libcudart-d0da41ae.so.11.8.89) and the extension's DT_NEEDED
    with it: that is still the CUDA runtime, linked dynamically, CUDA 11 (the PyPI survey read cumm-cu126's
    and cumm-cu118's extensions as 'dynamic, major unknown' or 'none' before)."""
    with zipfile.ZipFile(cumm118_vendoring_wheel) as zf:
        name = next(n for n in zf.namelist() if n.startswith("cumm/core_cc.") and n.endswith(".so"))
        linkage = cuda_linkage(read_host(zf.read(name)))
    assert linkage.runtime is RuntimeLinkage.DYNAMIC
    assert linkage.cudart_major == 11
    assert linkage.runtime_evidence == ("DT_NEEDED libcudart-d0da41ae.so.11.8.89",)


@pytest.mark.parametrize(
    ("name", "major"),
    [
        ("libcudart-d0da41ae.so.11.8.89", 11),
        ("libcudart-96c42e41.so.13", 13),
        ("cudart64_12-0123456789abcdef0123456789abcdef.dll", 12),
        ("libcudart-nothex0.so.12", None),  # no auditwheel hash: not the runtime
    ],
)
def test_a_hashed_copys_name_is_read_without_its_hash(name: str, major: int | None) -> None:
    dll = name.endswith(".dll")
    host = HostBinary(
        format=FileFormat.PE if dll else FileFormat.ELF,
        machine=Machine.X86_64,
        bits=64,
        kind="shared-library",
        imports=(Import(name, ImportKind.IMPORT if dll else ImportKind.NEEDED),),
    )
    linkage = cuda_linkage(host)
    assert linkage.cudart_major == major
    assert linkage.runtime is (RuntimeLinkage.NONE if major is None else RuntimeLinkage.DYNAMIC)
