"""Wheel members never become files named after themselves: inspect (``wheel/archive.py``) and audit
(``inspection/scan.py``) read stored members in place and unpack deflated ones into anonymous temporary
files, which are gone when the member has been read. Hostile names, links and bombs change nothing on disk."""

from __future__ import annotations

import stat
import tempfile
import tracemalloc
import zipfile
from contextlib import suppress
from pathlib import Path

import pytest

from cudaship.errors import CudashipError
from cudaship.inspection.scan import scan as scan_wheel
from cudaship.inspection.walk import inspect_paths
from tests.security.builders import SYMLINK, Jail, M, snapshot, zip_bytes

COMPRESSIONS = [zipfile.ZIP_STORED, zipfile.ZIP_DEFLATED]
ELF = b"\x7fELF\x02\x01\x01" + bytes(57) + b"payload" * 200
HOSTILE_NAMES = (
    "../../outside/evil.so",
    "/tmp/cudaship-security-evil.so",
    "C:\\Windows\\evil.dll",
    "\\\\host\\share\\evil.dll",
    "pkg/../../../outside/evil.so",
)
DIST = [
    M("pkg-1.0.dist-info/METADATA", b"Metadata-Version: 2.1\nName: pkg\nVersion: 1.0\n"),
    M("pkg-1.0.dist-info/WHEEL", b"Wheel-Version: 1.0\nRoot-Is-Purelib: false\nTag: py3-none-linux_x86_64\n"),
    M("pkg-1.0.dist-info/RECORD", b""),
]


@pytest.fixture
def jail(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Jail:
    """A jail whose ``tmp`` is the temporary directory and whose ``cwd`` is the working directory."""
    jail = Jail(tmp_path / "jail")
    for name in ("tmp", "cwd"):
        (jail.dest / name).mkdir()
    monkeypatch.setattr(tempfile, "tempdir", str(jail.dest / "tmp"))
    monkeypatch.chdir(jail.dest / "cwd")
    return jail


def _read_everything(wheel: Path) -> None:
    inspect_paths([wheel], details=True)
    with suppress(CudashipError):
        scan_wheel(wheel, workers=1)


@pytest.mark.parametrize(
    "compression", [zipfile.ZIP_STORED, zipfile.ZIP_DEFLATED], ids=["stored", "deflated"]
)
def test_hostile_member_names_write_nothing(jail: Jail, tmp_path: Path, compression: int) -> None:
    members = [M(name, ELF) for name in HOSTILE_NAMES]
    members.append(M("pkg/link.so", "../../../../../etc/passwd", SYMLINK))
    wheel = tmp_path / "pkg-1.0-py3-none-linux_x86_64.whl"
    wheel.write_bytes(zip_bytes(members + DIST, compression))
    _read_everything(wheel)
    jail.assert_untouched()
    assert snapshot(jail.dest) == {"tmp": (0, 2, ""), "cwd": (0, 2, "")}  # no temp file left, nothing in cwd
    assert not Path("/tmp/cudaship-security-evil.so").exists()


def test_link_members_are_read_as_their_bytes_not_followed(jail: Jail, tmp_path: Path) -> None:
    wheel = tmp_path / "pkg-1.0-py3-none-linux_x86_64.whl"
    wheel.write_bytes(zip_bytes([M("pkg/libx.so", "/etc/passwd", SYMLINK), *DIST]))
    report = inspect_paths([wheel])
    (member,) = [f for f in report.files if f.path == "pkg/libx.so"]
    assert member.size == len("/etc/passwd")
    assert member.error is not None  # eleven bytes of text: not a binary
    mode = zipfile.ZipFile(wheel).getinfo("pkg/libx.so").external_attr >> 16
    assert stat.S_ISLNK(mode)


def test_zip_bomb_member_is_refused_without_unpacking(jail: Jail, tmp_path: Path) -> None:
    bomb = bytes(256 << 20)  # 256 MiB of zeros: about 250 KiB deflated, a ratio near 1000:1
    wheel = tmp_path / "pkg-1.0-py3-none-linux_x86_64.whl"
    wheel.write_bytes(zip_bytes([M("pkg/libbomb.so", b"\x7fELF" + bomb), *DIST]))
    del bomb
    tracemalloc.start()
    try:
        report = inspect_paths([wheel])
        peak = tracemalloc.get_traced_memory()[1]
    finally:
        tracemalloc.stop()
    (member,) = [f for f in report.files if f.path == "pkg/libbomb.so"]
    assert member.error is not None and "zip bomb" in member.error
    assert peak < 16 << 20
    with pytest.raises(CudashipError, match="bomb"):
        result = scan_wheel(wheel, workers=1)
        raise CudashipError("; ".join(error for _, error in result.unreadable))
    jail.assert_untouched()
    assert snapshot(jail.dest / "tmp") == {}
