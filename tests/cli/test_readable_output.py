"""Output a person can read (issue 35): what a newcomer reads first, counted and summarised, with the whole
list one flag away.

Each test runs the command line as a user types it and asserts what the user reads.
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


def _wheel(path: Path, members: int = 2) -> Path:
    with zipfile.ZipFile(path, "w", zipfile.ZIP_DEFLATED) as zf:
        for i in range(members):
            zf.write(EXAMPLE, f"pkg/libvecadd{i}.so")
        zf.writestr("pkg-1.0.dist-info/WHEEL", "Wheel-Version: 1.0\nTag: py3-none-any\n")
        zf.writestr("pkg-1.0.dist-info/METADATA", "Metadata-Version: 2.1\nName: pkg\nVersion: 1.0\n")
        zf.writestr("pkg-1.0.dist-info/RECORD", "")
    return path


# -- inspect: counts by default, names with -v, and the wheel's arch summary ---------------------------


def test_inspect_of_a_wheel_counts_exports_and_ends_with_its_arch_summary(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    wheel = _wheel(tmp_path / "pkg-1.0-py3-none-any.whl")
    code, out, err = run(["inspect", "--no-progress", str(wheel)], capsys)
    assert code == ExitCode.OK, err
    lines = out.splitlines()
    assert not any(line.startswith("    _Z") or line.startswith("    vecadd") for line in lines)
    assert sum(1 for line in lines if line.startswith("  exports: ") and "(-v lists them)" in line) == 2
    # the file's own summary names its archs; the wheel's sums them up over its members
    member = next(line for line in lines if line.startswith("  summary: "))
    archs = member.removeprefix("  summary: ").rsplit(" | ", 1)[0]
    assert f"wheel summary: device code in 2 of 2 files: {archs}" in lines
    assert lines.index(f"wheel summary: device code in 2 of 2 files: {archs}") > lines.index(member)

    code, verbose, _ = run(["inspect", "--no-progress", "-v", str(wheel)], capsys)
    assert code == ExitCode.OK
    assert verbose.count("  exports (") == 2 and "(-v lists them)" not in verbose
