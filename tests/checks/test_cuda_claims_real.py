"""Issue 32, class 14 on real PyPI wheels the tests use: a wheel with no CUDA code does not pass silently (the
first line and the summary say so), and a pure-Python wheel whose name claims CUDA but whose requirements
carry it is not the "CPU-only build shipped as CUDA" error. (The error itself is tested on generated wheels,
tests/checks/test_held_out_classes.py: the issue names no real wheel for it.)"""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from cudaship.cli.main import main
from cudaship.exitcodes import ExitCode


@pytest.mark.network
def test_a_real_wheel_without_cuda_code_says_so(
    delvewheel_wheel: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    code = main(["audit", "--no-progress", str(delvewheel_wheel)])
    text = capsys.readouterr().out
    header = next(line for line in text.splitlines() if line.startswith(delvewheel_wheel.name))
    assert "0 native" in header and header.endswith("· no CUDA code)"), header
    assert text.rstrip().splitlines()[-1].endswith("· no CUDA code in the wheel")
    assert code == ExitCode.OK  # nothing claims CUDA: a pure-Python tool is not an error
    main(["audit", "--no-progress", "-f", "json", str(delvewheel_wheel)])
    (wheel,) = json.loads(capsys.readouterr().out)["wheels"]
    assert wheel["cuda_code"] is False


@pytest.mark.network
def test_a_cuda_claim_its_requirements_carry_is_not_an_error(
    nx_cugraph_wheel: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    code = main(["audit", "--no-progress", "-f", "json", str(nx_cugraph_wheel)])
    data = json.loads(capsys.readouterr().out)
    claim = {c["name"]: c for c in data["checks"]}["consistency: CUDA claim"]
    assert claim["status"] == "pass", claim
    assert "nx-cugraph-cu12 claims a CUDA build: requires cupy-cuda12x" in claim["reason"]
    assert code == ExitCode.OK
