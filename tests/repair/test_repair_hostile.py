"""Repair meets the input contract of every reader: one line naming the file, exit 2, nothing written outside
-w, no partial wheel on failure, one bad wheel never hides the others."""

from __future__ import annotations

import hashlib
import zipfile
from pathlib import Path

import pytest

from cudaship.cli.main import main
from cudaship.errors import CudashipError
from cudaship.repair import elfedit

pytestmark = pytest.mark.slow


def _files(directory: Path) -> list[str]:
    return sorted(p.name for p in directory.iterdir()) if directory.exists() else []


def _one_error_line(err: str, path: Path) -> str:
    lines = [line for line in err.splitlines() if line.strip()]
    assert len(lines) == 1, err
    assert lines[0].startswith(f"cudaship: error: {path}: "), err
    assert "Traceback" not in err
    return lines[0]


def test_truncated_wheel(
    auditwheel_vendored: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    bad = tmp_path / auditwheel_vendored.name
    data = auditwheel_vendored.read_bytes()
    bad.write_bytes(data[: len(data) // 2])
    out = tmp_path / "out"
    assert main(["repair", str(bad), "-w", str(out)]) == 2
    _one_error_line(capsys.readouterr().err, bad)
    assert _files(out) == []


def test_record_that_disagrees_is_refused(
    auditwheel_vendored: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    bad = tmp_path / auditwheel_vendored.name
    with zipfile.ZipFile(auditwheel_vendored) as src, zipfile.ZipFile(bad, "w") as dst:
        for info in src.infolist():
            data = src.read(info)
            if info.filename == "cudemo/__init__.py":
                data += b"# changed after RECORD was written\n"
            dst.writestr(info, data)
    out = tmp_path / "out"
    assert main(["repair", str(bad), "-w", str(out)]) == 2
    line = _one_error_line(capsys.readouterr().err, bad)
    assert "RECORD disagrees" in line
    assert _files(out) == []


def test_not_a_zip_and_a_good_wheel(
    auditwheel_vendored: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    bad = tmp_path / "broken-1.0-py3-none-any.whl"
    bad.write_bytes(b"not a zip at all\n" * 10)
    out = tmp_path / "out"
    assert main(["repair", str(bad), str(auditwheel_vendored), "-w", str(out)]) == 2
    captured = capsys.readouterr()
    _one_error_line(captured.err, bad)
    assert _files(out) == [auditwheel_vendored.name], "the good wheel was not repaired"
    assert "removed    cudemo.libs/libcudart-" in captured.out


def test_output_never_replaces_the_input(
    auditwheel_vendored: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    here = tmp_path / auditwheel_vendored.name
    here.write_bytes(auditwheel_vendored.read_bytes())
    digest = hashlib.sha256(here.read_bytes()).hexdigest()
    assert main(["repair", str(here), "-w", str(tmp_path)]) == 2
    assert "would replace the input" in _one_error_line(capsys.readouterr().err, here)
    assert hashlib.sha256(here.read_bytes()).hexdigest() == digest
    assert _files(tmp_path) == [here.name]


def test_a_failed_edit_leaves_no_partial_wheel(
    auditwheel_vendored: Path,
    tmp_path: Path,
    capsys: pytest.CaptureFixture[str],
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    calls: list[int] = []

    def failing(path: Path, replace: object, runpath: object, **options: object) -> str:
        calls.append(path.stat().st_size)
        raise CudashipError("patchelf failed: cannot edit this file")

    monkeypatch.setattr(elfedit, "edit_file", failing)
    out = tmp_path / "out"
    assert main(["repair", str(auditwheel_vendored), "-w", str(out)]) == 2
    assert "patchelf failed" in _one_error_line(capsys.readouterr().err, auditwheel_vendored)
    assert calls, "the edit was never attempted"
    assert _files(out) == []


def test_missing_directory_option_is_a_usage_error(
    auditwheel_vendored: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    assert main(["repair", str(auditwheel_vendored)]) == 2
    err = capsys.readouterr().err
    assert err.startswith("cudaship: error: repair: give -w DIR"), err


def test_missing_file_and_fifo(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    import os

    fifo = tmp_path / "fifo-1.0-py3-none-any.whl"
    os.mkfifo(fifo)  # never opened for reading by anyone: repair must not block on it
    missing = tmp_path / "missing-1.0-py3-none-any.whl"
    out = tmp_path / "out"
    assert main(["repair", str(missing), str(fifo), "-w", str(out)]) == 2
    lines = capsys.readouterr().err.splitlines()
    assert lines == [
        f"cudaship: error: {missing}: No such file or directory",
        f"cudaship: error: {fifo}: not a regular file (a FIFO)",
    ]
    assert _files(out) == []
