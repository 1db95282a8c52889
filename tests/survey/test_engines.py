"""The survey's distributed engine (``--engine dask``) on a real local Dask cluster (worker processes), and
``--engine ray`` saying why it is not offered.

The per-wheel work is a stand-in (:func:`standin_work`, below) for :func:`cudaship.survey.work.survey_wheel`:
it reads a generated wheel from disk and gives one row per native member; what it does besides comes from
``engines.json`` in the options' cache directory (the workers are other processes): a ``log`` line per
wheel surveyed (with the worker's pid), wheels whose first try raises (``raise_once``), fails on the network
(``transient_once``, ``transient``) or ends its worker process (``crash_once``)."""

from __future__ import annotations

import json
import os
import sys
import urllib.parse
import urllib.request
import zipfile
from pathlib import Path
from typing import Any

import pytest

from cudaship.errors import UsageError
from cudaship.exitcodes import ExitCode
from cudaship.survey import engine_ray
from cudaship.survey.records import SurveyOptions, WheelOutcome, WheelRef, empty_row
from tests.providers.conftest import make_wheel

pytest.importorskip("pyarrow")
pytest.importorskip("distributed")
pytest.importorskip("dask.dataframe")
pytest.importorskip("pandas")

from cudaship.survey import engine_dask

NATIVE = (".so", ".dll", ".pyd")


def _config(options: SurveyOptions) -> dict[str, Any]:
    path = Path(options.cache_dir) / "engines.json"
    return json.loads(path.read_text()) if path.exists() else {}


def _first_time(options: SurveyOptions, what: str, ref: WheelRef) -> bool:
    try:
        fd = os.open(Path(options.cache_dir) / f"{what}-{ref.filename}", os.O_CREAT | os.O_EXCL | os.O_WRONLY)
    except FileExistsError:
        return False
    os.close(fd)
    return True


def _row(ref: WheelRef, **columns: Any) -> dict[str, Any]:
    row = empty_row()
    row.update(project=ref.project, version=ref.version, filename=ref.filename, url=ref.url)
    row.update(wheel_sha256=ref.sha256, wheel_size=ref.size, upload_time=ref.upload_time, **columns)
    return row


def standin_work(ref: WheelRef, options: SurveyOptions) -> WheelOutcome:
    config = _config(options)
    if config.get("log"):
        with open(config["log"], "a") as f:
            f.write(f"{ref.filename} {os.getpid()}\n")
    name = ref.filename
    if name in config.get("raise_once", []) and _first_time(options, "raise", ref):
        raise RuntimeError("the first try of this wheel fails (stand-in)")
    if name in config.get("crash_once", []) and _first_time(options, "crash", ref):
        os._exit(3)
    if name in config.get("transient", []) or (
        name in config.get("transient_once", []) and _first_time(options, "transient", ref)
    ):
        outcome = WheelOutcome(
            ref, [_row(ref, error="connection reset (stand-in)")], error="connection reset"
        )
        outcome.transient = True  # type: ignore[attr-defined]  (WheelOutcome.transient: the survey-cli branch)
        return outcome
    path = urllib.request.url2pathname(urllib.parse.urlsplit(ref.url).path)
    with zipfile.ZipFile(path) as zf:
        native = sorted(n for n in zf.namelist() if n.endswith(NATIVE))
        sizes = {n: zf.getinfo(n).file_size for n in native}
    rows = [
        _row(
            ref,
            library=m,
            library_size=sizes[m],
            sass=["sm_90", "sm_120"],
            arch_bytes=[{"arch": "sm_90", "kind": "sass", "bytes": 10}],
            cuda_code=True,
            native_libraries=len(native),
        )
        for m in native
    ]
    return WheelOutcome(ref, rows or [_row(ref, native_libraries=0)], read_members=len(native))


def _wheels(tmp_path: Path, count: int = 5) -> list[WheelRef]:
    directory = tmp_path / "wheels"
    directory.mkdir()
    refs = []
    for i in range(count):
        files = {f"p{i}/lib{j}.so": b"\x7fELF" + bytes(64 + j) for j in range(i % 3)}
        files[f"p{i}/__init__.py"] = b""
        path = make_wheel(directory, f"p{i}", "1.0", "py3-none-manylinux_2_28_x86_64", files)
        refs.append(WheelRef(f"p{i}", "1.0", path.name, path.as_uri(), size=path.stat().st_size))
    return refs


