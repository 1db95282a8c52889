"""``cudaship survey`` end to end with the local engine: a wheelhouse, a real index on 127.0.0.1 (a second
run fetches only the new wheel, counted by the server), a real kill of a running survey and its resumption,
Ctrl-C, --retry-errors, --report, and bad input as one line with exit 2."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import textwrap
import time
from pathlib import Path
from typing import Any

import pytest

from cudaship.cli.main import main
from cudaship.survey import store
from tests.providers.conftest import LocalIndex
from tests.survey import standin
from tests.survey.conftest import wheel

REPO = Path(__file__).resolve().parents[2]


def house(tmp_path: Path, n: int = 4) -> Path:
    directory = tmp_path / "house"
    for i in range(n):
        wheel(directory, f"kern{i:02d}", "1.0", native=i % 3)
    return directory


def cache(tmp_path: Path, **config: object) -> str:
    standin.configure(tmp_path / "cache", log=str(tmp_path / "log"), **config)
    return str(tmp_path / "cache")


def logged(tmp_path: Path) -> list[str]:
    log = tmp_path / "log"
    return [line.split()[0] for line in log.read_text().splitlines()] if log.exists() else []


def run_json(capsys: pytest.CaptureFixture[str], *args: str) -> dict[str, Any]:
    code = main(["survey", *args, "--format", "json", "--no-progress"])
    out, err = capsys.readouterr()
    assert code == 0, err
    summary: dict[str, Any] = json.loads(out)
    return summary


def test_a_wheelhouse_then_nothing_new(
    stand_in: None, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    source, dest = house(tmp_path), tmp_path / "out"
    first = run_json(
        capsys, "--wheelhouse", str(source), "-o", str(dest), "--cache-dir", cache(tmp_path), "-j", "2"
    )
    assert (first["selected"], first["surveyed"], first["skipped"], first["failed"]) == (4, 4, 0, 0)
    assert first["libraries"] == 0 + 1 + 2 + 0 and first["dataset_wheels"] == 4
    assert first["fetched_bytes"] == first["surveyed_bytes"] == first["selected_bytes"] > 0
    rows = [json.loads(x) for x in (dest / "rows.jsonl").read_text().splitlines()]
    assert len(rows) == 1 + 1 + 2 + 1 and (dest / "rows.parquet").is_file()
    assert store.read_rows(dest) == rows
    second = run_json(capsys, "--wheelhouse", str(source), "-o", str(dest), "--cache-dir", cache(tmp_path))
    assert (second["selected"], second["surveyed"], second["skipped"]) == (4, 0, 4)
    assert len(logged(tmp_path)) == 4  # the second run surveyed nothing
    manifest = json.loads((dest / "survey.json").read_text())
    assert [r["state"] for r in manifest["runs"]] == ["complete", "complete"]
    assert manifest["sources"] == [{"kind": "wheelhouse", "directory": str(source.resolve())}]
    assert manifest["dataset"]["wheels"] == 4 and manifest["runs"][0]["end"] is not None


def test_the_text_summary(stand_in: None, tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    code = main(
        [
            "survey",
            "--wheelhouse",
            str(house(tmp_path)),
            "-o",
            str(tmp_path / "o"),
            "--cache-dir",
            cache(tmp_path),
        ]
    )
    out, err = capsys.readouterr()
    assert code == 0 and err == ""
    assert "  surveyed   4 wheels, 0 could not be read" in out
    assert "  libraries  3 native libraries (5 rows)" in out
    assert f"  written    {tmp_path / 'o' / 'rows.jsonl'}" in out


def test_a_second_run_over_an_index_fetches_only_the_new_wheel(
    stand_in: None, local_index: LocalIndex, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    w = tmp_path / "w"
    for v in ("1.0", "1.1", "2.0"):
        local_index.add(wheel(w, "cuda-kern", v), uploaded="2026-01-01T00:00:00Z")
    args = [
        "cuda-kern",
        "--index-url",
        local_index.url,
        "-o",
        str(tmp_path / "o"),
        "--cache-dir",
        cache(tmp_path),
    ]
    first = run_json(capsys, *args)
    assert first["surveyed"] == 3 and local_index.requests == 1 + 3  # the page, then each wheel once
    local_index.add(wheel(w, "cuda-kern", "2.1"), uploaded="2026-02-01T00:00:00Z")
    before = local_index.requests
    second = run_json(capsys, *args)
    assert (second["surveyed"], second["skipped"]) == (1, 3)
    assert local_index.requests - before == 1 + 1  # the page, then the new wheel only
    assert second["fetched_bytes"] == (w / "cuda_kern-2.1-py3-none-manylinux_2_28_x86_64.whl").stat().st_size
    latest = run_json(capsys, *args, "--latest", "1")
    assert (latest["selected"], latest["surveyed"]) == (1, 0)


def test_the_written_url_list_surveys_the_same_wheels_into_the_same_rows(
    local_index: LocalIndex, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """--write-urls records the selection; --urls on that list gives the index run's rows, every column
    (upload time and size included), with the real per-wheel work and a member cache of its own."""
    w = tmp_path / "w"
    local_index.add(wheel(w, "cuda-kern", "1.0"), uploaded="2025-01-01T00:00:00Z")
    local_index.add(wheel(w, "cuda-kern", "2.0", native=2), uploaded="2026-02-01T10:00:00.5Z")
    local_index.add(wheel(w, "cuda-kern", "2.0", "py3-none-win_amd64"), uploaded="2026-02-01T11:00:00Z")
    local_index.add(
        wheel(w, "cuda-kern", "2.0", "py3-none-macosx_11_0_arm64"), uploaded="2026-02-01T11:00:00Z"
    )
    urls = tmp_path / "urls.txt"
    first = run_json(
        capsys,
        "cuda-kern",
        "--index-url",
        local_index.url,
        "--latest",
        "1",
        "--platform",
        "linux",
        "--platform",
        "windows",
        "--write-urls",
        str(urls),
        "-o",
        str(tmp_path / "a"),
        "--cache-dir",
        str(tmp_path / "cache-a"),
        "-j",
        "1",
    )
    text = urls.read_text()
    assert "# filters: latest=1, platforms=linux,windows" in text and "# 2 wheels, " in text
    listed = [x for x in text.splitlines() if not x.startswith("#")]
    assert [x.split()[0].rsplit("/", 1)[1].split("#")[0] for x in listed] == [
        "cuda_kern-2.0-py3-none-manylinux_2_28_x86_64.whl",
        "cuda_kern-2.0-py3-none-win_amd64.whl",
    ]
    before = local_index.requests
    again = run_json(
        capsys,
        "--urls",
        str(urls),
        "-o",
        str(tmp_path / "b"),
        "--cache-dir",
        str(tmp_path / "cache-b"),
        "-j",
        "1",
    )
    assert local_index.requests > before  # the wheels were read again, not taken from the first run
    assert (again["selected"], again["surveyed"], again["selected_bytes"]) == (2, 2, first["selected_bytes"])
    rows_a = (tmp_path / "a" / "rows.jsonl").read_text()
    assert rows_a == (tmp_path / "b" / "rows.jsonl").read_text()
    assert '"upload_time": "2026-02-01T10:00:00Z"' in rows_a


def test_retry_errors_surveys_failed_wheels_again(
    stand_in: None, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    source, dest = house(tmp_path), tmp_path / "o"
    broken = sorted(p.name for p in source.glob("*.whl"))[1]
    first = run_json(
        capsys, "--wheelhouse", str(source), "-o", str(dest), "--cache-dir", cache(tmp_path, broken=[broken])
    )
    assert first["failed"] == 1 and first["dataset_failed"] == 1
    again = run_json(capsys, "--wheelhouse", str(source), "-o", str(dest), "--cache-dir", cache(tmp_path))
    assert again["surveyed"] == 0  # without --retry-errors an error row is an answer
    fixed = run_json(
        capsys, "--wheelhouse", str(source), "-o", str(dest), "--cache-dir", cache(tmp_path), "--retry-errors"
    )
    assert (fixed["surveyed"], fixed["failed"], fixed["dataset_failed"], fixed["dataset_wheels"]) == (
        1,
        0,
        0,
        4,
    )
    assert [r["error"] for r in store.read_rows(dest) if r["filename"] == broken] == [None]


def test_report_calls_the_html_renderer(
    stand_in: None, tmp_path: Path, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    import types

    fake = types.ModuleType("cudaship.render.survey_html")  # a stand-in until render/survey_html.py is merged
    fake.render_html = lambda rows, manifest: f"<html>{len(rows)} rows, {len(manifest['runs'])} runs</html>"  # type: ignore[attr-defined]
    monkeypatch.setitem(sys.modules, "cudaship.render.survey_html", fake)
    report = tmp_path / "r.html"
    run_json(
        capsys,
        "--wheelhouse",
        str(house(tmp_path)),
        "-o",
        str(tmp_path / "o"),
        "--cache-dir",
        cache(tmp_path),
        "--report",
        str(report),
    )
    assert report.read_text() == "<html>5 rows, 1 runs</html>"


# --- a real kill, and Ctrl-C ------------------------------------------------------------------------------

#: seconds per wheel while a test stops the survey: 12 wheels on 2 workers last at least 3.6 s, so that a test
#: process starved of CPU by a loaded machine (the whole suite on 2 cores) still finds the survey running when
#: it sends its signal (at 0.2 s the survey could finish, or nearly, before the signal came)
KILL_DELAY = 0.6

SCRIPT = """
import functools, sys
from cudaship.survey import engine
from tests.survey import standin
engine.default_work = lambda: standin.survey_wheel
engine.survey = functools.partial(engine.survey, part_wheels=2)
from cudaship.cli.main import entry
sys.argv = ["cudaship", "survey", *sys.argv[1:]]
entry()
"""


def start(args: list[str]) -> subprocess.Popen[str]:
    env = {**os.environ, "PYTHONPATH": os.pathsep.join([str(REPO / "src"), str(REPO)])}
    return subprocess.Popen(
        [sys.executable, "-c", textwrap.dedent(SCRIPT), *args],
        cwd=REPO,
        env=env,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
        start_new_session=True,  # its own process group: the kill reaches the fork server and workers too
    )


def wait_for_parts(dest: Path, n: int, proc: subprocess.Popen[str]) -> None:
    for _ in range(1200):
        if len(store.parts(dest)) >= n or proc.poll() is not None:
            break
        time.sleep(0.05)
    assert proc.poll() is None, "the survey ended before it could be stopped"
    assert len(store.parts(dest)) >= n


def test_a_killed_survey_resumes_where_it_was(
    stand_in: None, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    source, dest = house(tmp_path, 12), tmp_path / "o"
    args = ["--wheelhouse", str(source), "-o", str(dest), "--no-progress", "-j", "2"]
    proc = start([*args, "--cache-dir", cache(tmp_path, delay=KILL_DELAY)])
    try:
        wait_for_parts(dest, 2, proc)
        os.killpg(proc.pid, signal.SIGKILL)
    finally:
        proc.communicate(timeout=60)  # closes its pipes
    assert proc.returncode == -signal.SIGKILL
    done = store.done_keys(dest)
    assert 4 <= len(done) < 12
    (run,) = json.loads((dest / "survey.json").read_text())["runs"]
    assert run["state"] == "running" and run["end"] is None  # killed: never ended
    (tmp_path / "log").unlink()
    resumed = run_json(capsys, *args, "--cache-dir", cache(tmp_path))
    assert (resumed["skipped"], resumed["surveyed"]) == (len(done), 12 - len(done))
    again = set(logged(tmp_path))
    assert not again & done and len(again) == 12 - len(done)  # each wheel no complete part held, once
    assert resumed["dataset_wheels"] == 12 and len(store.read_rows(dest)) == 12 + sum(
        max(0, i % 3 - 1) for i in range(12)
    )


def test_ctrl_c_keeps_what_completed_one_line_exit_130(tmp_path: Path) -> None:
    source, dest = house(tmp_path, 12), tmp_path / "o"
    proc = start(
        [
            "--wheelhouse",
            str(source),
            "-o",
            str(dest),
            "-j",
            "2",
            "--cache-dir",
            cache(tmp_path, delay=KILL_DELAY),
        ]
    )
    try:
        wait_for_parts(dest, 1, proc)
        os.killpg(proc.pid, signal.SIGINT)  # as a terminal sends it: to the whole group
        out, err = proc.communicate(timeout=60)
    finally:
        if proc.poll() is None:
            os.killpg(proc.pid, signal.SIGKILL)
            proc.communicate(timeout=60)
    assert proc.returncode == 130, err
    assert err.strip().splitlines() == ["cudaship: aborted"] and out == ""
    done = store.scan(dest)
    assert done.damaged == [] and 2 <= len(done.keys) < 12
    (run,) = json.loads((dest / "survey.json").read_text())["runs"]
    assert run["state"] == "interrupted" and run["surveyed"] == len(done.keys)


def session_processes(sid: int) -> list[int]:
    """The processes left in session ``sid`` (the survey's, started with ``start_new_session``)."""
    pids = []
    for entry in os.listdir("/proc"):
        if entry.isdigit():
            try:
                stat = Path("/proc", entry, "stat").read_text()
            except OSError:
                continue
            fields = stat[stat.rfind(")") + 2 :].split()
            if int(fields[3]) == sid and fields[0] != "Z":
                pids.append(int(entry))
    return pids


@pytest.mark.skipif(not Path("/proc/self/stat").exists(), reason="reads the processes from /proc")
def test_sigterm_to_the_command_alone_ends_its_workers_and_keeps_what_completed(tmp_path: Path) -> None:
    """``kill PID`` (a supervisor, a CI job's timeout) reaches the command only, not its workers: before,
    the command died at once and left its fork server and worker processes running, orphaned, for good."""
    source, dest = house(tmp_path, 12), tmp_path / "o"
    proc = start(
        [
            "--wheelhouse",
            str(source),
            "-o",
            str(dest),
            "-j",
            "2",
            "--cache-dir",
            cache(tmp_path, delay=KILL_DELAY),
        ]
    )
    try:
        wait_for_parts(dest, 1, proc)
        os.kill(proc.pid, signal.SIGTERM)
        try:
            out, err = proc.communicate(timeout=60)
        except subprocess.TimeoutExpired:  # orphaned workers hold its stdout and stderr open
            out, err = "", "(its output never ended)"
        for _ in range(100):  # the workers it ended are reaped; an orphan would stay
            if not session_processes(proc.pid):
                break
            time.sleep(0.1)
        left = session_processes(proc.pid)
    finally:
        if proc.poll() is None:
            os.killpg(proc.pid, signal.SIGKILL)
            proc.communicate(timeout=60)
        for pid in session_processes(proc.pid):
            os.kill(pid, signal.SIGKILL)
    assert left == [], "processes of the survey outlived it"
    assert proc.returncode == 130, err
    assert err.strip().splitlines() == ["cudaship: aborted"] and out == ""
    done = store.scan(dest)
    assert done.damaged == [] and 2 <= len(done.keys) < 12
    (run,) = json.loads((dest / "survey.json").read_text())["runs"]
    assert run["state"] == "interrupted" and run["surveyed"] == len(done.keys)


# --- bad input ---------------------------------------------------------------------------------------------


def bad_cases(tmp_path: Path, index_url: str) -> dict[str, tuple[list[str], str]]:
    (tmp_path / "file").write_text("x")
    (tmp_path / "urls.txt").write_text("https://example.org/x.tar.gz\n")
    return {
        "unknown project": (["no-such-project", "--index-url", index_url], "no project 'no-such-project'"),
        "missing url file": (["--urls", str(tmp_path / "missing.txt")], "--urls: cannot read"),
        "bad url line": (
            ["--urls", str(tmp_path / "urls.txt")],
            "urls.txt:1: 'x.tar.gz' is not a wheel file",
        ),
        "missing wheelhouse": (["--wheelhouse", str(tmp_path / "nowhere")], "--wheelhouse: cannot read"),
        "wheelhouse is a file": (["--wheelhouse", str(tmp_path / "file")], "--wheelhouse: not a directory"),
        "two sources": (["--wheelhouse", str(tmp_path), "--urls", "u"], "--urls and --wheelhouse: give one"),
        "no source": ([], "no wheels to survey"),
        "projects without an index": (["torch", "--wheelhouse", str(tmp_path)], "PROJECT and --projects go"),
        "bad date": (
            ["--wheelhouse", str(tmp_path), "--uploaded-after", "yesterday"],
            "--uploaded-after 'yesterday'",
        ),
        "index not http": (
            ["x", "--index-url", "ftp://x/simple"],
            "--index-url: 'ftp://x/simple' is not an http",
        ),
        "dest is a file": (
            ["--wheelhouse", str(tmp_path), "-o", str(tmp_path / "file")],
            "file: cannot write: not a",
        ),
        "dest's parent missing": (
            ["--wheelhouse", str(tmp_path), "-o", str(tmp_path / "no" / "dest")],
            "no/dest: cannot write: the directory",
        ),
        "scheduler without dask": (
            ["--wheelhouse", str(tmp_path), "--scheduler", "tcp://x:1"],
            "--scheduler goes",
        ),
        "report not writable": (
            ["--wheelhouse", str(tmp_path), "--report", str(tmp_path / "no" / "r.html")],
            "does not exist",
        ),
        "url list not writable": (
            ["--wheelhouse", str(tmp_path), "--write-urls", str(tmp_path / "no" / "urls.txt")],
            "does not exist",
        ),
    }


@pytest.mark.parametrize(
    "case",
    [
        "unknown project",
        "missing url file",
        "bad url line",
        "missing wheelhouse",
        "wheelhouse is a file",
        "two sources",
        "no source",
        "projects without an index",
        "bad date",
        "index not http",
        "dest is a file",
        "dest's parent missing",
        "scheduler without dask",
        "report not writable",
        "url list not writable",
    ],
)
def test_bad_input_is_one_line_exit_2(
    case: str,
    local_index: LocalIndex,
    tmp_path: Path,
    capsys: pytest.CaptureFixture[str],
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.delenv("CUDASHIP_INDEX_URL", raising=False)
    local_index.add(wheel(tmp_path / "w", "kern", "1.0"))
    args, message = bad_cases(tmp_path, local_index.url)[case]
    if "-o" not in args:
        args = [*args, "-o", str(tmp_path / "out")]
    code = main(["survey", *args])
    out, err = capsys.readouterr()
    assert code == 2, (out, err)
    assert len(err.strip().splitlines()) == 1 and err.startswith("cudaship: error: "), err
    assert message in err and "Traceback" not in err


def test_an_engine_not_installed_is_one_line_naming_the_extra(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setitem(sys.modules, "ray", None)
    monkeypatch.setitem(sys.modules, "cudaship.survey.engine_ray", None)
    code = main(
        ["survey", "--wheelhouse", str(house(tmp_path)), "-o", str(tmp_path / "o"), "--engine", "ray"]
    )
    err = capsys.readouterr().err
    assert code == 2 and err.strip().splitlines() == [
        "cudaship: error: --engine ray: this version of cudaship has no such engine: "
        "pip install 'cudaship[ray]'"
    ]
    assert not (tmp_path / "o").exists()  # refused before any work


# --- the shipped example ------------------------------------------------------------------------------------


def test_the_readme_command_on_the_shipped_wheelhouse(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    """README's one command, as written, on examples/survey/ (the real per-wheel work once survey/work.py is
    there; the stand-in until then)."""
    import importlib.util
    import shlex

    from cudaship.survey import engine

    command = next(  # the first run of the transcript (the second shows that a run again surveys nothing)
        line.strip()
        for line in (REPO / "README.md").read_text().splitlines()
        if "cudaship survey --wheelhouse" in line
    )
    argv = shlex.split(command.removeprefix("$ "))
    assert argv[:2] == ["cudaship", "survey"] and argv[argv.index("-o") + 1] == "/tmp/survey"
    argv[argv.index("-o") + 1] = str(tmp_path / "survey")
    if importlib.util.find_spec("cudaship.survey.work") is None:
        monkeypatch.setattr(engine, "default_work", lambda: standin.survey_wheel)
    monkeypatch.chdir(REPO)
    monkeypatch.setenv("CUDASHIP_CACHE_DIR", str(tmp_path / "cache"))
    code = main([*argv[1:], "--format", "json"])
    out, err = capsys.readouterr()
    assert code == 0, err
    summary = json.loads(out)
    assert (summary["selected"], summary["surveyed"], summary["failed"]) == (4, 4, 0)
    rows = store.read_rows(tmp_path / "survey")
    by_wheel = {r["filename"]: r["library"] for r in rows}
    assert by_wheel == {
        "ptxkernels-0.1.0-py3-none-any.whl": "ptxkernels/add_one.ptx",
        "puretool-1.0.0-py3-none-any.whl": None,
        "vecadd-0.9.0-py3-none-manylinux_2_28_x86_64.whl": "vecadd/libvecadd.so",
        "vecadd-1.0.0-py3-none-manylinux_2_28_x86_64.whl": "vecadd/libvecadd.so",
    }


def test_the_shipped_wheelhouse_is_what_its_script_builds(tmp_path: Path) -> None:
    before = {p.name: p.read_bytes() for p in (REPO / "examples" / "survey").glob("*.whl")}
    script = (REPO / "examples" / "build_survey.py").read_text()
    copy = tmp_path / "examples"
    copy.mkdir()
    (copy / "build_survey.py").write_text(script)
    (copy / "libvecadd.so").write_bytes((REPO / "examples" / "libvecadd.so").read_bytes())
    subprocess.run([sys.executable, str(copy / "build_survey.py")], check=True, capture_output=True)
    assert {p.name: p.read_bytes() for p in (copy / "survey").glob("*.whl")} == before


def test_another_engine_gets_the_run_and_its_outcomes_count(
    stand_in: None, tmp_path: Path, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    """--engine dask is dispatched by name with the run's id, the work and --scheduler (a stand-in module
    until survey/engine_dask.py is merged: it surveys in this process and writes one part)."""
    import types

    from cudaship.survey import engine

    given: dict[str, Any] = {}

    def run(refs: Any, options: Any, dest: Any, **kwargs: Any) -> dict[str, int]:
        given.update(kwargs)
        outcomes = [standin.survey_wheel(r, options) for r in refs]
        store.write_part(dest, kwargs["run_id"], 0, outcomes)
        for o in outcomes:
            kwargs["on_outcome"](o)
        return {"parts": 1, "retried": 0}

    fake = types.ModuleType("cudaship.survey.engine_dask")
    fake.run = run  # type: ignore[attr-defined]
    monkeypatch.setitem(sys.modules, "cudaship.survey.engine_dask", fake)
    args = ["--wheelhouse", str(house(tmp_path)), "-o", str(tmp_path / "o"), "--cache-dir", cache(tmp_path)]
    summary = run_json(capsys, *args, "--engine", "dask", "--scheduler", "tcp://127.0.0.1:8786", "-j", "3")
    assert (summary["surveyed"], summary["libraries"], summary["dataset_wheels"]) == (4, 3, 4)
    assert given["address"] == "tcp://127.0.0.1:8786" and given["workers"] == 3
    assert given["run_id"] == summary["run"] and given["work"] is None
    assert [p.name.split("-0")[0] for p in store.parts(tmp_path / "o")] == [summary["run"]]
    assert engine.default_work() is standin.survey_wheel
