"""What a newcomer meets in the first hour, each seen when tried as a new user would (issue 14): inputs that
check nothing, damaged wheels, GPU names as people write them, drivers old and unknown.

Each test runs the command line as a user types it and asserts what the user reads and the exit status.
"""

from __future__ import annotations

import zipfile
from pathlib import Path

import pytest

from cudaship.cli.main import main
from cudaship.exitcodes import ExitCode

REPO = Path(__file__).resolve().parents[2]
EXAMPLE = REPO / "examples" / "libvecadd.so"


def run(args: list[str], capsys: pytest.CaptureFixture[str]) -> tuple[int, str, str]:
    code = main(args)
    out, err = capsys.readouterr()
    return code, out, err


# -- inputs that check nothing -------------------------------------------------------------------------


@pytest.mark.parametrize("command", ["inspect", "gpus"])
def test_empty_directory_is_bad_input(command: str, tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    empty = tmp_path / "empty"
    empty.mkdir()
    code, out, err = run([command, str(empty)], capsys)
    assert code == ExitCode.BAD_INPUT
    assert f"cudaship: error: {empty}: empty directory: nothing to check" in err
    assert "0 file(s)" not in out


def test_directory_without_binaries_says_so(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    docs = tmp_path / "docs"
    (docs / "sub").mkdir(parents=True)
    (docs / "README.txt").write_text("hello\n")
    (docs / "sub" / "notes.md").write_text("# notes\n")
    code, _, err = run(["inspect", str(docs)], capsys)
    assert code == ExitCode.BAD_INPUT
    assert err == (
        f"cudaship: error: {docs}: no binary or wheel in this directory (2 file(s), none cudaship reads): "
        "nothing to check\n"
    )


def test_directory_without_binaries_does_not_hide_the_others(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    empty = tmp_path / "empty"
    empty.mkdir()
    code, out, err = run(["inspect", str(empty), str(EXAMPLE)], capsys)
    assert code == ExitCode.BAD_INPUT
    assert "sm_80" in out and "2 file(s), 1 read, 1 could not be read" in out
    assert err.count("\n") == 1


# -- damaged wheels ----------------------------------------------------------------------------------------


def _small_wheel(path: Path) -> Path:
    with zipfile.ZipFile(path, "w", zipfile.ZIP_DEFLATED) as zf:
        zf.write(EXAMPLE, "pkg/libvecadd.so")
        zf.writestr("pkg-1.0.dist-info/WHEEL", "Wheel-Version: 1.0\nTag: py3-none-any\n")
        zf.writestr("pkg-1.0.dist-info/METADATA", "Metadata-Version: 2.1\nName: pkg\nVersion: 1.0\n")
        zf.writestr("pkg-1.0.dist-info/RECORD", "")
    return path


@pytest.mark.parametrize("command", ["inspect", "gpus", "audit"])
def test_truncated_wheel_says_truncated(command: str, tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    whole = _small_wheel(tmp_path / "whole.zip").read_bytes()
    cut = tmp_path / "pkg-1.0-py3-none-any.whl"
    cut.write_bytes(whole[: len(whole) // 2])  # an interrupted download
    code, _, err = run([command, str(cut)], capsys)
    assert code == ExitCode.BAD_INPUT
    line = next(x for x in err.splitlines() if x.startswith("cudaship: error:"))
    assert line.startswith(f"cudaship: error: {cut}: not a readable zip archive: truncated or damaged: ")
    assert "cut short" in line and "BadZipFile" not in err


@pytest.mark.parametrize(
    ("content", "problem"),
    [
        pytest.param(b"", "empty file (a wheel is a zip archive)", id="empty"),
        pytest.param(b"<html>404 Not Found</html>", "the file is no zip at all (a wheel is one)", id="html"),
    ],
)
def test_not_a_zip_says_what_it_is(
    content: bytes, problem: str, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    bad = tmp_path / "pkg-1.0-py3-none-any.whl"
    bad.write_bytes(content)
    code, _, err = run(["audit", "--no-progress", str(bad)], capsys)
    assert code == ExitCode.BAD_INPUT
    assert err == f"cudaship: error: {bad}: not a readable zip archive: {problem}\n"
