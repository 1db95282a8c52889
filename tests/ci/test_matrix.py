"""Every filtering rule and failure of the build and end-to-end matrices, table-driven."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

import pytest

from cudaship.ci import archs as ci_archs
from cudaship.ci.matrix import build_matrix, derive_e2e, nearest_train, parse_matrix_config
from cudaship.ci.records import ArchSyntaxes, Event, MatrixConfig, RowKind
from cudaship.config import ProjectConfig
from cudaship.errors import CudashipError, PolicyError

BASE: dict[str, Any] = {
    "trains": ["cu126", "cu130", "cu132"],
    "python": ["3.10", "3.11", "3.12", "3.13"],
    "platforms": {
        "linux-x86_64": {"runner": "ubuntu-24.04", "gpu-runner": "linux-gpu"},
        "linux-aarch64": {"runner": "ubuntu-24.04-arm"},
        "windows-x86_64": {"runner": "windows-2022", "gpu-runner": "windows-gpu", "secrets": True},
    },
    "default-train": "cu130",
    "default-python": "3.12",
}


def cfg(**overrides: Any) -> MatrixConfig:
    table = {**BASE, **overrides}
    return parse_matrix_config({k: v for k, v in table.items() if v is not None}, "test.toml")


def real_lookup(archs: dict[str, Any] | None = None) -> Callable[[str, str], ArchSyntaxes | None]:
    """The arch table audit uses: built in, or the given ``archs`` configuration table."""
    table = ci_archs.arch_table(ProjectConfig({"archs": archs} if archs else {}, None))

    def lookup(train: str, machine: str) -> ArchSyntaxes | None:
        return ci_archs.try_syntaxes(table, train, machine)

    return lookup


def keys(result_rows: Any) -> list[tuple[str, str, str]]:
    return [(r.train, r.python, r.platform) for r in result_rows]


# ------------------------------------------------------------------------------------------ nearest train


@pytest.mark.parametrize(
    ("supported", "default", "expected"),
    [
        pytest.param(["cu126", "cu130", "cu132"], "cu130", "cu130", id="default-supported"),
        pytest.param(["cu126", "cu132", "cu134"], "cu130", "cu126", id="dropped-default-takes-older"),
        pytest.param(["cu128", "cu126", "cu134"], "13.2", "cu128", id="newest-older-not-oldest"),
        pytest.param(["cu132", "cu134"], "cu130", "cu132", id="no-older-takes-oldest-newer"),
        pytest.param(["cu126", "cu130"], "cu132", "cu130", id="default-newer-than-all"),
        pytest.param([], "cu130", None, id="nothing-supported"),
    ],
)
def test_nearest_train(supported: list[str], default: str, expected: str | None) -> None:
    assert nearest_train(supported, default) == expected


# ------------------------------------------------------------------------------------------ build rows


@dataclass
class Case:
    event: Event
    overrides: dict[str, Any] = field(default_factory=dict)
    labels: tuple[str, ...] = ()
    fork: bool = False
    archs: dict[str, Any] | None = None
    rows: list[tuple[str, str, str]] | None = None  #: exact rows expected, when given
    count: int | None = None
    problems: tuple[str, ...] = ()  #: substrings, one per expected problem
    notes: tuple[str, ...] = ()  #: substrings that must appear in some note


ALL_ROWS = 3 * 4 * 3

CASES = {
    "pr-one-row-default": Case(
        Event.PULL_REQUEST,
        rows=[("cu130", "3.12", "linux-x86_64")],
        notes=("one row, cu130 (the default train)",),
    ),
    "pr-other-labels-one-row": Case(Event.PULL_REQUEST, labels=("ciflow/trunk", "docs"), count=1),
    "pr-default-dropped-older": Case(
        Event.PULL_REQUEST,
        {"trains": ["cu126", "cu132"]},
        rows=[("cu126", "3.12", "linux-x86_64")],
        notes=("nearest the default cu130",),
    ),
    "pr-default-dropped-only-newer": Case(
        Event.PULL_REQUEST, {"trains": ["cu132"]}, rows=[("cu132", "3.12", "linux-x86_64")]
    ),
    "pr-default-platform": Case(
        Event.PULL_REQUEST, {"default-platform": "windows-x86_64"}, rows=[("cu130", "3.12", "windows-x86_64")]
    ),
    "pr-default-row-excluded": Case(
        Event.PULL_REQUEST,
        {"exclude": [{"train": "cu130", "python": "3.12", "platform": "linux-x86_64"}]},
        rows=[("cu126", "3.12", "linux-x86_64")],
    ),
    "pr-labelled-all": Case(Event.PULL_REQUEST, labels=("ciflow/binaries/all",), count=ALL_ROWS),
    "pr-custom-label": Case(
        Event.PULL_REQUEST, {"all-label": "build-all"}, labels=("build-all",), count=ALL_ROWS
    ),
    "push-all": Case(Event.PUSH, count=ALL_ROWS),
    "schedule-all": Case(Event.SCHEDULE, count=ALL_ROWS),
    "push-exclude-platform-train": Case(
        Event.PUSH, {"exclude": [{"train": "cu126", "platform": "linux-aarch64"}]}, count=ALL_ROWS - 4
    ),
    "release-complete": Case(Event.RELEASE, count=ALL_ROWS),
    "release-train-without-row": Case(
        Event.RELEASE, {"exclude": [{"train": "cu126"}]}, problems=("supported train cu126 has no row",)
    ),
    "release-pair-without-row": Case(
        Event.RELEASE,
        {"exclude": [{"train": "cu132", "python": "3.10"}]},
        problems=("(Python 3.10, train cu132) has no row",),
    ),
    "release-two-gaps": Case(
        Event.RELEASE,
        {"exclude": [{"train": "cu132", "python": "3.10"}, {"train": "cu126", "python": "3.13"}]},
        problems=("(Python 3.10, train cu132)", "(Python 3.13, train cu126)"),
    ),
    "release-train-without-arch-list": Case(
        Event.RELEASE,
        {"platforms": ["linux-x86_64"]},
        archs={"cu126": {"x86_64": ["8.0", "9.0"]}, "cu130": {"x86_64": ["8.0", "12.0"]}},
        problems=("train cu132 has no arch list for x86_64",),
    ),
    "push-train-without-arch-list-dropped": Case(
        Event.PUSH,
        {"platforms": ["linux-x86_64"]},
        archs={"cu126": {"x86_64": ["8.0", "9.0"]}, "cu130": {"x86_64": ["8.0", "12.0"]}},
        count=8,
        notes=("train cu132 has no arch list for x86_64 in the arch table: 4 rows left out",),
    ),
    "fork-pr-labelled-drops-secret-rows": Case(
        Event.PULL_REQUEST,
        labels=("ciflow/binaries/all",),
        fork=True,
        count=ALL_ROWS - 12,
        notes=("12 rows on windows-x86_64",),
    ),
    "fork-pr-default-row-needs-secrets": Case(
        Event.PULL_REQUEST,
        {"default-platform": "windows-x86_64"},
        fork=True,
        rows=[],
        notes=("need repository secrets",),
    ),
    "fork-pr-no-secrets-needed": Case(
        Event.PULL_REQUEST, fork=True, rows=[("cu130", "3.12", "linux-x86_64")]
    ),
}


@pytest.mark.parametrize("case", list(CASES.values()), ids=list(CASES))
def test_build_matrix(case: Case) -> None:
    config = cfg(**case.overrides)
    result = build_matrix(config, real_lookup(case.archs), case.event, case.labels, fork=case.fork)
    assert len(result.problems) == len(case.problems), result.problems
    for expected in case.problems:
        assert any(expected in got for got in result.problems), result.problems
    assert result.ok == (not case.problems)
    if case.rows is not None:
        assert keys(result.rows) == case.rows
    if case.count is not None:
        assert len(result.rows) == case.count
    for note in case.notes:
        assert any(note in n for n in result.notes), result.notes
    # every candidate is either a row or skipped with a reason
    considered = set(keys(result.rows)) | {(s.train, s.python, s.platform) for s in result.skipped}
    assert len(considered) == ALL_ROWS or case.overrides.get("trains") or case.overrides.get("platforms")
    assert all(s.reason for s in result.skipped)
    assert all(r.kind is RowKind.BUILD for r in result.rows)


def test_rows_carry_the_arch_table_lists() -> None:
    config = cfg()
    table = ci_archs.arch_table(ProjectConfig({}, None))
    result = build_matrix(config, real_lookup(), Event.PUSH)
    for row in result.rows:
        expected = ci_archs.lookup(table, row.train, row.machine)
        assert row.archs is not None
        # every arch SASS, the newest also PTX, in each syntax
        assert row.archs.list.split() == [*expected.sass_names(), *expected.ptx_names()]
        assert expected.ptx_names() == (expected.archs()[-1].ptx_name,)
        assert row.archs.torch.endswith("+PTX")
        assert row.archs.torch.count("+PTX") == 1
        entry = row.to_github()
        assert entry["torch_cuda_arch_list"] == row.archs.torch
        assert entry["cmake_cuda_architectures"] == row.archs.cmake
        assert entry["cuda"] == ci_archs.train_info(row.train).version
    machines = {(r.train, r.machine): r.archs for r in result.rows}
    assert machines[("cu132", "x86_64")] is not None
    assert machines[("cu132", "x86_64")].list.split()[:-1] == [
        "sm_80",
        "sm_86",
        "sm_89",
        "sm_90",
        "sm_100",
        "sm_120",
    ]


def test_rows_use_runners_and_names() -> None:
    result = build_matrix(cfg(), real_lookup(), Event.PULL_REQUEST)
    (row,) = result.rows
    entry = row.to_github()
    assert entry["runner"] == "ubuntu-24.04"
    assert entry["name"] == "cu130-py3.12-linux-x86_64"
    assert entry["os"] == "linux"
    assert entry["machine"] == "x86_64"


# ------------------------------------------------------------------------------------------ e2e rows


def build_rows(event: Event, **overrides: Any) -> list[dict[str, str]]:
    labels = ("ciflow/binaries/all",)
    return build_matrix(cfg(**overrides), real_lookup(), event, labels).to_github()["include"]


E2E_CASES = {
    "from-pr-one-row": (Event.PULL_REQUEST, {}, False, [("cu130", "3.12", "linux-x86_64")], None),
    "from-push-every-train-oldest-python": (
        Event.PUSH,
        {},
        False,
        [(t, "3.10", p) for t in ("cu126", "cu130", "cu132") for p in ("linux-x86_64", "windows-x86_64")],
        None,
    ),
    "dropped-train-not-tested": (
        Event.PUSH,
        {"exclude": [{"train": "cu132"}]},
        False,
        [(t, "3.10", p) for t in ("cu126", "cu130") for p in ("linux-x86_64", "windows-x86_64")],
        "train cu132 was not built",
    ),
    "oldest-python-actually-built": (
        Event.PUSH,
        {"exclude": [{"python": "3.10"}, {"python": "3.11", "train": "cu126"}]},
        False,
        [
            ("cu126", "3.12", "linux-x86_64"),
            ("cu126", "3.12", "windows-x86_64"),
            ("cu130", "3.11", "linux-x86_64"),
            ("cu130", "3.11", "windows-x86_64"),
            ("cu132", "3.11", "linux-x86_64"),
            ("cu132", "3.11", "windows-x86_64"),
        ],
        None,
    ),
    "fork-gets-none": (Event.PULL_REQUEST, {}, True, [], "they run on GPU runners"),
}


@pytest.mark.parametrize(
    ("event", "overrides", "fork", "expected", "note"), list(E2E_CASES.values()), ids=list(E2E_CASES)
)
def test_derive_e2e(
    event: Event,
    overrides: dict[str, Any],
    fork: bool,
    expected: list[tuple[str, str, str]],
    note: str | None,
) -> None:
    config = cfg(**overrides)
    if event is Event.PULL_REQUEST:
        built = build_matrix(config, real_lookup(), event).to_github()["include"]
    else:
        built = build_rows(event, **overrides)
    result = derive_e2e(config, real_lookup(), built, Event.PULL_REQUEST if fork else event, fork=fork)
    assert keys(result.rows) == expected
    assert all(r.kind is RowKind.E2E and r.needs_gpu for r in result.rows)
    for r in result.rows:
        assert r.runner == config.platform(r.platform).gpu_runner
    if note:
        assert any(note in n for n in result.notes), result.notes
    if fork:
        assert result.skipped and all("fork" in s.reason for s in result.skipped)


def test_e2e_platforms_configured() -> None:
    config = cfg(**{"e2e-platforms": ["windows-x86_64"]})
    built = build_rows(Event.PUSH)
    result = derive_e2e(config, real_lookup(), built, Event.PUSH)
    assert {r.platform for r in result.rows} == {"windows-x86_64"}
    assert [r.train for r in result.rows] == ["cu126", "cu130", "cu132"]


def test_e2e_from_empty_build_matrix() -> None:
    result = derive_e2e(cfg(), real_lookup(), [], Event.PUSH)
    assert result.rows == ()
    assert any("no rows" in n for n in result.notes)


# ------------------------------------------------------------------------------------------ configuration


BAD_CONFIGS = {
    "missing-table": (
        {"trains": None, "python": None, "platforms": None, "default-train": None, "default-python": None},
        "table is missing",
    ),
    "unknown-key": ({"trainz": ["cu130"]}, "matrix.trainz: unknown key (did you mean trains?)"),
    "trains-not-list": (
        {"trains": "cu130"},
        "matrix.trains: must be a non-empty list of strings, not a string",
    ),
    "trains-empty": ({"trains": []}, "matrix.trains: must be a non-empty list of strings, not []"),
    "train-twice": ({"trains": ["cu130", "13.0"]}, "matrix.trains: lists a train twice (cu130)"),
    "train-garbage": ({"trains": ["cuda-thirteen"]}, "invalid CUDA train"),
    "python-garbage": ({"python": ["3.x"]}, "matrix.python[0]: '3.x' is not a CPython version"),
    "platform-bad-os": ({"platforms": ["macos-x86_64"]}, "matrix.platforms[0]: platform 'macos-x86_64'"),
    "platform-bad-machine": ({"platforms": ["linux-riscv"]}, "unknown machine 'riscv'"),
    "platform-unknown-key": (
        {"platforms": {"linux-x86_64": {"runs-on": "x"}}},
        "matrix.platforms.linux-x86_64.runs-on: unknown key",
    ),
    "platform-secrets-type": (
        {"platforms": {"linux-x86_64": {"secrets": "yes"}}},
        "matrix.platforms.linux-x86_64.secrets: must be true or false, not a string",
    ),
    "default-python-not-listed": ({"default-python": "3.9"}, "matrix.default-python: must be one of"),
    "default-platform-not-listed": (
        {"default-platform": "windows-aarch64"},
        "matrix.default-platform: must be one of",
    ),
    "exclude-not-list": ({"exclude": {"train": "cu126"}}, "matrix.exclude: must be an array of tables"),
    "exclude-unknown-train": (
        {"exclude": [{"train": "cu118"}]},
        "matrix.exclude[0].train: must be one of trains = ['cu126', 'cu130', 'cu132'], not 'cu118'",
    ),
    "exclude-unknown-key": ({"exclude": [{"os": "linux"}]}, "matrix.exclude[0].os: unknown key"),
    "e2e-platform-unknown": (
        {"e2e-platforms": ["linux-ppc64le"]},
        "matrix.e2e-platforms[0]: 'linux-ppc64le' is not one of platforms",
    ),
}


@pytest.mark.parametrize(("overrides", "message"), list(BAD_CONFIGS.values()), ids=list(BAD_CONFIGS))
def test_bad_config(overrides: dict[str, Any], message: str) -> None:
    with pytest.raises(CudashipError) as info:
        cfg(**overrides)
    assert message in str(info.value)
    if isinstance(info.value, PolicyError):
        assert str(info.value).startswith("test.toml: matrix")
    assert "\n" not in str(info.value)


def test_config_defaults_and_order() -> None:
    config = parse_matrix_config(
        {
            "trains": ["cu132", "cu126", "13.0"],
            "python": ["3.13", "3.9", "3.10"],
            "platforms": ["linux-x86_64", "windows-amd64"],
        }
    )
    assert config.trains == ("cu126", "cu130", "cu132")
    assert config.python == ("3.9", "3.10", "3.13")
    assert config.default_train == "cu132"
    assert config.default_python == "3.13"
    assert config.default_platform == "linux-x86_64"
    assert config.all_label == "ciflow/binaries/all"
    assert config.platform("windows-amd64").machine == "x86_64"
    assert config.e2e_platforms == ("linux-x86_64",)
