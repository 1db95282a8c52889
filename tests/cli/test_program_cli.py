"""``cudaship program`` through main(): exit codes, formats, one-line errors."""

from __future__ import annotations

import json
from collections.abc import Callable
from pathlib import Path

import pytest

from cudaship.cli.main import main
from tests.program.builders import gxx_library, make_export_dir, make_pt2

DATA = Path(__file__).parents[1] / "program" / "data"


@pytest.fixture
def export_dir(tmp_path: Path, nvcc_build: Callable[[str], Path]) -> Path:
    wrapper = gxx_library(tmp_path / "lib", "wrapper")
    package = make_pt2(tmp_path / "pkg.pt2", wrapper, [nvcc_build("cubin_sm90a")])
    return make_export_dir(tmp_path / "export", package)


def test_inspect_real_pte_json(capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["program", "inspect", str(DATA / "demo_mlp_cuda.pte"), "--format", "json"]) == 0
    data = json.loads(capsys.readouterr().out)
    assert data["schema"] == 1
    (program,) = data["programs"]
    assert program["kind"] == "pte" and program["sass"] == ["sm_90a"]


def test_inspect_text_says_arch_specific(export_dir: Path, capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["program", "inspect", str(export_dir)]) == 0
    out = capsys.readouterr().out
    assert "ARCH-SPECIFIC" in out and "sm_90a" in out


@pytest.mark.parametrize(
    ("args", "code"),
    [
        pytest.param(["--gpu", "9.0", "--train", "cu130"], 0, id="match"),
        pytest.param(["--gpu", "8.6"], 1, id="wrong-gpu"),
        pytest.param(["--train", "cu134"], 1, id="train-mismatch"),
        pytest.param(["--train", "cu999x"], 4, id="bad-train"),
        pytest.param(["--gpu", "Voodoo5"], 2, id="unknown-gpu"),
    ],
)
def test_check_exit_codes(
    export_dir: Path, args: list[str], code: int, capsys: pytest.CaptureFixture[str]
) -> None:
    assert main(["program", "check", str(export_dir), *args]) == code
    if code == 2:
        err = capsys.readouterr().err.strip()
        assert err.startswith("cudaship: error:") and "\n" not in err


def test_check_markdown_row(export_dir: Path, tmp_path: Path) -> None:
    out = tmp_path / "plan.md"
    assert (
        main(
            ["program", "check", str(export_dir), "--train", "cu132", "--format", "markdown", "-o", str(out)]
        )
        == 1
    )
    lines = out.read_text().splitlines()
    assert lines[0] == "| train | export torch | runtime | checks passed | max diff | latency |"
    assert lines[2].startswith("| 13.2 | 2.11.0+cu130 | cu132 |") and "failed: train" in lines[2]


def test_check_json(export_dir: Path, capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["program", "check", str(export_dir), "--gpu", "8.6", "--format", "json"]) == 1
    data = json.loads(capsys.readouterr().out)
    assert data["schema"] == 1 and data["passed"] is False
    assert {c["name"]: c["status"] for c in data["checks"]}["arch"] == "fail"


@pytest.mark.parametrize(
    "argv",
    [
        pytest.param(["program", "inspect", "/nonexistent/model.pt2"], id="inspect-missing"),
        pytest.param(["program", "check", "/nonexistent"], id="check-missing"),
        pytest.param(["program", "run", "."], id="run-no-provenance"),
    ],
)
def test_bad_input_is_one_line(argv: list[str], capsys: pytest.CaptureFixture[str]) -> None:
    assert main(argv) == 2
    err = capsys.readouterr().err.strip()
    assert err.startswith("cudaship: error:") and len(err.splitlines()) == 1, err


def test_export_without_torch_says_how(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    import importlib.util

    if importlib.util.find_spec("torch") is not None:
        pytest.skip("torch is installed here")
    assert main(["program", "export", "demo-mlp", "--out", str(tmp_path / "o")]) == 2
    assert "cudaship[torch]" in capsys.readouterr().err
