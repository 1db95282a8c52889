"""``cudaship arch-list``: the train's list from the arch table, in each syntax; exit codes 4 and 5."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from cudaship.cli.main import main
from cudaship.knowledge.arch_table import default_arch_table
from cudaship.knowledge.archs import format_arch_list, parse_arch_list


@pytest.fixture(autouse=True)
def _isolated(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.chdir(tmp_path)
    monkeypatch.delenv("CUDASHIP_TRAIN", raising=False)


def run(capsys: pytest.CaptureFixture[str], *argv: str) -> tuple[int, str, str]:
    code = main(list(argv))
    out, err = capsys.readouterr()
    return code, out, err


@pytest.mark.parametrize(
    ("train", "machine", "fmt", "expected"),
    [
        ("cu132", "x86_64", "torch", "8.0;8.6;8.9;9.0;10.0;12.0+PTX"),
        ("cu132", "aarch64", "cmake", "80-real;90-real;100-real;110-real;120"),
        ("cu126", "x86_64", "list", "sm_80 sm_86 sm_89 sm_90 compute_90"),
        ("13.0", "arm64", "plain", "8.0 9.0 10.0 11.0 12.0"),
        (
            "cu126",
            "aarch64",
            "gencode",
            "-gencode arch=compute_80,code=sm_80 -gencode arch=compute_87,code=sm_87 "
            "-gencode arch=compute_90,code=[sm_90,compute_90]",
        ),
    ],
    ids=lambda v: v if " " not in v else "",
)
def test_formats(
    capsys: pytest.CaptureFixture[str], train: str, machine: str, fmt: str, expected: str
) -> None:
    code, out, err = run(capsys, "arch-list", "--train", train, "--machine", machine, "--format", fmt)
    assert (code, out, err) == (0, expected + "\n", "")
    if fmt != "plain":
        assert parse_arch_list(expected, fmt) == default_arch_table().lookup(train, machine)


def test_json(capsys: pytest.CaptureFixture[str]) -> None:
    code, out, _ = run(capsys, "arch-list", "--train", "cu134", "--machine", "x86_64", "--format", "json")
    doc = json.loads(out)
    assert code == 0
    assert (doc["schema"], doc["train"], doc["cuda"], doc["machine"]) == (1, "cu134", "13.4", "x86_64")
    assert doc["ptx"] == ["compute_120"] and doc["sass"][0] == "sm_80"
    archs = default_arch_table().lookup("cu134", "x86_64")
    assert doc["cmake"] == format_arch_list(archs, "cmake")


def test_train_from_environment(capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("CUDASHIP_TRAIN", "cu130")
    code, out, _ = run(capsys, "arch-list", "--machine", "x86_64")
    assert (code, out) == (0, "8.0;8.6;8.9;9.0;10.0;12.0+PTX\n")


def test_project_table_wins(capsys: pytest.CaptureFixture[str], tmp_path: Path) -> None:
    (tmp_path / "pyproject.toml").write_text(
        '[tool.cudaship.archs.cu132]\nx86_64 = "75;86-real"\naarch64 = ["9.0", "12.1"]\n'
    )
    code, out, _ = run(capsys, "arch-list", "--train", "cu132", "--machine", "x86_64")
    assert (code, out) == (0, "7.5;8.6+PTX\n")
    code, out, _ = run(capsys, "arch-list", "--train", "cu132", "--machine", "aarch64", "--format", "cmake")
    assert (code, out) == (0, "90-real;121\n")


def test_policy_file(capsys: pytest.CaptureFixture[str], tmp_path: Path) -> None:
    policy = tmp_path / "elsewhere.toml"
    policy.write_text('[archs.cu128]\nx86_64 = "sm_120 compute_120"\n')
    code, out, _ = run(capsys, "arch-list", "--policy", str(policy), "--train", "12.8", "--machine", "x86_64")
    assert (code, out) == (0, "12.0+PTX\n")


@pytest.mark.parametrize(
    ("argv", "code", "message"),
    [
        (
            ["--train", "cu127", "--machine", "x86_64"],
            4,
            "--train 'cu127': CUDA 12.7 was never published; the published CUDA releases are 11.0, ",
        ),
        (["--machine", "x86_64"], 5, "no CUDA train given"),
        (["--train", " ", "--machine", "x86_64"], 5, "no CUDA train given"),
        (["--train", "cu13x", "--machine", "x86_64"], 4, "--train 'cu13x': not a CUDA train"),
        (["--train", "cu132", "--machine", "riscv64"], 2, "--machine: unknown machine 'riscv64'"),
    ],
    ids=["unknown-train", "no-train", "blank-train", "bad-train", "bad-machine"],
)
def test_exit_codes(capsys: pytest.CaptureFixture[str], argv: list[str], code: int, message: str) -> None:
    got, out, err = run(capsys, "arch-list", *argv)
    assert (got, out) == (code, "")
    assert err.startswith(f"cudaship: error: {message}") and err.count("\n") == 1


def test_bad_table_names_file_and_key(capsys: pytest.CaptureFixture[str], tmp_path: Path) -> None:
    (tmp_path / "cudaship.toml").write_text('[archs.cu132]\nx86_64 = "8.5"\n')
    code, out, err = run(capsys, "arch-list", "--train", "cu132", "--machine", "x86_64")
    assert (code, out) == (2, "")
    assert "cudaship.toml: archs.cu132.x86_64: unknown compute capability 8.5" in err
