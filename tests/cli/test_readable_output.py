"""Output a person can read (issue 35): what a newcomer reads first, counted and summarised, with the whole
list one flag away.

Each test runs the command line as a user types it and asserts what the user reads.
"""

from __future__ import annotations

import json
import zipfile
from collections.abc import Callable
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


# -- audit: a failure's reason said once, long lists counted ---------------------------------------------


def test_audit_never_repeats_a_reason_as_its_evidence(
    synthetic_wheel: Callable[[str], Path],
    capsys: pytest.CaptureFixture[str],
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.chdir(REPO)
    wheel = synthetic_wheel("win_arch_missing")
    args = ["--no-progress", "--policy", "examples/policies/windows.toml", str(wheel)]
    monkeypatch.setenv("GITHUB_ACTIONS", "true")  # the annotations: on stderr, the report on stdout
    code, out, err = run(["audit", *args], capsys)
    assert code == ExitCode.FINDINGS
    lines = out.splitlines()
    fail = lines.index("  FAIL  archs: executorch/backends/cuda/aoti_cuda_shims.dll — missing SASS sm_120")
    assert not lines[fail + 1].startswith("        - ")  # the reason said it, with the file in the name
    command = next(a for a in err.splitlines() if a.startswith("::error") and "missing SASS" in a)
    assert command.count("missing SASS sm_120") == 1


def test_audit_lines_count_long_lists(
    bitsandbytes_linux_wheel: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """The consistency line of bitsandbytes named every one of its libraries: 846 characters."""
    code, out, err = run(["audit", "--no-progress", str(bitsandbytes_linux_wheel)], capsys)
    assert code in (ExitCode.OK, ExitCode.FINDINGS), err
    assert max(len(line) for line in out.splitlines()) <= 480
    # "(3 build, 7 system)" read like a build path
    assert (
        "closure: bitsandbytes/libbitsandbytes_cuda118.so — 10 imports resolve (3 from another build of a "
        "requirement, 7 from the system)" in out
    )
    line = next(x for x in out.splitlines() if "consistency: CUDA train" in x)
    assert len(line) <= 240 and line.endswith(" more (-v or --format json show all)")
    _, verbose, _ = run(["audit", "--no-progress", "-v", str(bitsandbytes_linux_wheel)], capsys)
    whole = next(x for x in verbose.splitlines() if "consistency: CUDA train" in x)
    assert len(whole) > 800 and whole.startswith(line.split("; and ")[0])


# -- gpus DIR: libraries counted as libraries, wheels as wheels --------------------------------------------


def test_gpus_of_a_directory_counts_the_libraries_of_every_wheel(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """9 wheels holding 27 libraries with device code said "9 libraries with device code"."""
    dist = tmp_path / "dist"
    dist.mkdir()
    for name in ("pkg", "other", "third"):
        _wheel(dist / f"{name}-1.0-py3-none-any.whl", members=3)
    code, out, err = run(["gpus", "--no-progress", str(dist)], capsys)
    assert code == ExitCode.OK, err
    assert "all inputs: 9 libraries with device code in 3 wheels" in out.splitlines()
    assert "all 3 wheels with device code run natively" in out
    code, data, _ = run(["gpus", "--no-progress", "--format", "json", str(dist)], capsys)
    assert len(json.loads(data)["overall"]["files"]) == 9
