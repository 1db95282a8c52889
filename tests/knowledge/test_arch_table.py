"""The arch table: configuration or built-in, looked up per train and machine."""

from __future__ import annotations

from pathlib import Path

import pytest

from cudaship.ci.archs import arch_table
from cudaship.config import load_config
from cudaship.errors import KnowledgeError, PolicyError, UnknownTrainError
from cudaship.exitcodes import ExitCode
from cudaship.knowledge.arch_table import ArchTable, default_arch_table
from cudaship.knowledge.archs import format_arch_list
from cudaship.knowledge.platforms import normalize_machine
from cudaship.knowledge.releases import releases
from cudaship.knowledge.trains import parse_train


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
        default_arch_table().lookup("cu127", "x86_64")  # 12.7 was never published
    assert info.value.exit_code == ExitCode.UNKNOWN_TRAIN
    assert "cu127" in str(info.value) and "cu126, cu128, cu129, cu130" in str(info.value)


def test_builtin_table_has_a_row_for_every_train_the_toolkit_knows() -> None:
    from cudaship.knowledge.toolkit_data import trains as toolkit_trains

    table = default_arch_table()
    wanted = {parse_train(t).line for t in [*toolkit_trains(), "11.8", "12.0", "12.4"]}
    assert wanted <= set(table.trains())
    for train in table.trains():
        assert set(table.machines(train)) == {"x86_64", "aarch64"}, train.tag


def test_builtin_rows_stay_inside_what_each_release_compiles_for() -> None:
    """Every row's SASS is something its release's nvcc builds (the newest release known for a train the
    release data does not hold yet, 13.5)."""
    table = default_arch_table()
    known = {r.train: r for r in releases()}
    newest = max(known)
    for train in table.trains():
        release = known.get(train, known[newest] if train > newest else None)
        assert release is not None, train.tag
        for machine in table.machines(train):
            sms = {a.sm for a in table.lookup(train, machine).archs()}
            assert sms <= set(release.sms), (train.tag, machine, sorted(sms - set(release.sms)))


@pytest.mark.parametrize(
    ("train", "machine", "expected"),
    [
        # what PyTorch ships for these (pytorch/pytorch .ci/manywheel/build_cuda.sh; pytorch/builder before)
        ("cu118", "x86_64", "3.7;5.0;6.0;7.0;7.5;8.0;8.6;9.0+PTX"),
        ("cu124", "aarch64", "9.0+PTX"),
        ("cu128", "x86_64", "7.0;7.5;8.0;8.6;9.0;10.0;12.0+PTX"),
        ("cu129", "aarch64", "8.0;9.0;10.0;12.0+PTX"),
    ],
)
def test_rows_from_what_pytorch_ships(train: str, machine: str, expected: str) -> None:
    assert format_arch_list(default_arch_table().lookup(train, machine), "torch") == expected


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
    table = arch_table(load_config(start=tmp_path))
    assert table.lookup("cu132", "x86_64").sass_names() == ("sm_86", "sm_120")
    with pytest.raises(UnknownTrainError):
        table.lookup("cu130", "x86_64")
    # a config without [tool.cudaship.archs] (an unknown table is refused since the config is validated)
    (tmp_path / "pyproject.toml").write_text("[tool.cudaship.audit]\n")
    assert arch_table(load_config(start=tmp_path)) is default_arch_table()


@pytest.mark.parametrize(
    ("text", "key"), [("AMD64", "x86_64"), ("x64", "x86_64"), ("sbsa", "aarch64")], ids=str
)
def test_normalize_machine(text: str, key: str) -> None:
    assert normalize_machine(text) == key
