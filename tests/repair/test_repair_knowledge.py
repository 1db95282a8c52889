"""The repair knowledge (data/repair.toml over nvidia_libraries.toml): names of copies, the wheel that
provides a library and the requirement repair declares, exclude lists."""

from __future__ import annotations

import pytest
from packaging.requirements import Requirement

from cudaship.knowledge.libraries import components, library_file, pypi_package
from cudaship.knowledge.repair import provided_names, provision, pypi_file_limit, unhashed, unprovided
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
    # nvidia-nvtx-cu12 12.9.x holds headers only: the range stops before it (repair_providers.toml)
    assert nvtx is not None and nvtx.requirement == 'nvidia-nvtx-cu12>=12.0,<12.9; sys_platform == "linux"'


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
    dlls = exclude_flags("delvewheel", [13])
    # one --exclude per DLL: delvewheel splits a value on its host's path separator (':' on Linux), so a
    # list joined with ';' was one unknown name there (issue 31)
    assert dlls[0::2] == ("--exclude",) * (len(dlls) // 2)
    assert "cudart64_13.dll" in dlls[1::2] and not [d for d in dlls[1::2] if ";" in d or ":" in d]


def test_pypi_limit() -> None:
    assert pypi_file_limit() == 100 * 1024 * 1024  # MAX_FILESIZE = 100 * ONE_MIB in warehouse


# issue 31: the provider of a library is chosen by the train's CUDA major and the library's own file, from
# repair_providers.toml (checked against the wheels' file lists by tests/knowledge/test_repair_providers.py)


@pytest.mark.parametrize(
    ("copy", "library", "project"),
    [
        # auditwheel names its copy after the file and sets the SONAME to that name (cumm-cu118 0.4.11)
        ("libcudart-d0da41ae.so.11.8.89", "libcudart.so.11.0", "nvidia-cuda-runtime-cu11"),
        ("libnvrtc-672ee683.so.11.8.89", "libnvrtc.so.11.2", "nvidia-cuda-nvrtc-cu11"),
        ("libcudart-5a077122.so.12.0.107", "libcudart.so.12", "nvidia-cuda-runtime-cu12"),
    ],
)
def test_copies_named_by_their_full_version(copy: str, library: str, project: str) -> None:
    major = int(library.split(".so.")[1].split(".")[0])
    p = provision(copy, "linux", major, 8, "x86_64")
    assert p is not None and (p.library, p.project) == (library, project)


def test_nvrtc_11_1_is_not_the_wheels_libnvrtc_so_11_2() -> None:
    # NVRTC 11.0 and 11.1 had their own SONAMEs (libnvrtc.so.11.1): no NVIDIA wheel ships them
    assert provision("libnvrtc-0123abcd.so.11.1.105", "linux", 11, 1, "x86_64") is None
    why = unprovided("libnvrtc-0123abcd.so.11.1.105", "linux", 11, "x86_64")
    assert why is not None and "libnvrtc.so.11.1.105" in why


def test_cudnn_8_in_a_cuda_12_wheel() -> None:
    linux = provision("libcudnn-463fd6d5.so.8.9.7", "linux", 12, 2, "x86_64")
    assert linux is not None and linux.requirement == 'nvidia-cudnn-cu12>=8,<9; sys_platform == "linux"'
    windows = provision("cudnn64_8.dll", "windows", 12, 2, "x86_64")
    assert windows is not None and windows.requirement == 'nvidia-cudnn-cu12>=8,<9; sys_platform == "win32"'
    # no aarch64 wheel of nvidia-cudnn-cu12 8.x: an aarch64 wheel keeps its copy
    assert provision("libcudnn.so.8", "linux", 12, 2, "aarch64") is None


@pytest.mark.parametrize(
    ("dll", "major", "text"),
    [
        ("cudnn64_8.dll", 11, 'nvidia-cudnn-cu11>=8,<9; sys_platform == "win32"'),
        ("cudnn64_9.dll", 12, 'nvidia-cudnn-cu12>=9,<10; sys_platform == "win32"'),
        ("cufft64_11.dll", 12, 'nvidia-cufft-cu12>=11,<12; sys_platform == "win32"'),
        ("curand64_10.dll", 12, 'nvidia-curand-cu12>=10,<11; sys_platform == "win32"'),
        ("cusolver64_11.dll", 12, 'nvidia-cusolver-cu12>=11,<12; sys_platform == "win32"'),
        ("cusparse64_12.dll", 12, 'nvidia-cusparse-cu12>=12,<13; sys_platform == "win32"'),
    ],
)
def test_windows_requirements_numbered_apart_are_bounded(dll: str, major: int, text: str) -> None:
    p = provision(dll, "windows", major, 2, "x86_64")
    assert p is not None and p.requirement == text


def test_nvtx_on_windows_has_no_wheel_to_point_at() -> None:
    # NVIDIA's Windows NVTX wheels hold headers only
    for major in (11, 12, 13):
        assert "nvToolsExt64_1.dll" not in provided_names(major, "windows")
        assert provision("nvToolsExt64_1.dll", "windows", major, 8, "x86_64") is None
    assert "nvToolsExt64_1.dll" not in exclude_flags("delvewheel", [11, 12, 13])
    why = unprovided("nvToolsExt64_1.dll", "windows", 12, "x86_64")
    assert why is not None and "headers only" in why


def test_why_a_cuda_library_is_kept() -> None:
    cuda10 = unprovided("libcudart-80664282.so.10.2.89", "linux", None, "x86_64")
    assert cuda10 is not None and "CUDA 10" in cuda10
    builtins = unprovided("libnvrtc-builtins-2dc4bf68.so.11.8.89", "linux", 11, "x86_64")
    assert builtins is not None and builtins.startswith("NVRTC's builtins")
    bare = unprovided("libcudart.so", "linux", 12, "x86_64")
    assert bare is not None and "no version" in bare
    sub = unprovided("libcudnn_ops_infer-1234abcd.so.8", "linux", 11, "x86_64")
    assert sub is not None and "cuDNN's sub-libraries" in sub
    nvtx10 = unprovided("libnvToolsExt-24de1d56.so.1", "linux", 10, "x86_64")
    assert nvtx10 is not None and nvtx10.startswith("no NVIDIA wheel for CUDA 10 ships libnvToolsExt.so.1")
    assert unprovided("libcudnn.so.8", "linux", 12, "x86_64") is None  # provided: nothing to explain
    assert unprovided("libcuda.so.1", "linux", 12, "x86_64") is None  # the driver's: not a wheel's business
    assert unprovided("libfoo.so.1", "linux", 12, "x86_64") is None
