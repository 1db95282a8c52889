"""``cudaship audit`` provider options: bad sources are usage errors (exit 2, one line); offline audits say
where providers came from."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from cudaship.cli.main import main
from cudaship.exitcodes import ExitCode
from tests.providers.conftest import LocalIndex, make_wheel


@pytest.fixture
def pure_wheel(tmp_path: Path) -> Path:
    return make_wheel(
        tmp_path,
        "needs-cuda",
        "1.0",
        "py3-none-manylinux_2_28_x86_64",
        {"needs_cuda/__init__.py": b""},
        requires=("nvidia-cuda-runtime==13.0.96", "nvidia-cudnn-cu13; extra == 'cudnn'"),
        extras=("cudnn",),
    )


def test_find_links_must_be_a_directory(
    pure_wheel: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    code = main(["audit", "--no-progress", "--find-links", str(tmp_path / "nope"), str(pure_wheel)])
    err = capsys.readouterr().err
    assert code == ExitCode.BAD_INPUT
    assert err.strip().splitlines() == [f"cudaship: error: {tmp_path / 'nope'}: not a directory"]


def test_env_must_exist(pure_wheel: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    code = main(["audit", "--no-progress", "--env", str(tmp_path / "python9"), str(pure_wheel)])
    assert code == ExitCode.BAD_INPUT
    assert "no such file or directory" in capsys.readouterr().err


def test_offline_audit_uses_the_knowledge_table(pure_wheel: Path, capsys: pytest.CaptureFixture[str]) -> None:
    code = main(["audit", "--no-progress", "--offline", "--format", "json", str(pure_wheel)])
    report = json.loads(capsys.readouterr().out)
    assert code == ExitCode.OK
    notes = report["wheels"][0]["notes"]
    line = next(n for n in notes if n.startswith("providers:"))
    assert "knowledge table" in line and "no network" in line


def test_audit_reads_a_local_index(
    pure_wheel: Path, local_index: LocalIndex, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    house = tmp_path / "dists"
    house.mkdir()
    local_index.add(
        make_wheel(
            house,
            "nvidia-cuda-runtime",
            "13.0.96",
            "py3-none-manylinux_2_17_x86_64",
            {"nvidia/cu13/lib/libcudart.so.13": b"\x7fELF"},
        )
    )
    args = ["audit", "--no-progress", "--online", "--format", "json", "--index-url", local_index.url]
    code = main([*args, "--cache-dir", str(tmp_path / "cache"), str(pure_wheel)])
    report = json.loads(capsys.readouterr().out)
    assert code == ExitCode.OK
    line = next(n for n in report["wheels"][0]["notes"] if n.startswith("providers:"))
    assert f"1 distribution from index {local_index.url}" in line
    # nvidia-cudnn-cu13 (extra cudnn) is not on this index: said, not fatal
    assert "nvidia-cudnn-cu13" in line and "(extra cudnn)" in line
