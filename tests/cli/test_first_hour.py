"""What a newcomer meets in the first hour, each seen when tried as a new user would (issue 14): inputs that
check nothing, damaged wheels, GPU names as people write them, drivers old and unknown.

Each test runs the command line as a user types it and asserts what the user reads and the exit status.
"""

from __future__ import annotations

import json
import shutil
import subprocess
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
def test_empty_directory_is_bad_input(
    command: str, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    empty = tmp_path / "empty"
    empty.mkdir()
    code, out, err = run([command, str(empty)], capsys)
    assert code == ExitCode.BAD_INPUT
    assert f"cudaship: error: {empty}: empty directory: nothing to check" in err
    assert "0 files" not in out


def test_directory_without_binaries_says_so(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    docs = tmp_path / "docs"
    (docs / "sub").mkdir(parents=True)
    (docs / "README.txt").write_text("hello\n")
    (docs / "sub" / "notes.md").write_text("# notes\n")
    code, _, err = run(["inspect", str(docs)], capsys)
    assert code == ExitCode.BAD_INPUT
    assert err == (
        f"cudaship: error: {docs}: no binary or wheel in this directory (2 files, none cudaship reads): "
        "nothing to check\n"
    )


def test_directory_without_binaries_does_not_hide_the_others(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    empty = tmp_path / "empty"
    empty.mkdir()
    code, out, err = run(["inspect", str(empty), str(EXAMPLE)], capsys)
    assert code == ExitCode.BAD_INPUT
    assert "sm_80" in out and "2 files, 1 read, 1 could not be read" in out
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
def test_truncated_wheel_says_truncated(
    command: str, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
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


# -- GPU names as people write them -----------------------------------------------------------------------


@pytest.mark.parametrize(
    ("gpu", "row"),
    [
        ("RTX 4090", "8.9 Ada"),
        ("RTX 6000 Ada", "8.9 Ada"),
        ("GeForce RTX 4090", "8.9 Ada"),
        ("NVIDIA GeForce RTX 4090", "8.9 Ada"),
        ("nvidia geforce rtx-4090", "8.9 Ada"),
        ("4090", "8.9 Ada"),  # a part of exactly one capability's names
        ("NVIDIA H100 80GB HBM3", "9.0 Hopper"),  # as nvidia-smi names it
        ("Tesla T4", "7.5 Turing"),
    ],
)
def test_gpu_names_with_spaces_and_vendor_words(
    gpu: str, row: str, capsys: pytest.CaptureFixture[str]
) -> None:
    code, out, err = run(["gpus", "--gpu", gpu, str(EXAMPLE)], capsys)
    assert code == ExitCode.OK, err
    rows = [line for line in out.splitlines() if line.startswith("  ") and line.split()[0][0].isdigit()]
    assert len(rows) == 1 and rows[0].lstrip().startswith(row), out


def test_several_gpus_by_comma_or_space(capsys: pytest.CaptureFixture[str]) -> None:
    code, out, _ = run(["gpus", "--gpu", "RTX 5090, H100", "--gpu", "8.6 8.0", str(EXAMPLE)], capsys)
    assert code == ExitCode.OK
    shown = [
        line.split()[0] for line in out.splitlines() if line.startswith("  ") and line.split()[0][0].isdigit()
    ]
    assert shown[:4] == ["8.0", "8.6", "9.0", "12.0"]


@pytest.mark.parametrize(
    ("gpu", "suggested"),
    [
        ("rtx 409", "RTX 4090"),
        ("6000", "RTX 6000 Ada, RTX PRO 6000 Blackwell"),  # several capabilities: ambiguous, so suggested
        ("H10", "H100"),
    ],
)
def test_unknown_gpu_suggests_close_names_and_never_a_data_file(
    gpu: str, suggested: str, capsys: pytest.CaptureFixture[str]
) -> None:
    code, out, err = run(["gpus", "--gpu", gpu, str(EXAMPLE)], capsys)
    assert code == ExitCode.BAD_INPUT and out == ""
    assert err.startswith(f"cudaship: error: --gpu: unknown GPU '{gpu}' (did you mean {suggested}")
    assert err.rstrip().endswith("give its compute capability instead, e.g. 8.6")
    assert ".toml" not in err and err.count("\n") == 1


# -- drivers old and unknown ------------------------------------------------------------------------------


def test_old_driver_names_the_minimum_it_lacks(capsys: pytest.CaptureFixture[str]) -> None:
    """A CUDA 13 library on a 535 driver: every row says no, and the minimum driver says what would run it."""
    code, out, _ = run(["gpus", "--driver", "535.104.05", "--gpu", "8.6", str(EXAMPLE)], capsys)
    assert code == ExitCode.OK
    assert "no requirement found" not in out
    assert "a newer CUDA major than driver 535.104.05 (CUDA 12.2) supports" in out
    assert "minimum driver: 580.65.06 (" in out and "13.x minor-version compatibility floor" in out


def test_driver_given_as_cuda_version_reads_as_english(capsys: pytest.CaptureFixture[str]) -> None:
    code, out, _ = run(["gpus", "--driver", "12.2", "--gpu", "8.6", str(EXAMPLE)], capsys)
    assert code == ExitCode.OK
    assert "driver a driver" not in out
    assert "a newer CUDA major than a driver for CUDA 12.2 supports" in out


def test_unknown_future_driver_says_so(capsys: pytest.CaptureFixture[str]) -> None:
    code, out, _ = run(["gpus", "--driver", "999.1", "--gpu", "8.6", str(EXAMPLE)], capsys)
    assert code == ExitCode.OK
    (header,) = [line for line in out.splitlines() if line.startswith("driver:")]
    assert header.startswith("driver: 999.1 (a branch newer than cudaship knows: CUDA ")
    assert header.endswith(" or newer)")


# -- arch lists: a default for every train, one spelling for CMake ------------------------------------------


@pytest.mark.parametrize("train", ["cu118", "cu121", "cu124", "cu128", "cu129", "cu131", "cu133", "cu135"])
def test_every_train_the_toolkit_knows_has_a_default_arch_list(
    train: str, capsys: pytest.CaptureFixture[str], tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.chdir(tmp_path)  # no project configuration: the built-in table
    code, out, err = run(["arch-list", "--train", train, "--machine", "x86_64"], capsys)
    assert code == ExitCode.OK and err == ""
    assert out.strip().endswith("+PTX")


def test_arch_list_says_it_is_an_overridable_default_to_a_person(
    capsys: pytest.CaptureFixture[str], tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.chdir(tmp_path)
    monkeypatch.setattr("sys.stderr.isatty", lambda: True)
    code, out, err = run(["arch-list", "--train", "cu128", "--machine", "x86_64"], capsys)
    assert code == ExitCode.OK and out == "7.0;7.5;8.0;8.6;9.0;10.0;12.0+PTX\n"  # stdout stays the bare list
    assert "the built-in default" in err and "[tool.cudaship.archs.cu128]" in err
    # a project's own table is not called a default
    (tmp_path / "cudaship.toml").write_text('[archs.cu128]\nx86_64 = "9.0"\n')
    code, out, err = run(["arch-list", "--train", "cu128", "--machine", "x86_64"], capsys)
    assert (code, out, err) == (ExitCode.OK, "9.0+PTX\n", "")


def test_cmake_and_arch_list_spell_the_architectures_alike(
    capsys: pytest.CaptureFixture[str], tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.chdir(tmp_path)
    code, listed, _ = run(
        ["arch-list", "--train", "cu130", "--machine", "x86_64", "--format", "cmake"], capsys
    )
    assert code == ExitCode.OK
    if shutil.which("nvcc") is None:
        pytest.skip("cmake needs a CUDA toolkit: nvcc is not on PATH")
    code, args, err = run(["cmake", "--train", "cu130", "--platform", "linux-x86_64"], capsys)
    assert code == ExitCode.OK, err
    assert f"CMAKE_CUDA_ARCHITECTURES:STRING={listed.strip()}" in args.replace("'", "")
    assert listed.strip() == "80-real;86-real;89-real;90-real;100-real;120"


# -- progress ---------------------------------------------------------------------------------------------


def test_gpus_progress_goes_to_stderr_only(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    """`gpus` on a big wheel shows what it reads (forced here; by default when stderr is a terminal);
    the report on stdout is untouched."""
    wheel = _small_wheel(tmp_path / "pkg-1.0-py3-none-any.whl")
    code, out, err = run(["gpus", "--progress", "--format", "json", str(wheel)], capsys)
    assert code == ExitCode.OK, err
    assert json.loads(out)["files"][0]["path"] == "pkg/libvecadd.so"
    quiet_code, quiet_out, quiet_err = run(["gpus", "--no-progress", "--format", "json", str(wheel)], capsys)
    assert (quiet_code, quiet_err) == (ExitCode.OK, "") and json.loads(quiet_out) == json.loads(out)


# -- --details is not an export dump ----------------------------------------------------------------------


def test_details_and_all_exports_are_separate(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    """`--details` reads more of the device code; listing every export is `--all-exports` (a big library has
    tens of thousands: libtorch_cuda.so 21,233)."""
    gcc = shutil.which("gcc")
    if gcc is None:
        pytest.skip("gcc is not on PATH")
    source = tmp_path / "many.c"
    source.write_text("".join(f"int exported_{i}(void) {{ return {i}; }}\n" for i in range(45)))
    library = tmp_path / "libmany.so"
    subprocess.run([gcc, "-shared", "-fPIC", "-o", str(library), str(source)], check=True)

    def listed(*flags: str) -> tuple[int, str]:
        code, out, err = run(["inspect", *flags, str(library)], capsys)
        assert code == ExitCode.OK, err
        return sum(1 for line in out.splitlines() if line.startswith("    exported_")), out

    shown, out = listed("-v")
    assert shown == 20 and "... and 25 more (--all-exports lists all, --format json too)" in out
    assert listed("-v", "--details")[0] == 20
    assert listed("--all-exports")[0] == 45
    shown, out = listed()  # by default the count only (issue 35)
    assert shown == 0 and "  exports: 45 (-v lists them)" in out


# -- issue 35: the rest of the first hour ------------------------------------------------------------------


@pytest.mark.parametrize(
    ("argv", "suggested"),
    [
        (["inpsect", "x.so"], "(did you mean 'inspect'?)"),
        (["gpu", "x"], "(did you mean 'gpus'?)"),
        (["aduit", "x.whl"], "(did you mean 'audit'?)"),
    ],
)
def test_a_mistyped_command_gets_a_suggestion(
    argv: list[str], suggested: str, capsys: pytest.CaptureFixture[str]
) -> None:
    """As a mistyped option and a mistyped ``toolkit`` subcommand do (click finds close names only among the
    commands it holds; the top level loads its commands when named)."""
    code, out, err = run(argv, capsys)
    assert (code, out) == (ExitCode.BAD_INPUT, "")
    assert err == f"cudaship: error: no such command '{argv[0]}' {suggested} (see cudaship --help)\n"


def test_a_name_close_to_no_command_gets_no_suggestion(capsys: pytest.CaptureFixture[str]) -> None:
    code, _, err = run(["zzz"], capsys)
    assert code == ExitCode.BAD_INPUT
    assert err == "cudaship: error: no such command 'zzz' (see cudaship --help)\n"


def test_a_missing_file_is_reported_once(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    """``inspect missing.so`` printed a report saying "error: no such file or directory" and then the same
    error line on stderr: the one line is enough when nothing at all was read."""
    missing = tmp_path / "missing.so"
    code, out, err = run(["inspect", "--no-progress", str(missing)], capsys)
    assert code == ExitCode.BAD_INPUT
    assert out == ""
    assert err == f"cudaship: error: {missing}: no such file or directory\n"
    # with something read, the report still lists the missing input beside it (and stderr names it)
    lib = tmp_path / "k.ptx"
    lib.write_text(".version 8.0\n.target sm_90\n.address_size 64\n")
    code, out, err = run(["inspect", "--no-progress", str(missing), str(lib)], capsys)
    assert code == ExitCode.BAD_INPUT
    assert "2 files" in out and f"cudaship: error: {missing}: no such file or directory" in err
