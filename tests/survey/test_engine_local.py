"""The local engine: a real process pool (fork server) running the stand-in work over wheels of a wheelhouse;
back-pressure, parts every K wheels, one retry of a network failure or a dead worker, the dispatch to the
optional engines. Bounded by counting, never by time."""

from __future__ import annotations

import sys
from collections.abc import Iterator
from pathlib import Path

import pytest

from cudaship.errors import UsageError
from cudaship.survey import engine, store
from cudaship.survey.records import SurveyOptions, WheelOutcome, WheelRef
from cudaship.survey.sources import Filters, from_wheelhouse
from tests.survey import standin
from tests.survey.conftest import wheel


@pytest.fixture
def refs(tmp_path: Path) -> list[WheelRef]:
    house = tmp_path / "house"
    for i in range(7):
        wheel(house, f"kern{i}", "1.0", native=i % 3)
    return from_wheelhouse(house, Filters()).refs


def options(tmp_path: Path, **config: object) -> SurveyOptions:
    standin.configure(tmp_path / "cache", log=str(tmp_path / "log"), **config)
    return SurveyOptions(cache_dir=str(tmp_path / "cache"))


def surveyed(tmp_path: Path) -> list[str]:
    """Keys of the wheels the stand-in was given, one per try."""
    log = tmp_path / "log"
    return [line.split()[0] for line in log.read_text().splitlines()] if log.exists() else []


def test_every_wheel_once_in_parts_of_k(refs: list[WheelRef], tmp_path: Path) -> None:
    seen: list[WheelOutcome] = []
    dest = store.survey_dir(tmp_path / "s")
    counts = engine.run(
        refs,
        options(tmp_path),
        dest,
        workers=2,
        on_outcome=seen.append,
        part_wheels=3,
        work=standin.survey_wheel,
    )
    assert sorted(o.ref.key for o in seen) == sorted(r.key for r in refs)
    assert sorted(surveyed(tmp_path)) == sorted(r.key for r in refs)
    assert counts == {"retried": 0, "parts": 3}  # 3 + 3 + 1
    assert len(store.parts(dest)) == 3 and store.done_keys(dest) == {r.key for r in refs}
    rows = store.read_rows(dest)
    assert sum(1 for r in rows if r["library"]) == sum(i % 3 for i in range(7))
    assert (
        len({pid for pid in (line.split()[1] for line in (tmp_path / "log").read_text().splitlines())}) <= 2
    )


def test_back_pressure_submits_at_most_twice_the_workers(refs: list[WheelRef], tmp_path: Path) -> None:
    pulled = 0

    def lazily() -> Iterator[WheelRef]:
        nonlocal pulled
        for r in refs * 3:  # 21 wheels (keys repeat: the store does not mind)
            pulled += 1
            yield r

    at_outcome: list[int] = []
    engine.run(
        lazily(),
        options(tmp_path),
        store.survey_dir(tmp_path / "s"),
        workers=2,
        on_outcome=lambda o: at_outcome.append(pulled),
        work=standin.survey_wheel,
    )
    assert len(at_outcome) == 21
    # when the n-th outcome arrives, at most 2 x 2 wheels beyond those finished were handed out
    assert all(p <= n + 2 * 2 for n, p in enumerate(at_outcome)), at_outcome


def test_a_network_failure_is_tried_once_more(refs: list[WheelRef], tmp_path: Path) -> None:
    once, always = refs[1].filename, refs[2].filename
    seen: list[WheelOutcome] = []
    dest = store.survey_dir(tmp_path / "s")
    counts = engine.run(
        refs,
        options(tmp_path, transient_once=[once], transient=[always]),
        dest,
        workers=2,
        on_outcome=seen.append,
        work=standin.survey_wheel,
    )
    tries = surveyed(tmp_path)
    assert tries.count(refs[1].key) == 2 and tries.count(refs[2].key) == 2 and len(tries) == 9
    assert counts["retried"] == 2
    by_name = {o.ref.filename: o for o in seen}
    assert by_name[once].error is None
    assert by_name[always].error == "connection reset (stand-in)"
    assert store.scan(dest).failed == {refs[2].key}


def test_a_worker_that_dies_fails_only_its_wheels(refs: list[WheelRef], tmp_path: Path) -> None:
    crash_once, crash = refs[3].filename, refs[4].filename
    seen: list[WheelOutcome] = []
    dest = store.survey_dir(tmp_path / "s")
    engine.run(
        refs,
        options(tmp_path, crash_once=[crash_once], crash=[crash]),
        dest,
        workers=2,
        on_outcome=seen.append,
        work=standin.survey_wheel,
    )
    assert sorted(o.ref.key for o in seen) == sorted(r.key for r in refs)
    failed = {o.ref.filename: o.error for o in seen if o.error}
    assert failed == {crash: "a worker process died while surveying this wheel"}
    assert store.done_keys(dest) == {r.key for r in refs}


def test_the_default_work_is_survey_wheel_by_name(
    stand_in: None, refs: list[WheelRef], tmp_path: Path
) -> None:
    seen: list[WheelOutcome] = []
    engine.run(
        refs[:2], options(tmp_path), store.survey_dir(tmp_path / "s"), workers=1, on_outcome=seen.append
    )
    assert len(seen) == 2


@pytest.mark.parametrize(
    ("name", "missing"), [("dask", "engine"), ("dask", "extra"), ("dask", "pandas"), ("ray", "engine")]
)
def test_an_engine_that_is_not_installed_names_its_extra(
    name: str, missing: str, monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    # None in sys.modules: importing it raises ModuleNotFoundError, as a module that is not installed does
    monkeypatch.setitem(sys.modules, name if missing != "pandas" else "pandas", None)
    if missing == "engine":
        monkeypatch.setitem(sys.modules, f"cudaship.survey.engine_{name}", None)
    with pytest.raises(UsageError, match=rf"^--engine {name}: .*pip install 'cudaship\[{name}\]'$"):
        engine.check_engine(name)
    with pytest.raises(UsageError, match=rf"^--engine {name}: .*pip install 'cudaship\[{name}\]'$"):
        engine.run([], options(tmp_path), tmp_path, engine=name)
