"""inspect on real PyPI wheels, with NVIDIA's cuobjdump as the oracle on every ELF member it can read."""

from __future__ import annotations

import zipfile
from pathlib import Path

import pytest

from cudaship.inspection.walk import inspect_paths
from cudaship.knowledge.archs import ptx_of, sass_of
from cudaship.records.binary import DeviceCodeKind, FileFormat
from cudaship.records.files import FileReport
from tests.fixtures import cuobjdump_path
from tests.inspection.oracle import as_cuobjdump_names, cuobjdump_listing, is_part_of

pytestmark = pytest.mark.network

WHEELS = ["bitsandbytes_linux_wheel", "cudart_linux_wheel"]


def _members(path: Path) -> dict[str, FileReport]:
    report = inspect_paths([path])
    assert not report.failed, [(f.path, f.error) for f in report.failed]
    return {f.path: f for f in report.files}


@pytest.mark.parametrize("fixture", WHEELS, ids=["bitsandbytes", "cuda-runtime"])
def test_elf_members_agree_with_cuobjdump(
    fixture: str, request: pytest.FixtureRequest, tmp_path: Path
) -> None:
    cuobjdump = cuobjdump_path()
    if cuobjdump is None:
        pytest.skip("cuobjdump not installed (pip install nvidia-cuda-cuobjdump)")
    wheel: Path = request.getfixturevalue(fixture)
    members = _members(wheel)
    compared = 0
    with zipfile.ZipFile(wheel) as z:
        for name, f in members.items():
            if f.format is not FileFormat.ELF:
                continue
            target = tmp_path / Path(name).name
            target.write_bytes(z.read(name))
            listing = cuobjdump_listing(cuobjdump, target)
            sass, ptx = as_cuobjdump_names(f.device_code)
            if listing.complete:
                assert sass == listing.sass, name
                assert ptx == listing.ptx, name
            else:
                # cuobjdump stops ("Invalid ELF") part-way through some real libraries (bitsandbytes'
                # CUDA 12.1 build): what it listed before stopping must be part of what cudaship read
                assert "Invalid ELF" in listing.message, listing.message
                assert is_part_of(listing.sass, sass) and is_part_of(listing.ptx, ptx), name
                assert sum(sass.values()) > sum(listing.sass.values()), name
            compared += 1
            target.unlink()
    assert compared > 0


def test_bitsandbytes_has_relocatable_only_ptx(bitsandbytes_linux_wheel: Path) -> None:
    """Its CUDA builds keep PTX only in the relocatable fatbin: listed, and marked relocatable."""
    members = _members(bitsandbytes_linux_wheel)
    cuda = [f for name, f in members.items() if "cuda" in name]
    assert cuda
    with_rdc_ptx = [
        f for f in cuda if any(d.kind is DeviceCodeKind.PTX and d.relocatable for d in f.device_code)
    ]
    assert with_rdc_ptx
    for f in with_rdc_ptx:
        executable_ptx = {d.arch for d in f.device_code if d.kind is DeviceCodeKind.PTX and not d.relocatable}
        assert set(ptx_of(f.device_code)) >= executable_ptx


def test_windows_dlls_read_on_linux_where_cuobjdump_cannot(
    bitsandbytes_windows_wheel: Path, bitsandbytes_linux_wheel: Path, tmp_path: Path
) -> None:
    windows = _members(bitsandbytes_windows_wheel)
    linux = _members(bitsandbytes_linux_wheel)
    dlls = {Path(n).stem: f for n, f in windows.items() if n.endswith(".dll") and "cuda" in n}
    sos = {Path(n).stem: f for n, f in linux.items() if n.endswith(".so") and "cuda" in n}
    assert dlls
    for stem, dll in dlls.items():
        assert dll.format is FileFormat.PE
        assert dll.device_code, stem
        assert {d.section for d in dll.device_code} <= {".nv_fatb", "__nv_rel", "__nv_relfatbin"}
        if stem in sos:
            assert sass_of(dll.device_code) == sass_of(sos[stem].device_code), stem
    cuobjdump = cuobjdump_path()
    if cuobjdump is not None:
        name = next(n for n in windows if n.endswith(".dll") and "cuda" in n)
        target = tmp_path / Path(name).name
        with zipfile.ZipFile(bitsandbytes_windows_wheel) as z:
            target.write_bytes(z.read(name))
        listing = cuobjdump_listing(cuobjdump, target)
        assert not listing.sass, "cuobjdump on Linux was expected to be unable to read PE files"


def test_macos_wheel_dylib_imports(bitsandbytes_macos_wheel: Path) -> None:
    members = _members(bitsandbytes_macos_wheel)
    with zipfile.ZipFile(bitsandbytes_macos_wheel) as z:
        dylibs = {n for n in z.namelist() if n.endswith(".dylib")}
    assert dylibs and set(members) == dylibs
    for name, f in members.items():
        assert f.format is FileFormat.MACHO, name
        assert f.host is not None and f.host.imports, name
        assert all(i.kind.value == "dylib" for i in f.host.imports), name
        assert any(i.library.startswith("/usr/lib/") for i in f.host.imports), name


@pytest.mark.slow
def test_cublaslt_device_code_outside_fatbin_sections(cublas_linux_wheel: Path, tmp_path: Path) -> None:
    """libcublasLt keeps containers in .cask_resource too. cuobjdump reads only the fatbin sections: outside
    .cask_resource its listing must equal cudaship's exactly; cudaship lists the rest as well."""
    cuobjdump = cuobjdump_path()
    if cuobjdump is None:
        pytest.skip("cuobjdump not installed (pip install nvidia-cuda-cuobjdump)")
    with zipfile.ZipFile(cublas_linux_wheel) as z:
        name = next(n for n in z.namelist() if Path(n).name.startswith("libcublasLt.so"))
        target = tmp_path / Path(name).name
        with z.open(name) as src, target.open("wb") as dst:
            while chunk := src.read(1 << 20):
                dst.write(chunk)
    report = inspect_paths([target])
    (f,) = report.files
    assert f.error is None, f.error
    sections = {d.section for d in f.device_code}
    assert ".nv_fatbin" in sections and ".cask_resource" in sections
    listing = cuobjdump_listing(cuobjdump, target)
    assert listing.complete, listing.message
    inside = [d for d in f.device_code if d.section != ".cask_resource"]
    assert as_cuobjdump_names(inside) == (listing.sass, listing.ptx)
    assert len(f.device_code) > sum(listing.sass.values()) + sum(listing.ptx.values())
    assert any(d.variant == "f" for d in f.device_code if d.kind is DeviceCodeKind.SASS)
