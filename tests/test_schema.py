"""One validator for every TOML/JSON table: an unknown key, a wrong type, a value out of range and a missing
key read the same in the audit policy, the arch table, the CI matrix and a build matrix JSON file."""

from __future__ import annotations

from pathlib import Path

import pytest

from cudaship.checks.table import load_policy
from cudaship.ci.matrix import load_matrix_config, read_build_matrix
from cudaship.config import load_config
from cudaship.errors import CudashipError, KnowledgeError, PolicyError
from cudaship.schema import Table

MATRIX = '[matrix]\ntrains = ["cu130"]\npython = ["3.12"]\nplatforms = ["linux-x86_64"]\n'


def _policy(tmp_path: Path, text: str) -> str:
    path = tmp_path / "cudaship.toml"
    path.write_text(text)
    with pytest.raises(PolicyError) as info:
        load_policy(load_config(path))
    return str(info.value).removeprefix(f"{path}: ")


def _matrix(tmp_path: Path, text: str) -> str:
    path = tmp_path / "cudaship.toml"
    path.write_text(MATRIX + text)
    with pytest.raises(PolicyError) as info:
        load_matrix_config(load_config(path))
    return str(info.value).removeprefix(f"{path}: ")


def test_unknown_key_reads_the_same_everywhere(tmp_path: Path) -> None:
    assert _policy(tmp_path, "[audit.archs]\nptxx = 'none'\n") == (
        "audit.archs.ptxx: unknown key (did you mean ptx?); known: libraries, ptx, relocatable_ptx"
    )
    assert _matrix(tmp_path, "all-labels = 'x'\n").startswith(
        "matrix.all-labels: unknown key (did you mean all-label?); known: all-label, default-platform"
    )
    assert _policy(tmp_path, "[matirx]\n") == (
        "[matirx]: unknown table (did you mean [matrix]?); known: [archs], [audit], [matrix], [resolution]"
    )


def test_wrong_type_and_out_of_range_read_the_same_everywhere(tmp_path: Path) -> None:
    assert _policy(tmp_path, "[audit.closure]\nexports = 'yes'\n") == (
        "audit.closure.exports: must be true or false, not a string"
    )
    assert (
        _matrix(tmp_path, "all-label = 3\n") == "matrix.all-label: must be a non-empty string, not an integer"
    )
    assert _policy(tmp_path, "[audit.archs]\nptx = 'all'\n") == (
        "audit.archs.ptx: must be one of newest, none, not 'all'"
    )
    assert (
        _matrix(tmp_path, "default-python = '3.9'\n")
        == "matrix.default-python: must be one of 3.12, not '3.9'"
    )


def test_key_paths_quote_keys_as_toml_writes_them(tmp_path: Path) -> None:
    assert _policy(tmp_path, '[audit.severity]\n"closure.nope" = "note"\n').startswith(
        'audit.severity."closure.nope": unknown check family or rule'
    )


def test_json_file_names_the_key_path(tmp_path: Path) -> None:
    path = tmp_path / "build.json"
    path.write_text('{"include": [{"train": "cu130", "python": "3.12", "platform": 5}]}')
    with pytest.raises(CudashipError) as info:
        read_build_matrix(path)
    assert str(info.value) == f"{path}: include[0].platform: must be a non-empty string, not an integer"


def test_error_class_is_the_callers() -> None:
    table = Table({"n": "x"}, "data", "knowledge data file t.toml", KnowledgeError)
    with pytest.raises(KnowledgeError) as info:
        table.integer("n")
    assert str(info.value) == "knowledge data file t.toml: data.n: must be an integer, not a string"
    with pytest.raises(KnowledgeError, match=r"data\.m: is required: a count"):
        table.number("m", "a count")
