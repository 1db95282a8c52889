"""Program packages (``inspection/pt2.py``, ``pte.py``, ``program.py``): reading one writes nothing named
after its members, a zip bomb inside a .pt2 is refused without unpacking, and provenance.json cannot point the
reader outside the export directory."""

from __future__ import annotations

import json
import tempfile
import zipfile
from pathlib import Path

import pytest

from cudaship.errors import ProgramError
from cudaship.inspection.program import read_program
from tests.security.builders import SYMLINK, Jail, M, snapshot, zip_bytes

COMPRESSIONS = [zipfile.ZIP_STORED, zipfile.ZIP_DEFLATED]
ELF = b"\x7fELF\x02\x01\x01" + bytes(57) + b"payload" * 200
BASE = "model/data/aotinductor/model"


@pytest.fixture
def jail(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Jail:
    jail = Jail(tmp_path / "jail")
    for name in ("tmp", "cwd"):
        (jail.dest / name).mkdir()
    monkeypatch.setattr(tempfile, "tempdir", str(jail.dest / "tmp"))
    monkeypatch.chdir(jail.dest / "cwd")
    return jail


def _pt2(tmp_path: Path, members: list[M], compression: int = zipfile.ZIP_DEFLATED) -> Path:
    path = tmp_path / "model.pt2"
    meta = M(f"{BASE}/x.wrapper_metadata.json", json.dumps({"AOTI_DEVICE_KEY": "cuda"}).encode())
    path.write_bytes(zip_bytes([M("model/archive_format", b"pt2"), meta, *members], compression))
    return path


@pytest.mark.parametrize(
    "compression", [zipfile.ZIP_STORED, zipfile.ZIP_DEFLATED], ids=["stored", "deflated"]
)
def test_hostile_member_names_write_nothing(jail: Jail, tmp_path: Path, compression: int) -> None:
    members = [
        M(f"{BASE}/../../../../outside/evil.wrapper.so", ELF),
        M(f"/tmp/{BASE}/cudaship-security-evil.so", ELF),
        M(f"{BASE}\\..\\..\\evil.dll", ELF),
        M(f"C:\\{BASE}\\evil.wrapper.dll", ELF),
        M(f"{BASE}/link.wrapper.so", "../../../../../etc/passwd", SYMLINK),
        M(f"{BASE}/kernel.cubin", ELF),
    ]
    info = read_program(_pt2(tmp_path, members, compression))
    assert info.models == ("model",)
    jail.assert_untouched()
    assert snapshot(jail.dest) == {"tmp": (0, 2, ""), "cwd": (0, 2, "")}


def test_zip_bomb_member_is_refused(jail: Jail, tmp_path: Path) -> None:
    bomb = b"\x7fELF" + bytes(256 << 20)
    info = read_program(_pt2(tmp_path, [M(f"{BASE}/x.wrapper.so", bomb)]))
    (member,) = [m for m in info.members if m.name.endswith("x.wrapper.so")]
    assert member.report is not None and member.report.error is not None
    assert "zip bomb" in member.report.error
    assert snapshot(jail.dest / "tmp") == {}


@pytest.mark.parametrize(
    "package",
    ["../outside/model.pt2", "/etc/passwd", "..\\model.pt2", "C:model.pt2", ".hidden.pt2"],
    ids=["dotdot", "absolute", "backslash", "drive", "dot"],
)
def test_provenance_cannot_name_a_file_outside_the_directory(tmp_path: Path, package: str) -> None:
    export = tmp_path / "export"
    export.mkdir()
    (export / "provenance.json").write_text(
        json.dumps(
            {
                "schema": 1,
                "package": package,
                "package_sha256": "0" * 64,
                "torch_version": "2.11.0+cu130",
                "device": "cuda",
                "target_platform": "linux-x86_64",
            }
        )
    )
    with pytest.raises(ProgramError, match="must name a file in the directory") as err:
        read_program(export)
    assert "\n" not in str(err.value)
