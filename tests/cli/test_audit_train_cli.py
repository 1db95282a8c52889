"""``cudaship audit --train``: overrides the tag and the inference; a value naming no train cudaship knows
is exit 4."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from cudaship.cli.main import main
from cudaship.exitcodes import ExitCode


@pytest.mark.network
def test_train_override_is_reported(
    bitsandbytes_linux_wheel: Path,
    capsys: pytest.CaptureFixture[str],
    monkeypatch: pytest.MonkeyPatch,
    tmp_path: Path,
) -> None:
    monkeypatch.chdir(tmp_path)
    code = main(
        [
            "audit",
            "--no-progress",
            "--offline",
            "--format",
            "json",
            "--train",
            "cu130",
            str(bitsandbytes_linux_wheel),
        ]
    )
    doc = json.loads(capsys.readouterr().out)
    (wheel,) = doc["wheels"]
    assert (wheel["train"], wheel["train_source"]) == ("13.0", "--train 13.0")
    consistency = next(c for c in doc["checks"] if c["name"] == "consistency: CUDA train")
    assert consistency["reason"].startswith("agree: --train 13.0")
    # the variants are still judged against their own trains, not against --train
    assert "libbitsandbytes_cuda118.so (variant, 11.8)" in consistency["reason"]
    assert code == ExitCode.OK


@pytest.mark.network
def test_inferred_train_names_its_source(
    cudart_linux_wheel: Path,
    capsys: pytest.CaptureFixture[str],
    monkeypatch: pytest.MonkeyPatch,
    tmp_path: Path,
) -> None:
    monkeypatch.chdir(tmp_path)
    main(["audit", "--no-progress", "--offline", "--format", "json", str(cudart_linux_wheel)])
    (wheel,) = json.loads(capsys.readouterr().out)["wheels"]
    # nvidia-cuda-runtime 13.5.37 has no +cu tag: its cubins (libcudadevrt.a) say CUDA 13.5
    assert wheel["train"] == "13.5"
    assert wheel["train_source"].startswith("inferred from the device code")


def test_bad_train_is_one_line_exit_4(capsys: pytest.CaptureFixture[str], tmp_path: Path) -> None:
    wheel = tmp_path / "p-1.0-py3-none-any.whl"
    wheel.write_bytes(b"PK")
    code = main(["audit", "--no-progress", "--train", "cu1x", str(wheel)])
    err = capsys.readouterr().err.strip().splitlines()
    assert code == ExitCode.UNKNOWN_TRAIN
    assert len(err) == 1 and err[0].startswith("cudaship: error: --train 'cu1x': not a CUDA train")
