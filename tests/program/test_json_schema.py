"""Every ``program --format json`` output validates against the published schema (render.program_json)."""

from __future__ import annotations

import json
from collections.abc import Callable
from pathlib import Path

import jsonschema
import pytest

from cudaship.cli.main import main
from cudaship.render.program_json import JSON_SCHEMA
from tests.program.builders import gxx_library, make_export_dir, make_pt2

DATA = Path(__file__).parent / "data"


def test_schema_is_valid() -> None:
    jsonschema.Draft202012Validator.check_schema(JSON_SCHEMA)


@pytest.fixture
def export_dir(tmp_path: Path, nvcc_build: Callable[[str], Path]) -> Path:
    pkg = make_pt2(tmp_path / "p.pt2", gxx_library(tmp_path / "lib", "w"), [nvcc_build("cubin_sm90a")])
    return make_export_dir(tmp_path / "e", pkg)


@pytest.mark.parametrize(
    "argv",
    [
        pytest.param(["program", "inspect", "{pte}", "{dir}"], id="inspect"),
        pytest.param(["program", "check", "{dir}", "--gpu", "8.6", "--train", "cu132"], id="check-failing"),
        pytest.param(["program", "check", "{dir}", "--gpu", "9.0"], id="check-passing"),
    ],
)
def test_outputs_validate(export_dir: Path, argv: list[str], capsys: pytest.CaptureFixture[str]) -> None:
    args = [a.format(pte=DATA / "demo_mlp_cuda.pte", dir=export_dir) for a in argv]
    main([*args, "--format", "json"])
    jsonschema.validate(json.loads(capsys.readouterr().out), JSON_SCHEMA)


@pytest.mark.slow
@pytest.mark.filterwarnings("ignore::UserWarning", "ignore::FutureWarning", "ignore::DeprecationWarning")
def test_run_output_validates(cpu_export: Path, capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["program", "run", str(cpu_export), "--runs", "2", "--format", "json"]) == 0
    jsonschema.validate(json.loads(capsys.readouterr().out), JSON_SCHEMA)
