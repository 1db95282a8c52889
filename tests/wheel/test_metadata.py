"""METADATA, WHEEL and RECORD: parsed from real PyPI wheels and synthetic ones; markers evaluated for the
wheel's
own platform; every member's hash and size verified while it streams."""

from __future__ import annotations

import zipfile
from collections.abc import Callable
from pathlib import Path

import pytest

from cudaship.checks.wheelscan import scan_wheel
from cudaship.errors import WheelError
from cudaship.knowledge.platforms import platform_from_tag
from cudaship.wheel.metadata import parse_metadata, parse_record, parse_wheel_file, requirements_for
from tests.fixtures.synthetic_wheels import write_wheel


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
    assert [p.label for p in wheel.platforms] == ["linux-x86_64"]


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


@pytest.mark.network
@pytest.mark.parametrize(
    "fixture",
    ["cudart_linux_wheel", "cudart_windows_wheel", "bitsandbytes_windows_wheel"],
    ids=["cudart-linux", "cudart-windows", "bitsandbytes-windows"],
)
def test_real_wheels_match_their_record(fixture: str, request: pytest.FixtureRequest) -> None:
    path: Path = request.getfixturevalue(fixture)
    scan = scan_wheel(path)
    assert scan.record_problems == ()
    assert scan.unreadable == ()
    with zipfile.ZipFile(path) as zf:
        names = [i.filename for i in zf.infolist() if not i.is_dir()]
    assert sorted(m.name for m in scan.members) == sorted(names)
    listed = {e.path for e in scan.dist.record}
    assert listed == set(names)
    assert scan.dist.metadata.name.replace("_", "-").lower() in path.name.replace("_", "-").lower()


@pytest.mark.network
def test_parallel_scan_equals_serial(bitsandbytes_linux_wheel: Path) -> None:
    serial = scan_wheel(bitsandbytes_linux_wheel, workers=1)
    parallel = scan_wheel(bitsandbytes_linux_wheel, workers=2)
    assert serial.record_problems == parallel.record_problems == ()
    assert serial.reports == parallel.reports
    assert len(serial.reports) > 5


def _wheel(tmp_path: Path, **kw: object) -> Path:
    files = {"pkg/__init__.py": b"", "pkg/data.bin": b"\x00" * 1000}
    return write_wheel(tmp_path, name="pkg", version="1.0", tag="py3-none-any", files=files, **kw)  # type: ignore[arg-type]


def test_record_hash_mismatch(tmp_path: Path) -> None:
    scan = scan_wheel(_wheel(tmp_path, after_record={"pkg/data.bin": b"\x01" * 1000}))
    (problem,) = scan.record_problems
    assert (problem.kind, problem.path) == ("hash", "pkg/data.bin")


def test_record_size_mismatch(tmp_path: Path) -> None:
    scan = scan_wheel(_wheel(tmp_path, after_record={"pkg/data.bin": b"\x00" * 999}))
    assert {(p.kind, p.path) for p in scan.record_problems} == {
        ("hash", "pkg/data.bin"),
        ("size", "pkg/data.bin"),
    }


def test_record_unlisted_and_missing(tmp_path: Path) -> None:
    path = _wheel(tmp_path, unlisted={"pkg/extra.txt": b"x"})
    # drop a listed member by rewriting the zip without it
    dropped = tmp_path / "dropped.whl"
    with zipfile.ZipFile(path) as src, zipfile.ZipFile(dropped, "w") as dst:
        for info in src.infolist():
            if info.filename != "pkg/__init__.py":
                dst.writestr(info, src.read(info))
    scan = scan_wheel(dropped)
    assert {(p.kind, p.path) for p in scan.record_problems} == {
        ("unlisted", "pkg/extra.txt"),
        ("missing", "pkg/__init__.py"),
    }


@pytest.mark.parametrize(
    ("make", "message"),
    [
        (lambda p: p.write_bytes(b"not a zip"), "not a readable zip archive"),
        (lambda p: zipfile.ZipFile(p, "w").close(), "no .dist-info directory"),
    ],
    ids=["not-zip", "no-dist-info"],
)
def test_unreadable_wheel_is_one_line(tmp_path: Path, make: Callable[[Path], None], message: str) -> None:
    path = tmp_path / "x-1.0-py3-none-any.whl"
    make(path)
    with pytest.raises(WheelError) as info:
        scan_wheel(path)
    assert message in str(info.value)
    assert str(path) in str(info.value)


def test_truncated_wheel_is_one_line(tmp_path: Path) -> None:
    path = _wheel(tmp_path)
    data = path.read_bytes()
    cut = tmp_path / "cut-1.0-py3-none-any.whl"
    cut.write_bytes(data[: len(data) // 2])
    with pytest.raises(WheelError, match="not a readable zip archive"):
        scan_wheel(cut)


def test_zip_bomb_is_refused_without_inflating(tmp_path: Path) -> None:
    from cudaship.wheel import archive as archive_limits

    files = {"pkg/zeros.bin": b"\x00" * (archive_limits.RATIO_FLOOR + (1 << 20))}
    path = write_wheel(tmp_path, name="pkg", version="1.0", tag="py3-none-any", files=files)
    scan = scan_wheel(path)
    assert scan.unreadable == (
        (
            "pkg/zeros.bin",
            f"compression ratio 1028:1 over the {archive_limits.MAX_RATIO}:1 limit (zip bomb?)",
        ),
    )


def test_unreadable_member_is_not_also_missing(tmp_path: Path) -> None:
    from cudaship.wheel import archive as archive_limits

    files = {"pkg/zeros.bin": b"\x00" * (archive_limits.RATIO_FLOOR + (1 << 20))}
    scan = scan_wheel(write_wheel(tmp_path, name="pkg", version="1.0", tag="py3-none-any", files=files))
    assert scan.record_problems == ()


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