def _options(tmp_path: Path, **config: Any) -> SurveyOptions:
    cache = tmp_path / "cache"
    cache.mkdir(exist_ok=True)
    config.setdefault("log", str(tmp_path / "log.txt"))
    (cache / "engines.json").write_text(json.dumps(config))
    return SurveyOptions(cache_dir=str(cache), audit=False)


def _parts(dest: Path) -> list[Path]:
    return sorted((dest / "parts").iterdir())


def _part_rows(dest: Path) -> list[dict[str, Any]]:
    import pyarrow.parquet as pq

    return [row for p in _parts(dest) for row in pq.read_table(p).to_pylist()]


def _order(row: dict[str, Any]) -> tuple[str, str]:
    return (row["wheel_key"], row["library"] or "")


def _log(tmp_path: Path) -> list[str]:
    path = tmp_path / "log.txt"
    return [line.split()[0] for line in path.read_text().splitlines()] if path.exists() else []


def _run(
    refs: list[WheelRef], options: SurveyOptions, dest: Path, **kwargs: Any
) -> tuple[dict[str, int], list]:
    seen: list[WheelOutcome] = []
    kwargs.setdefault("part_wheels", 2)
    counts = engine_dask.run(
        refs, options, dest, workers=2, on_outcome=seen.append, work=standin_work, **kwargs
    )
    return counts, seen


def test_rows_equal_a_direct_loop_and_parts_hold_complete_wheels(tmp_path: Path) -> None:
    refs = _wheels(tmp_path)
    options = _options(tmp_path)
    dest = tmp_path / "survey"
    counts, seen = _run(refs, options, dest, run_id="run1")
    expected = [row for ref in refs for row in engine_dask.part_rows(standin_work(ref, options))]
    got = _part_rows(dest)
    assert sorted(got, key=_order) == sorted(expected, key=_order)
    assert all(tuple(row) == tuple(expected[0]) for row in got)  # every column, in the schema's order
    # parts of 2 wheels (5 wheels: 3 parts), named by the run, each holding every row of its wheels; the
    # staging directory is gone
    names = [p.name for p in _parts(dest)]
    assert names == ["run1-00000.parquet", "run1-00001.parquet", "run1-00002.parquet"]
    assert counts == {"parts": 3, "retried": 0}
    import pyarrow.parquet as pq

    for part in _parts(dest):
        rows = pq.read_table(part).to_pylist()
        keys = {row["wheel_key"] for row in rows}
        assert len(keys) <= 2
        assert sorted(rows, key=_order) == sorted(
            (row for row in expected if row["wheel_key"] in keys), key=_order
        )
    assert sorted(o.ref.key for o in seen) == sorted(r.key for r in refs)
    # the stand-in ran once per wheel on the cluster (and once more per wheel here, for `expected`)
    assert sorted(_log(tmp_path)) == sorted([r.filename for r in refs] * 2)


def test_a_second_run_surveys_only_what_no_part_holds(tmp_path: Path) -> None:
    refs = _wheels(tmp_path)
    options = _options(tmp_path)
    dest = tmp_path / "survey"
    _run(refs[:3], options, dest, run_id="a")
    done = {row["wheel_key"] for row in _part_rows(dest)}
    todo = [r for r in refs if r.key not in done]
    assert [r.filename for r in todo] == [r.filename for r in refs[3:]]
    _run(todo, options, dest, run_id="b")
    assert sorted(_log(tmp_path)) == sorted(r.filename for r in refs)  # each wheel surveyed once in all
    assert {row["wheel_key"] for row in _part_rows(dest)} == {r.key for r in refs}
    counts, seen = _run(
        [r for r in refs if r.key not in {x["wheel_key"] for x in _part_rows(dest)}], options, dest
    )
    assert counts == {"parts": 0, "retried": 0} and seen == []


def test_a_task_that_fails_once_is_retried_by_dask(tmp_path: Path) -> None:
    refs = _wheels(tmp_path, 3)
    failing = refs[1].filename
    options = _options(tmp_path, raise_once=[failing])
    dest = tmp_path / "survey"
    counts, _seen = _run(refs, options, dest, part_wheels=1)
    assert _log(tmp_path).count(failing) == 2  # the first try raised; Dask ran the task again
    rows = [row for row in _part_rows(dest) if row["filename"] == failing]
    assert rows and all(row["error"] is None for row in rows)
    assert counts["parts"] == 3


