"""The survey's dataset on disk: complete-wheel parts (JSON Lines, Parquet), what is done, a damaged part, the
consolidated files, the manifest."""

from __future__ import annotations

import json
from pathlib import Path

import pyarrow.parquet as pq
import pytest

from cudaship.survey import store
from cudaship.survey.records import ROW_FIELDS, WheelOutcome, WheelRef


def ref(i: int) -> WheelRef:
    return WheelRef(
        "p", f"1.{i}", f"p-1.{i}-py3-none-any.whl", f"https://x/p-1.{i}.whl", 100 + i, f"{i:064x}"
    )


def outcome(i: int, libraries: int = 1, error: str | None = None) -> WheelOutcome:
    r = ref(i)
    if error:
        return WheelOutcome(r, [store.wheel_row(r, error)], error=error)
    rows = []
    for n in range(libraries):
        row = store.wheel_row(r)
        row.update(
            library=f"p/lib{n}.so",
            sass=["sm_90", "sm_100f"],
            arch_bytes=[{"arch": "sm_90", "kind": "sass", "bytes": 7}],
            cuda_code=True,
        )
        rows.append(row)
    return WheelOutcome(r, rows or [store.wheel_row(r)])  # no library: one row


def test_parts_hold_complete_wheels_and_say_what_is_done(tmp_path: Path) -> None:
    dest = store.survey_dir(tmp_path / "s")
    store.write_part(dest, "r1", 0, [outcome(0, 2), outcome(1, 0)])
    store.write_part(dest, "r1", 1, [outcome(2, error="not a zip file")], fmt="parquet")
    assert [p.name for p in store.parts(dest)] == ["r1-00000.jsonl", "r1-00001.parquet"]
    assert not list((dest / "parts").glob(".*"))  # no temporary file left
    done = store.scan(dest)
    assert done.keys == {ref(i).key for i in range(3)} and done.failed == {ref(2).key}
    assert (done.parts, done.rows, done.damaged) == (2, 4, [])
    assert store.done_keys(dest) == done.keys
    assert store.done_keys(dest, retry_errors=True) == {ref(0).key, ref(1).key}
    # a wheel without a library has one row, its library None and no error: done, not failed
    (row,) = [r for r in store.read_rows(dest) if r["version"] == "1.1"]
    assert row["library"] is None and row["error"] is None and row["wheel_key"] == ref(1).key


def test_a_damaged_part_is_skipped_and_named(tmp_path: Path) -> None:
    dest = store.survey_dir(tmp_path / "s")
    store.write_part(dest, "r1", 0, [outcome(0)])
    good = store.write_part(dest, "r1", 1, [outcome(1)])
    good.write_bytes(good.read_bytes()[:-20])  # cut short: the last line is no longer JSON
    (dest / "parts" / "r1-00002.parquet").write_bytes(b"PAR1 not really")
    (dest / "parts" / "r1-00003.jsonl").write_text('{"a": 1}\n')  # JSON, but not a row
    done = store.scan(dest)
    assert done.keys == {ref(0).key}
    assert len(done.damaged) == 3
    assert any("r1-00001.jsonl: line 1 is not JSON; skipped" in d for d in done.damaged)
    assert any("r1-00002.parquet: not a readable Parquet file" in d for d in done.damaged)
    assert any("r1-00003.jsonl: row 1 is not a survey row" in d for d in done.damaged)


def test_a_later_part_replaces_a_wheels_rows(tmp_path: Path) -> None:
    dest = store.survey_dir(tmp_path / "s")
    store.write_part(dest, "20260101T000000Z-aaaaaa", 0, [outcome(0, error="connection reset")])
    store.write_part(dest, "20260102T000000Z-bbbbbb", 0, [outcome(0, 3)])
    rows = store.read_rows(dest)
    assert [r["library"] for r in rows] == ["p/lib0.so", "p/lib1.so", "p/lib2.so"]
    assert store.scan(dest).failed == set()


def test_consolidated_json_lines_and_parquet_hold_the_same_rows(tmp_path: Path) -> None:
    dest = store.survey_dir(tmp_path / "s")
    store.write_part(dest, "r1", 0, [outcome(1, 2), outcome(0, 1)])
    store.write_part(dest, "r1", 1, [outcome(2, error="not a zip file")], fmt="parquet")
    result = store.consolidate(dest)
    assert (result.wheels, result.rows, result.libraries, result.failed) == (3, 4, 3, 1)
    lines = [json.loads(x) for x in (dest / store.ROWS_JSONL).read_text().splitlines()]
    assert [tuple(r) for r in lines] == [ROW_FIELDS] * 4
    assert [r["version"] for r in lines] == ["1.0", "1.1", "1.1", "1.2"]  # sorted: project, file, library
    table = pq.read_table(dest / store.ROWS_PARQUET)
    assert table.schema.equals(store.arrow_schema())
    assert table.to_pylist() == lines
    assert lines[0]["arch_bytes"] == [{"arch": "sm_90", "kind": "sass", "bytes": 7}]


def test_part_writer_writes_every_k_wheels_and_on_flush(tmp_path: Path) -> None:
    dest = store.survey_dir(tmp_path / "s")
    writer = store.PartWriter(dest, "r1", every_wheels=2, every_s=3600)
    written = [writer.add(outcome(i)) for i in range(5)]
    assert [w is not None for w in written] == [False, True, False, True, False]
    assert writer.flush() is not None and writer.flush() is None
    assert (writer.parts, writer.wheels) == (3, 5)
    assert len(store.done_keys(dest)) == 5
    timed = store.PartWriter(dest, "r2", every_wheels=100, every_s=0)
    assert timed.add(outcome(9)) is not None  # past its deadline at once


def test_the_manifest_keeps_runs_and_refuses_what_is_not_one(tmp_path: Path) -> None:
    dest = store.survey_dir(tmp_path / "s")
    store.update_run(dest, {"run": "a", "state": "running"}, sources=[{"kind": "wheelhouse"}])
    store.update_run(dest, {"run": "a", "state": "complete"})
    store.update_run(dest, {"run": "b", "state": "running"})
    manifest = store.read_manifest(dest)
    assert [(r["run"], r["state"]) for r in manifest["runs"]] == [("a", "complete"), ("b", "running")]
    assert manifest["sources"] == [{"kind": "wheelhouse"}]
    (dest / store.MANIFEST).write_text("{not json")
    with pytest.raises(store.StoreError, match=r"survey\.json: not JSON"):
        store.read_manifest(dest)


def test_a_survey_directory_that_is_a_file(tmp_path: Path) -> None:
    (tmp_path / "f").write_text("x")
    with pytest.raises(store.StoreError, match="not a directory"):
        store.survey_dir(tmp_path / "f")


def test_outcome_without_rows_gets_an_error_row(tmp_path: Path) -> None:
    (row,) = store.outcome_rows(WheelOutcome(ref(0), []))
    assert row["wheel_key"] == ref(0).key and row["error"] == "the survey gave no row for this wheel"
