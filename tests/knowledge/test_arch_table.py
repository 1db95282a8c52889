"""The arch table: configuration or built-in, looked up per train and machine."""

from __future__ import annotations

from pathlib import Path

import pytest

from cudaship.config import load_config
from cudaship.errors import KnowledgeError, PolicyError, UnknownTrainError
from cudaship.exitcodes import ExitCode
from cudaship.knowledge.arch_table import ArchTable, arch_table_for, default_arch_table, normalize_machine
from cudaship.knowledge.archs import format_arch_list


@pytest.mark.parametrize(
    ("train", "machine", "expected"),
    [
        ("cu126", "x86_64", "8.0;8.6;8.9;9.0+PTX"),
        ("cu126", "aarch64", "8.0;8.7;9.0+PTX"),
        ("cu130", "x86_64", "8.0;8.6;8.9;9.0;10.0;12.0+PTX"),
        ("cu130", "aarch64", "8.0;9.0;10.0;11.0;12.0+PTX"),
        ("cu132", "x86_64", "8.0;8.6;8.9;9.0;10.0;12.0+PTX"),
        ("13.2.2", "arm64", "8.0;9.0;10.0;11.0;12.0+PTX"),
        ("cu134", "AMD64", "8.0;8.6;8.9;9.0;10.0;12.0+PTX"),
    ],
    ids=lambda v: v,
)
def test_builtin_table_holds_the_reference_lists(train: str, machine: str, expected: str) -> None:
    assert format_arch_list(default_arch_table().lookup(train, machine), "torch") == expected


def test_unknown_train_is_an_error_not_an_empty_list() -> None:
    with pytest.raises(UnknownTrainError) as info:
        default_arch_table().lookup("cu128", "x86_64")
    assert info.value.exit_code == ExitCode.UNKNOWN_TRAIN
    assert "cu128" in str(info.value) and "cu126, cu130, cu132, cu134" in str(info.value)


def test_unknown_machine() -> None:
    with pytest.raises(KnowledgeError, match="ppc64le"):
        default_arch_table().lookup("cu132", "ppc64le")
    table = ArchTable.from_mapping({"cu132": {"x86_64": "8.0"}}, "cudaship.toml")
    with pytest.raises(KnowledgeError, match=r"has: x86_64"):
        table.lookup("cu132", "aarch64")


def test_any_syntax_and_lists() -> None:
    table = ArchTable.from_mapping(
        {
            "cu132": {"x86_64": "80-real;90-real;120", "aarch64": ["8.0", "sm_90", 100]},
            "12.6": {"x86_64": "-gencode arch=compute_80,code=sm_80 -arch=sm_90"},
            "cu130": {"x86_64": "all-major"},
        },
        "pyproject.toml",
    )
    assert table.lookup("cu132", "x86_64").sass_names() == ("sm_80", "sm_90", "sm_120")
    assert table.lookup("cu132", "x86_64").ptx_names() == ("compute_120",)
    assert table.lookup("cu132", "aarch64").ptx_names() == ("compute_100",)
    assert table.lookup("cu126", "x86_64").ptx_names() == ("compute_90",)
    assert table.lookup("cu130", "x86_64").sass_names()[0] == "sm_75"
    assert [t.tag for t in table.trains()] == ["cu126", "cu130", "cu132"]


@pytest.mark.parametrize(
    ("mapping", "message"),
    [
        ({}, "non-empty table"),
        ({"cuXY": {"x86_64": "8.0"}}, r"archs\.cuXY"),
        ({"cu132": "8.0"}, "must be a table of machines"),
        ({"cu132": {"riscv": "8.0"}}, r"archs\.cu132\.riscv"),
        ({"cu132": {"x86_64": "8.5"}}, r"archs\.cu132\.x86_64: unknown compute capability 8\.5"),
        ({"cu132": {"x86_64": []}}, "non-empty list"),
        ({"cu132": {"x86_64": "8.0"}, "13.2": {"x86_64": "9.0"}}, "given twice"),
        ({"cu132": {"x86_64": "8.0", "amd64": "9.0"}}, "given twice"),
    ],
    ids=[
        "empty",
        "bad-train",
        "row-not-table",
        "bad-machine",
        "bad-arch",
        "empty-list",
        "dup-train",
        "dup-machine",
    ],
)
def test_invalid_tables_name_file_and_key(mapping: dict[str, object], message: str) -> None:
    with pytest.raises(PolicyError, match=message) as info:
        ArchTable.from_mapping(mapping, "pyproject.toml")
    assert str(info.value).startswith("pyproject.toml: ")


def test_config_table_wins_over_builtin(tmp_path: Path) -> None:
    (tmp_path / "pyproject.toml").write_text('[tool.cudaship.archs.cu132]\nx86_64 = "8.6 12.0"\n')
    table = arch_table_for(load_config(start=tmp_path))
    assert table.lookup("cu132", "x86_64").sass_names() == ("sm_86", "sm_120")
    with pytest.raises(UnknownTrainError):
        table.lookup("cu130", "x86_64")
    (tmp_path / "pyproject.toml").write_text("[tool.cudaship.matrix]\n")  # a configuration without [archs]
    assert arch_table_for(load_config(start=tmp_path)) is default_arch_table()


@pytest.mark.parametrize(
    ("text", "key"), [("AMD64", "x86_64"), ("x64", "x86_64"), ("sbsa", "aarch64")], ids=str
)
def test_normalize_machine(text: str, key: str) -> None:
    assert normalize_machine(text) == key
