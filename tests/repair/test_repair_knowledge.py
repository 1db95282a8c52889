"""The repair knowledge (data/repair.toml over nvidia_libraries.toml): names of copies, the wheel that
provides a library and the requirement repair declares, exclude lists."""

from __future__ import annotations

import pytest
from packaging.requirements import Requirement

from cudaship.knowledge.libraries import components, library_file, pypi_package
from cudaship.knowledge.repair import provided_names, provision, pypi_file_limit, unhashed
from cudaship.repair.excludes import exclude_flags


@pytest.mark.parametrize(
    ("name", "os", "plain"),
    [
        ("libcudart-96c42e41.so.13", "linux", "libcudart.so.13"),
        ("libcublasLt-0123abcd.so.12", "linux", "libcublasLt.so.12"),
        ("libcudart.so.13", "linux", "libcudart.so.13"),
        ("libfoo-bar.so.1", "linux", "libfoo-bar.so.1"),  # not 8 hex digits: a name, not a hash
        ("cudart64_13-a55e90393a19a36b45c623ef23fe3f4a.dll", "windows", "cudart64_13.dll"),
        ("cudart64_13.dll", "windows", "cudart64_13.dll"),
    ],
)
def test_unhashed(name: str, os: str, plain: str) -> None:
    assert unhashed(name, os) == plain  # type: ignore[arg-type]


@pytest.mark.parametrize("major", [12, 13])
def test_every_provided_linux_library_points_at_its_wheel(major: int) -> None:
    checked = 0
    for comp in components():
        pkg = pypi_package(comp, major, "linux")
        name = library_file(comp, major, "linux")
        if pkg is None or name is None:
            continue
        p = provision(f"{name.split('.so')[0]}-0123abcd.so{name.split('.so')[1]}", "linux", major, 8)
        assert p is not None, name
        assert (p.library, p.directory, p.major) == (name, pkg.directory, major)
        req = Requirement(p.requirement)
        assert str(req.marker) == 'sys_platform == "linux"'
        if p.extra is not None:
            assert req.name == "cuda-toolkit" and req.extras == {p.extra}
            assert str(req.specifier) == f"<{major + 1},>={major}.8"
        else:
            assert req.name == pkg.project
        checked += 1
    assert checked >= 12


def test_cuda_12_and_13_forms() -> None:
    p12 = provision("libcudart.so.12", "linux", 12, 8)
    assert (
        p12 is not None and p12.requirement == 'nvidia-cuda-runtime-cu12>=12.8,<13; sys_platform == "linux"'
    )
    p13 = provision("libcublasLt.so.13", "linux", 13, 0)
    assert p13 is not None and p13.requirement == 'cuda-toolkit[cublas]>=13.0,<14; sys_platform == "linux"'
    cufft12 = provision("libcufft.so.11", "linux", 12, 8)
    assert cufft12 is not None and cufft12.requirement == 'nvidia-cufft-cu12>=11,<12; sys_platform == "linux"'
    # ctranslate2 3.24.0 ships libcudnn.so.8.1.1: nvidia-cudnn-cu11 9.x would install libcudnn.so.9 instead
    cudnn8 = provision("libcudnn-f0ff4753.so.8.1.1", "linux", 11, 2)
    assert cudnn8 is not None and cudnn8.library == "libcudnn.so.8"
    assert cudnn8.requirement == 'nvidia-cudnn-cu11>=8,<9; sys_platform == "linux"'
    nvtx = provision("libnvToolsExt.so.1", "linux", 12, 8)
    assert nvtx is not None and nvtx.requirement == 'nvidia-nvtx-cu12>=12.8,<13; sys_platform == "linux"'


def test_what_no_wheel_provides() -> None:
    assert provision("libcuda.so.1", "linux", 13, 0) is None  # the driver's
    assert provision("libfoo.so.1", "linux", 13, 0) is None
    assert provision("libcudart.so.12", "linux", 13, 0) is not None  # its own major: 12
    assert provision("libcurand.so.10", "linux", None, None) is None  # 11, 12 and 13 ship that name


def test_exclude_flags() -> None:
    flags = exclude_flags("auditwheel", [13])
    assert flags[0::2] == ("--exclude",) * (len(flags) // 2)
    assert set(flags[1::2]) == set(provided_names(13, "linux"))
    assert "libcudart.so.13" in flags and "libcuda.so.1" not in flags
    both = exclude_flags("auditwheel", [12, 13])
    assert {"libcudart.so.12", "libcudart.so.13"} <= set(both)
    (opt, dlls) = exclude_flags("delvewheel", [13])
    assert opt == "--exclude" and "cudart64_13.dll" in dlls.split(";")


def test_pypi_limit() -> None:
    """100 MiB: warehouse/constants.py's MAX_FILESIZE = 100 * ONE_MIB (it was 100,000,000 here, issue 35)."""
    assert pypi_file_limit() == 100 * 1024 * 1024
