"""METADATA, WHEEL and RECORD parsed; markers evaluated for the wheel's own platform. (Every member's hash
and size verified while it streams: the scan's, tests/inspection/test_scan.py.)"""

from __future__ import annotations

import pytest

from cudaship.errors import WheelError
from cudaship.knowledge.platforms import platform_from_tag, platforms_of_tags
from cudaship.wheel.metadata import parse_metadata, parse_record, parse_wheel_file, requirements_for


@pytest.mark.parametrize(
    ("tag", "os_name", "machine"),
    [
        ("win_amd64", "windows", "x86_64"),
        ("win_arm64", "windows", "aarch64"),
        ("win32", "windows", "x86"),
        ("manylinux_2_28_x86_64", "linux", "x86_64"),
        ("manylinux2014_aarch64", "linux", "aarch64"),
        ("musllinux_1_2_x86_64", "linux", "x86_64"),
        ("linux_x86_64", "linux", "x86_64"),
        ("macosx_14_0_arm64", "macos", "aarch64"),
        ("macosx_11_0_universal2", "macos", None),
        ("any", "any", None),
    ],
    ids=lambda v: str(v),
)
def test_platform_from_tag(tag: str, os_name: str, machine: str | None) -> None:
    platform = platform_from_tag(tag)
    assert (platform.os, platform.machine) == (os_name, machine)


REQUIRES = (
    "nvidia-cuda-runtime>=13,<14; platform_system == 'Linux'",
    "nvidia-cublas>=13; sys_platform == 'linux' and platform_machine == 'x86_64'",
    "pywin32; os_name == 'nt'",
    "numpy>=2",
    "pytest; extra == 'test'",
)


@pytest.mark.parametrize(
    ("os_name", "machine", "expected"),
    [
        ("linux", "x86_64", {"nvidia-cuda-runtime", "nvidia-cublas", "numpy"}),
        ("linux", "aarch64", {"nvidia-cuda-runtime", "numpy"}),
        ("windows", "x86_64", {"pywin32", "numpy"}),
        ("macos", "aarch64", {"numpy"}),
    ],
    ids=["linux-x86_64", "linux-aarch64", "windows", "macos"],
)
def test_markers_for_the_target_platform(os_name: str, machine: str, expected: set[str]) -> None:
    assert {r.name for r in requirements_for(REQUIRES, os_name, machine)} == expected


def test_specifier_is_normalized() -> None:
    (req,) = requirements_for(["nvidia_Cuda_Runtime <14, >=13"], "linux", "x86_64")
    assert req.name == "nvidia-cuda-runtime"
    assert req.specifier == "<14,>=13"


def test_invalid_requirement_is_one_line() -> None:
    with pytest.raises(WheelError, match="Requires-Dist 'nvidia-cuda-runtime>=>13' is invalid"):
        requirements_for(["nvidia-cuda-runtime>=>13"], "linux", "x86_64")


def test_metadata_local_tag() -> None:
    meta = parse_metadata(
        b"Metadata-Version: 2.1\nName: executorch\nVersion: 1.6.0+cu132\nRequires-Dist: a>=1\n"
    )
    assert (meta.name, meta.version, meta.local, meta.requires_dist) == (
        "executorch",
        "1.6.0+cu132",
        "cu132",
        ("a>=1",),
    )


@pytest.mark.parametrize(
    ("text", "message"),
    [
        (b"Metadata-Version: 2.1\nVersion: 1.0\n", "METADATA has no Name"),
        (b"Metadata-Version: 2.1\nName: x\n", "METADATA has no Version"),
        (b"Name: x\nVersion: one\n", "is not a valid version"),
    ],
    ids=["no-name", "no-version", "bad-version"],
)
def test_bad_metadata(text: bytes, message: str) -> None:
    with pytest.raises(WheelError, match=message):
        parse_metadata(text)


def test_wheel_file_tags_expand() -> None:
    wheel = parse_wheel_file(
        b"Wheel-Version: 1.0\nRoot-Is-Purelib: false\n"
        b"Tag: py3-none-manylinux_2_17_x86_64.manylinux2014_x86_64\n"
    )
    assert wheel.tags == ("py3-none-manylinux_2_17_x86_64", "py3-none-manylinux2014_x86_64")
    assert [p.label for p in platforms_of_tags(wheel.tags)] == ["linux-x86_64"]


@pytest.mark.parametrize(
    ("text", "message"),
    [
        (b"a,sha256=x\n", "has 2 fields"),
        (b"a,sha256,1\n", "is not algo=digest"),
        (b"a,md5=abc,1\n", "'md5' is not allowed"),
        (b"a,sha256=abc,big\n", "size 'big' is not a number"),
    ],
    ids=["fields", "no-equals", "md5", "size"],
)
def test_bad_record(text: bytes, message: str) -> None:
    with pytest.raises(WheelError, match=message):
        parse_record(text)


@pytest.mark.parametrize(
    ("member", "installed"),
    [
        ("pkg/lib/a.so", "pkg/lib/a.so"),
        ("pkg-1.0.data/platlib/pkg/lib/a.so", "pkg/lib/a.so"),
        ("pkg-1.0.data/purelib/pkg/x.py", "pkg/x.py"),
        ("pkg-1.0.data/scripts/tool", None),
        ("pkg-1.0.data/headers/a.h", None),
    ],
    ids=["root", "platlib", "purelib", "scripts", "headers"],
)
def test_install_path(member: str, installed: str | None) -> None:
    from cudaship.wheel.metadata import install_path

    assert install_path(member, "pkg-1.0.dist-info") == installed
