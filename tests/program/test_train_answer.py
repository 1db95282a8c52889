"""One answer to "which CUDA train" in ``program inspect``, ``program check``, ``inspect`` and ``audit``, with
its source; and verdict lines whose numbers count what they say.

Issue 23: ``program check`` said the train was not recorded while ``program inspect`` and ``audit`` inferred
13.0 from the PTX ISA of the same program; ``program check`` printed "FAILED: 3/7 checks" when 4 of 7 failed.
"""

from __future__ import annotations

import json
import shutil
from collections.abc import Callable
from pathlib import Path

import pytest

from cudaship.cli.main import main
from cudaship.program.check import check_program
from cudaship.program.records import outcome
from cudaship.render.program import verdict_line
from tests.program.builders import gxx_library, make_export_dir, make_pt2

REPO = Path(__file__).resolve().parents[2]
PTE = REPO / "tests" / "program" / "data" / "demo_mlp_cuda.pte"


def _answers(capsys: pytest.CaptureFixture[str], target: Path, program: Path) -> dict[str, object]:
    """The train each command gives for the same program (``target``: what check takes, a directory)."""
    main(["program", "inspect", str(target), "--format", "json"])
    (inspected,) = json.loads(capsys.readouterr().out)["programs"]
    main(["inspect", "--no-exports", str(program), "--format", "json"])
    (walked,) = json.loads(capsys.readouterr().out)["wheels"]
    main(["audit", str(program), "--format", "json"])
    audit = json.loads(capsys.readouterr().out)
    main(["program", "check", str(target), "--train", "cu130", "--format", "json"])
    checked = json.loads(capsys.readouterr().out)
    train_item = next(c for c in checked["checks"] if c["name"] == "train")
    return {
        "program inspect": (inspected["cuda_train"], inspected["train_evidence"]),
        "inspect": (walked["cuda_train"], walked["train_evidence"]),
        "audit": json.dumps(audit),
        "check": train_item,
    }


def test_pte_without_provenance_one_answer_everywhere(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    directory = tmp_path / "pte"
    directory.mkdir()
    program = directory / "model.pte"
    shutil.copyfile(PTE, program)
    answers = _answers(capsys, directory, program)
    assert answers["program inspect"] == ("13.0", "PTX ISA 9.0")
    assert answers["inspect"] == ("13.0", "PTX ISA 9.0")
    assert "CUDA train 13.0, from PTX ISA 9.0" in str(answers["audit"])
    check = answers["check"]
    assert isinstance(check, dict)
    # the train is known (inferred), so it matches cu130 instead of reading "not recorded"
    assert check["status"] == "pass", check
    assert "13.0, from PTX ISA 9.0" in check["message"] and "not recorded" not in check["message"]


def test_recorded_train_wins_and_says_so(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], nvcc_build: Callable[[str], Path]
) -> None:
    wrapper = gxx_library(tmp_path / "lib", "wrapper")
    package = make_pt2(tmp_path / "pkg.pt2", wrapper, [nvcc_build("cubin_sm90a")])
    export = make_export_dir(tmp_path / "export", package, cuda_train="12.8")
    answers = _answers(capsys, export, export / "model.pt2")
    source = "provenance.json (torch 2.11.0+cu128)"
    assert answers["program inspect"] == ("12.8", source)
    assert answers["inspect"] == ("12.8", source)
    assert f"CUDA train 12.8, from {source}" in str(answers["audit"])
    check = answers["check"]
    assert isinstance(check, dict) and check["status"] == "fail"
    assert f"12.8, from {source}" in check["message"]


def test_nothing_known_says_why_everywhere(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], nvcc_build: Callable[[str], Path]
) -> None:
    wrapper = gxx_library(tmp_path / "lib", "wrapper")
    directory = tmp_path / "bare"
    directory.mkdir()
    make_pt2(directory / "model.pt2", wrapper, [nvcc_build("cubin_sm90a")])
    assert main(["program", "inspect", str(directory)]) == 0
    line = next(x for x in capsys.readouterr().out.splitlines() if "CUDA train" in x)
    assert "not recorded (no provenance.json and no PTX in the device code" in line
    report = check_program(directory, train="cu130")
    item = next(i for i in report.items if i.name == "train")
    assert outcome(item) == "fail"
    assert "not recorded (no provenance.json and no PTX in the device code" in item.reason


def test_verdict_line_counts_what_it_names(tmp_path: Path, nvcc_build: Callable[[str], Path]) -> None:
    wrapper = gxx_library(tmp_path / "lib", "wrapper", static_libstdcxx=True)
    package = make_pt2(tmp_path / "pkg.pt2", wrapper, [nvcc_build("cubin_sm90a")])
    export = make_export_dir(tmp_path / "export", package)
    # train (cu126), arch (8.6), driver (too old for 13.0) and libstdc++ (static copy) fail; package and
    # reference pass; platform is skipped (no runtime platform given) and not counted
    report = check_program(export, train="cu126", gpu="8.6", driver="470.57.02")
    failed = [i.name for i in report.items if outcome(i) == "fail"]
    passed, decided = report.counts
    assert (len(failed), passed, decided) == (4, 2, 6), report.items
    # every check counts, the skipped one named (issue 35: "3 of 3 checks passed" beside three skipped rows)
    assert verdict_line(report) == "FAILED: 4 of 7 checks failed (2 passed, 1 skipped)"
    good = check_program(
        make_export_dir(
            tmp_path / "good",
            make_pt2(tmp_path / "ok.pt2", gxx_library(tmp_path / "lib2", "ok"), [nvcc_build("cubin_sm90a")]),
        ),
        train="cu130",
        gpu="9.0",
    )
    skipped = sum(1 for i in good.items if outcome(i) == "skip")
    assert skipped == 2, good.items
    assert verdict_line(good) == "passed: 5 of 7 checks passed, 2 skipped"
