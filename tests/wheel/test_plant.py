"""The planted-defect helper (tests/fixtures/plant.py): only planted members differ, RECORD stays valid."""

from __future__ import annotations

import csv
import hashlib
import io
import zipfile
from pathlib import Path

import pytest

from tests.fixtures.plant import (
    changed_members,
    dist_info,
    drop_requirement,
    plant,
    record_hash,
    replace_bytes,
)
from tests.fixtures.synthetic_wheels import write_wheel


def _wheel(tmp_path: Path) -> Path:
    files = {"pkg/__init__.py": b"", "pkg/lib.so": b"\x7fELF" + b"sm_90 " * 100, "pkg/data.txt": b"x" * 5000}
    out = tmp_path / "src"
    out.mkdir()
    return write_wheel(
        out,
        name="pkg",
        version="1.0",
        tag="py3-none-linux_x86_64",
        files=files,
        requires=("nvidia-cuda-runtime-cu12>=12", "numpy"),
    )


def _record(wheel: Path) -> dict[str, tuple[str, str]]:
    with zipfile.ZipFile(wheel) as zf:
        text = zf.read(f"{dist_info(wheel)}/RECORD").decode()
    return {row[0]: (row[1], row[2]) for row in csv.reader(io.StringIO(text)) if row}


def _record_valid(wheel: Path) -> None:
    with zipfile.ZipFile(wheel) as zf:
        assert zf.testzip() is None
        for path, (digest, size) in _record(wheel).items():
            if path.endswith("/RECORD"):
                assert digest == ""
                continue
            data = zf.read(path)
            assert digest == record_hash(data), path
            assert size == str(len(data)), path


def test_plant_changes_only_the_planted_member(tmp_path: Path) -> None:
    src = _wheel(tmp_path)
    out = plant(src, tmp_path / "out", replace={"pkg/lib.so": replace_bytes(b"sm_90", b"sm_80", count=100)})
    assert out.name == src.name
    assert changed_members(src, out) == {"pkg/lib.so", "pkg-1.0.dist-info/RECORD"}
    _record_valid(out)
    with zipfile.ZipFile(out) as zf:
        assert zf.read("pkg/lib.so").count(b"sm_80") == 100
    before, after = _record(src), _record(out)
    assert {k for k in before if before[k] != after.get(k)} == {"pkg/lib.so"}
    # the unchanged members were copied raw: same compressed bytes
    with zipfile.ZipFile(src) as a, zipfile.ZipFile(out) as b:
        assert a.getinfo("pkg/data.txt").compress_size == b.getinfo("pkg/data.txt").compress_size


def test_plant_edits_metadata_removes_and_adds(tmp_path: Path) -> None:
    src = _wheel(tmp_path)
    meta = "pkg-1.0.dist-info/METADATA"
    out = plant(
        src,
        tmp_path / "out",
        replace={meta: drop_requirement("nvidia_cuda_runtime_cu12")},
        remove=["pkg/data.txt"],
        add={"pkg/extra.so": b"new"},
    )
    assert changed_members(src, out) == {meta, "pkg/data.txt", "pkg/extra.so", "pkg-1.0.dist-info/RECORD"}
    _record_valid(out)
    record = _record(out)
    assert "pkg/data.txt" not in record
    assert record["pkg/extra.so"] == (record_hash(b"new"), "3")
    assert list(record)[-1] == "pkg-1.0.dist-info/RECORD"
    with zipfile.ZipFile(out) as zf:
        text = zf.read(meta).decode()
    assert "nvidia-cuda-runtime" not in text
    assert "Requires-Dist: numpy" in text


def test_plant_refuses_unknown_members_and_bad_patches(tmp_path: Path) -> None:
    src = _wheel(tmp_path)
    with pytest.raises(KeyError):
        plant(src, tmp_path / "out", remove=["pkg/nothing.so"])
    with pytest.raises(ValueError):
        plant(src, tmp_path / "out", replace={"pkg/lib.so": replace_bytes(b"sm_90", b"sm_80")})
    with pytest.raises(ValueError):
        plant(src, src.parent)
    with pytest.raises(ValueError):
        replace_bytes(b"a", b"bb")


@pytest.mark.network
def test_plant_on_a_real_wheel(bitsandbytes_windows_wheel: Path, tmp_path: Path) -> None:
    meta = f"{dist_info(bitsandbytes_windows_wheel)}/METADATA"
    out = plant(bitsandbytes_windows_wheel, tmp_path, replace={meta: lambda b: b + b"\n"})
    assert changed_members(bitsandbytes_windows_wheel, out) == {meta, meta.replace("METADATA", "RECORD")}
    _record_valid(out)
    digest = hashlib.sha256(out.read_bytes()).hexdigest()
    assert digest != hashlib.sha256(bitsandbytes_windows_wheel.read_bytes()).hexdigest()
