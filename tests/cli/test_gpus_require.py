"""``gpus --require``: the GPUs asked (and the driver given) become a requirement a CI job can gate on: exit 1
when the input cannot run on one of them, the row named by the GPU the user asked for. On real binaries: the
nvcc-built README example (sm_75 ... sm_89 SASS, sm_90a, sm_120a, compute_120; CUDA 13) and the
bitsandbytes wheel."""

from __future__ import annotations

import json
from importlib import resources
from pathlib import Path
from typing import Any

import jsonschema
import pytest

from cudaship.cli.main import main
from cudaship.exitcodes import ExitCode

EXAMPLE = str(Path(__file__).resolve().parents[2] / "examples" / "libvecadd.so")


def run(capsys: pytest.CaptureFixture[str], *argv: str) -> tuple[int, str, str]:
    code = main(["gpus", *argv])
    out, err = capsys.readouterr()
    return code, out, err


def as_json(capsys: pytest.CaptureFixture[str], *argv: str) -> tuple[int, dict[str, Any]]:
    code, out, _ = run(capsys, "--format", "json", *argv)
    doc: dict[str, Any] = json.loads(out)
    schema = json.loads(resources.files("cudaship.render").joinpath("schemas/gpus.schema.json").read_text())
    jsonschema.validate(doc, schema)
    return code, doc


def test_without_require_a_no_is_still_exit_0(capsys: pytest.CaptureFixture[str]) -> None:
    """The question without --require is informative: the answer "no" does not fail."""
    code, out, _ = run(capsys, "--gpu", "GTX 1080", EXAMPLE)
    assert code == ExitCode.OK
    assert "6.1 Pascal (GTX 1080)  no" in out
    assert "required" not in out


def test_require_met_and_not_met(capsys: pytest.CaptureFixture[str]) -> None:
    code, out, _ = run(capsys, "--gpu", "RTX 3090", "--require", EXAMPLE)
    assert code == ExitCode.OK
    assert "  8.6 Ampere (RTX 3090)  native  sm_86 (built for it)" in out  # the GPU asked, not A10G
    assert out.rstrip().endswith("required (--require): met: the input runs on the GPU asked")
    code, out, _ = run(capsys, "--gpu", "RTX 3090, GTX 1080", "--require", EXAMPLE)
    assert code == ExitCode.FINDINGS == 1
    tail = out.rstrip().splitlines()[-2:]
    assert tail[0] == "required (--require): NOT met: 1 of the 2 GPUs asked cannot run the input"
    assert tail[1].startswith("  6.1 Pascal (GTX 1080): no SASS for 6.x (has sm_75 sm_80 sm_86 sm_89)")


def test_the_driver_is_part_of_the_requirement(capsys: pytest.CaptureFixture[str]) -> None:
    """A CUDA 13 build on a CUDA 12.8 driver: the GPU is right, the driver is not."""
    code, out, _ = run(capsys, "--gpu", "H100", "--driver", "570.26", "--require", EXAMPLE)
    assert code == ExitCode.FINDINGS
    assert "NOT met: the GPU asked cannot run the input with driver 570.26 (CUDA 12.8)" in out
    assert "9.0 Hopper (H100): built with CUDA 13.0: a newer CUDA major than driver 570.26" in out
    assert run(capsys, "--gpu", "H100", "--driver", "580.65.06", "--require", EXAMPLE)[0] == ExitCode.OK


def test_json_markdown_and_html_say_it_too(capsys: pytest.CaptureFixture[str], tmp_path: Path) -> None:
    code, doc = as_json(
        capsys, "--gpu", "rtx 3090", "--gpu", "8.6", "--gpu", "GTX 1080", "--require", EXAMPLE
    )
    assert code == ExitCode.FINDINGS
    assert doc["required"] == {"met": False, "unmet": ["6.1"]}
    asked = {c["capability"]: c["asked"] for c in doc["capabilities"]}
    assert asked == {"6.1": ["GTX 1080"], "8.6": ["rtx 3090"]}  # as typed; "8.6" names no GPU
    assert as_json(capsys, "--gpu", "A10G", EXAMPLE)[1]["required"] is None
    code, out, _ = run(capsys, "--format", "markdown", "--gpu", "GTX 1080", "--require", EXAMPLE)
    assert code == ExitCode.FINDINGS
    assert "| 6.1 Pascal (GTX 1080) | 🔴 no |" in out
    assert "**required (--require): NOT met: the GPU asked cannot run the input**" in out
    page = tmp_path / "gpus.html"
    code, _, _ = run(capsys, "--format", "html", "-o", str(page), "--gpu", "GTX 1080", "--require", EXAMPLE)
    assert code == ExitCode.FINDINGS
    html = page.read_text()
    assert "<small>GTX 1080</small>" in html and "<h2>Requirement</h2>" in html


def test_require_without_gpu_takes_every_row_shown(capsys: pytest.CaptureFixture[str]) -> None:
    """The default rows of an x86_64 library (7.0 to 12.0, no Arm-only GPU): the example has no SASS for 7.0
    nor 10.x and its PTX is 12.0."""
    code, doc = as_json(capsys, "--require", EXAMPLE)
    assert code == ExitCode.FINDINGS
    assert doc["required"]["unmet"] == ["7.0", "10.0", "10.3"]


@pytest.mark.slow
def test_a_wheel_as_a_whole_on_the_gpu_asked(
    capsys: pytest.CaptureFixture[str], bitsandbytes_linux_wheel: Path
) -> None:
    """bitsandbytes: one of its CUDA variants serves each GPU from 7.5 up; none serves a Maxwell."""
    assert run(capsys, "--gpu", "T4, RTX 5090", "--require", str(bitsandbytes_linux_wheel))[0] == ExitCode.OK
    code, out, _ = run(capsys, "--gpu", "GTX 980", "--require", str(bitsandbytes_linux_wheel))
    assert code == ExitCode.FINDINGS
    assert "5.2 Maxwell (GTX 980)" in out
