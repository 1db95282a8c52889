"""The audit says what repair removes (issue 32, class 11): a shipped copy of a library an NVIDIA wheel
provides is a warning naming that wheel and the bytes depending on it saves, and the copies the audit
names are exactly those ``repair`` removes, on real wheels that vendor (ctranslate2's cuDNN 8, cumm's CUDA
runtime and NVRTC) and on an auditwheel-repaired extension (libcudart)."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from cudaship.cli.main import main

PREFIX = "closure: vendored copy of "


def _audit_copies(wheel: Path, capsys: pytest.CaptureFixture[str]) -> dict[str, dict[str, object]]:
    main(["audit", str(wheel), "-f", "json"])
    checks = json.loads(capsys.readouterr().out)["checks"]
    out = {}
    for c in checks:
        if c["name"].startswith(PREFIX):
            assert c["rule"] == "vendored_nvidia" and c["severity"] == "warning" and c["status"] == "fail"
            out[c["name"].rsplit(" in ", 1)[1]] = c
    return out


def _removed(wheel: Path, capsys: pytest.CaptureFixture[str]) -> dict[str, dict[str, object]]:
    assert main(["repair", "--dry-run", str(wheel), "-f", "json"]) == 0
    (result,) = json.loads(capsys.readouterr().out)["wheels"]
    return {r["member"]: r for r in result["plan"]["removed"]}


@pytest.mark.parametrize(
    "fixture", ["auditwheel_vendored", "ctranslate2_vendoring_wheel", "cumm_vendoring_wheel"]
)
def test_audit_warns_about_what_repair_removes(
    fixture: str, request: pytest.FixtureRequest, capsys: pytest.CaptureFixture[str]
) -> None:
    wheel: Path = request.getfixturevalue(fixture)
    copies = _audit_copies(wheel, capsys)
    removed = _removed(wheel, capsys)
    assert removed, "the fixture vendors an NVIDIA wheel's library"
    assert set(copies) == set(removed)
    for member, check in copies.items():
        r = removed[member]
        assert str(r["project"]) in str(check["reason"])
        assert f"{r['size']:,} bytes" in str(check["reason"])


def test_torchvision_names_the_nvidia_wheels_and_the_bytes_repair_saves(
    torchvision_linux_wheel: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """Issue 32, class 11, on the wheel it names: torchvision vendors libcudart and libnvjpeg (auditwheel's
    hashed copies in torchvision.libs); repair removes both, and the audit warns about exactly those two,
    naming nvidia-cuda-runtime-cu12 / nvidia-nvjpeg-cu12 and the bytes saved."""
    copies = _audit_copies(torchvision_linux_wheel, capsys)
    removed = _removed(torchvision_linux_wheel, capsys)
    assert (
        set(copies)
        == set(removed)
        == {
            "torchvision.libs/libcudart.41118559.so.12",
            "torchvision.libs/libnvjpeg.02b6d700.so.12",
        }
    )
    cudart = str(copies["torchvision.libs/libcudart.41118559.so.12"]["reason"])
    nvjpeg = str(copies["torchvision.libs/libnvjpeg.02b6d700.so.12"]["reason"])
    assert "nvidia-cuda-runtime-cu12" in cudart and "707,904 bytes uncompressed" in cudart
    assert "nvidia-nvjpeg-cu12" in nvjpeg and "6,722,352 bytes uncompressed" in nvjpeg
    for member, check in copies.items():
        assert f"{removed[member]['size']:,} bytes" in str(check["reason"])


@pytest.mark.network
def test_an_nvidia_wheel_is_no_copy_of_its_own_library_for_another_major(
    cufile13_linux_wheel: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """nvidia-cufile (CUDA 13) ships libcufile.so.0 in nvidia/cu13/lib, its own directory; nvidia-cufile-cu12
    ships the same SONAME in nvidia/cufile/lib. The train the audit infers for it (12.x, from its code) chose
    CUDA 12's row, and the wheel was its own vendoring copy: a warning, and repair removed NVIDIA's library
    from NVIDIA's wheel."""
    assert _audit_copies(cufile13_linux_wheel, capsys) == {}
    assert _removed(cufile13_linux_wheel, capsys) == {}
