"""Reading AOTInductor packages: real g++ libraries and nvcc cubins in the package layout; CPU exports."""

from __future__ import annotations

import zipfile
from collections.abc import Callable
from pathlib import Path

import pytest

from cudaship.errors import ProgramError
from cudaship.inspection.program import read_program
from cudaship.inspection.program_records import MemberRole
from cudaship.program.records import libstdcxx_copy
from tests.program.builders import aoti_metadata, gxx_library, make_pt2


@pytest.fixture
def cuda_package(tmp_path: Path, nvcc_build: Callable[[str], Path]) -> Path:
    wrapper = gxx_library(tmp_path / "lib", "wrapper")
    cubins = [nvcc_build("cubin_sm90a"), nvcc_build("cubin_sm90a")]
    return make_pt2(tmp_path / "model.pt2", wrapper, cubins)


def test_reads_layout_metadata_and_device_code(cuda_package: Path) -> None:
    info = read_program(cuda_package)
    assert info.kind.value == "pt2"
    assert (info.device, info.platform, info.machine) == ("cuda", "linux", "x86_64")
    assert info.compute_capability == "9.0"
    assert info.models == ("model",)
    assert info.sass == ("sm_90a",) and info.ptx == ()
    roles = [m.role for m in info.members]
    assert roles.count(MemberRole.CUBIN) == 2 and roles.count(MemberRole.WRAPPER) == 1
    assert len(info.device_code) == 2
    assert info.errors == () and info.notes == ()


def test_cudart_major_from_a_wrapper_that_imports_it(
    tmp_path: Path, nvcc_build: Callable[[str], Path]
) -> None:
    package = make_pt2(tmp_path / "m.pt2", nvcc_build("cudart_shared"), [nvcc_build("cubin_sm86")])
    assert read_program(package).cudart_majors == (13,)


def test_recorded_toolkit_is_the_ptxas_version(cuda_package: Path, nvcc_version: str) -> None:
    assert read_program(cuda_package).recorded_toolkits == (nvcc_version,)


@pytest.mark.parametrize("static", [True, False], ids=["static-libstdcxx", "dynamic-libstdcxx"])
def test_static_libstdcxx_detected(tmp_path: Path, static: bool) -> None:
    wrapper = gxx_library(tmp_path, "w", static_libstdcxx=static)
    info = read_program(make_pt2(tmp_path / "m.pt2", wrapper, metadata=aoti_metadata("cpu", None)))
    count = libstdcxx_copy(info.libraries[0].report)
    assert (count > 0) is static


def test_not_a_zip_is_one_line_error(tmp_path: Path) -> None:
    bad = tmp_path / "bad.pt2"
    bad.write_bytes(b"PK\x03\x04" + b"\0" * 100)
    with pytest.raises(ProgramError, match="not a zip archive") as e:
        read_program(bad)
    assert str(bad) in str(e.value) and "\n" not in str(e.value)


def test_truncated_package(cuda_package: Path, tmp_path: Path) -> None:
    cut = tmp_path / "cut.pt2"
    cut.write_bytes(cuda_package.read_bytes()[: cuda_package.stat().st_size // 2])
    with pytest.raises(ProgramError, match="not a zip"):
        read_program(cut)


def test_zip_without_model(tmp_path: Path) -> None:
    other = tmp_path / "other.pt2"
    with zipfile.ZipFile(other, "w") as z:
        z.writestr("README", "hello")
    with pytest.raises(ProgramError, match="no data/aotinductor"):
        read_program(other)


def test_corrupt_member_is_reported_not_raised(cuda_package: Path, tmp_path: Path) -> None:
    data = bytearray(cuda_package.read_bytes())
    with zipfile.ZipFile(cuda_package) as z:
        info = next(i for i in z.infolist() if i.filename.endswith(".cubin"))
    start = info.header_offset + 30 + len(info.filename.encode()) + len(info.extra)
    data[start + 200 : start + 260] = b"\xff" * 60  # inside the stored cubin: the CRC no longer matches
    broken = tmp_path / "crc.pt2"
    broken.write_bytes(bytes(data))
    result = read_program(broken)
    assert any("corrupt member" in e for e in result.errors)


def test_empty_file(tmp_path: Path) -> None:
    empty = tmp_path / "empty.pt2"
    empty.touch()
    with pytest.raises(ProgramError, match="empty file"):
        read_program(empty)


@pytest.mark.slow
@pytest.mark.filterwarnings("ignore::UserWarning", "ignore::FutureWarning", "ignore::DeprecationWarning")
def test_real_cpu_export(cpu_export: Path) -> None:
    info = read_program(cpu_export / "model.pt2")
    assert info.device == "cpu" and info.platform == "linux"
    assert info.device_code == ()
    assert any(m.role is MemberRole.WRAPPER for m in info.members)
    assert all(libstdcxx_copy(m.report) == 0 for m in info.libraries)