def test_a_network_failure_is_retried_then_kept_as_an_error_row(tmp_path: Path) -> None:
    refs = _wheels(tmp_path, 3)
    once, always = refs[0].filename, refs[2].filename
    options = _options(tmp_path, transient_once=[once], transient=[always])
    dest = tmp_path / "survey"
    counts, seen = _run(refs, options, dest, part_wheels=1)
    by_name = {row["filename"]: row for row in _part_rows(dest)}
    assert by_name[once]["error"] is None  # its part raised, Dask ran it again, the second try read it
    assert by_name[always]["error"] == "connection reset (stand-in)"  # after the retries: its error row
    assert counts == {"parts": 3, "retried": 1}
    # once: 2 tries; always: 1 + RETRIES tries raising, then one keeping its error row
    assert _log(tmp_path).count(once) == 2
    assert _log(tmp_path).count(always) == 2 + engine_dask.RETRIES
    assert sorted(o.ref.filename for o in seen) == sorted(r.filename for r in refs)


def test_a_worker_killed_mid_run_loses_no_wheel(tmp_path: Path) -> None:
    refs = _wheels(tmp_path, 4)
    victim = refs[2].filename
    options = _options(tmp_path, crash_once=[victim])
    dest = tmp_path / "survey"
    counts, _seen = _run(refs, options, dest, part_wheels=1)
    assert _log(tmp_path).count(victim) == 2  # its worker died; the scheduler ran the task on another
    assert {row["filename"] for row in _part_rows(dest)} == {r.filename for r in refs}
    assert all(row["error"] is None for row in _part_rows(dest))
    assert counts["parts"] == 4


def test_no_wheel_starts_no_cluster(tmp_path: Path) -> None:
    dest = tmp_path / "survey"
    assert engine_dask.run([], _options(tmp_path), dest, workers=2, on_outcome=None) == {
        "parts": 0,
        "retried": 0,
    }
    assert not dest.exists()


def test_missing_extra_is_one_line_naming_it(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    for name in [m for m in sys.modules if m == "distributed" or m.startswith("distributed.")]:
        monkeypatch.delitem(sys.modules, name)
    monkeypatch.setitem(sys.modules, "distributed", None)  # import distributed: ModuleNotFoundError
    with pytest.raises(UsageError) as caught:
        engine_dask.run(_wheels(tmp_path, 1), _options(tmp_path), tmp_path / "s", workers=1, on_outcome=None)
    message = str(caught.value)
    assert "\n" not in message
    assert message == "--engine dask: distributed is not installed: pip install 'cudaship[dask]'"
    assert caught.value.exit_code == ExitCode.BAD_INPUT == 2


def test_ray_is_not_offered_in_one_line(tmp_path: Path) -> None:
    with pytest.raises(UsageError) as caught:
        engine_ray.run([], _options(tmp_path), tmp_path / "s", workers=1, on_outcome=None)
    assert str(caught.value) == engine_ray.NOT_OFFERED
    assert "\n" not in engine_ray.NOT_OFFERED and "docs/survey.md" in engine_ray.NOT_OFFERED
    assert caught.value.exit_code == 2


def test_a_running_cluster_by_its_scheduler_address(tmp_path: Path) -> None:
    import distributed

    refs = _wheels(tmp_path, 3)
    options = _options(tmp_path)
    dest = tmp_path / "survey"
    with distributed.LocalCluster(
        n_workers=1,
        threads_per_worker=1,
        processes=True,
        dashboard_address=None,
        scheduler_kwargs=engine_dask.SCHEDULER_HTTP,
    ) as cluster:
        counts = engine_dask.run(
            refs,
            options,
            dest,
            workers=None,
            on_outcome=None,
            address=cluster.scheduler_address,
            part_wheels=2,
            work=standin_work,
        )
        assert counts == {"parts": 2, "retried": 0}
        assert (
            len(cluster.scheduler.workers) == 1
        )  # the cluster's own worker did the work; it is left running
    expected = [row for ref in refs for row in engine_dask.part_rows(standin_work(ref, options))]
    assert sorted(_part_rows(dest), key=_order) == sorted(expected, key=_order)
