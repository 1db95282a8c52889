"""Ray against Dask for ``cudaship survey --engine``: which distributed engine the survey runs on.

Each measurement runs in its own process with the engine's Python (a virtual environment holding the engine,
pyarrow and cudaship's dependencies; cudaship from ``PYTHONPATH=src``), so whole-process timers can time it::

    python benchmarks/survey_engines.py wheels /tmp/wh --count 200          # generated wheels (nvcc fixtures)
    PY_DASK=/tmp/eng-dask/bin/python PY_RAY=/tmp/eng-ray/bin/python \\
      python benchmarks/survey_engines.py table --wheels /tmp/wh --runs 3   # the table and the ratios
    $PY_DASK benchmarks/survey_engines.py one dask survey --wheels /tmp/wh  # one measurement, a JSON line

Measurements (``one ENGINE WHAT``; ENGINE: local, dask, ray):

- ``start``: a local cluster of ``--workers`` processes started and one trivial task's result back, then
  shut down (cold start);
- ``tasks``: ``--tasks`` (1,000) trivial tasks through the engine's own task API (Dask futures, Ray remote
  functions), after the start: the per-task overhead;
- ``survey``: every wheel of ``--wheels`` surveyed by a stand-in of the per-wheel work (cudaship's scan of
  the local wheel, rows from ``records.empty_row()``), parts of ``--part`` wheels written by the engine's own
  Parquet writer (``dask.dataframe.to_parquet``, ``ray.data.Dataset.write_parquet``; local: pyarrow in the
  driver) under ``DEST/parts/``, with :func:`cudaship.survey.store.arrow_schema`.

Every measurement reports its wall seconds and the peak resident memory of the whole process tree (the
driver, the scheduler, the workers: sampled every 20 ms from /proc), the number a 2-CPU machine cares about.
"""

from __future__ import annotations

import os
import sys

# Run as a script, this directory is sys.path[0], and benchmarks/inspect.py would shadow the standard
# library's inspect (which dataclasses imports): drop it before anything else is imported.
_HERE = os.path.dirname(os.path.abspath(__file__))
sys.path[:] = [p for p in sys.path if os.path.abspath(p or os.curdir) != _HERE]

import argparse  # noqa: E402
import dataclasses  # noqa: E402
import json  # noqa: E402
import shutil  # noqa: E402
import statistics  # noqa: E402
import subprocess  # noqa: E402
import tempfile  # noqa: E402
import threading  # noqa: E402
import time  # noqa: E402
import zipfile  # noqa: E402
from pathlib import Path  # noqa: E402
from typing import Any  # noqa: E402

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT / "src"))
NVCC_CACHE = Path.home() / ".cache" / "cudaship-tests" / "nvcc"


# --- the workload -----------------------------------------------------------------------------------------


def make_wheels(directory: Path, count: int) -> list[Path]:
    """``count`` wheels of 2 native libraries each (nvcc-built test fixtures when cached, else ELF stubs)."""
    libs = sorted(NVCC_CACHE.glob("*/*.so"))[:6] or []
    blobs = [p.read_bytes() for p in libs] or [b"\x7fELF" + bytes(4096)]
    directory.mkdir(parents=True, exist_ok=True)
    out = []
    for i in range(count):
        name = f"bench_{i:05d}"
        path = directory / f"{name}-1.0-py3-none-manylinux_2_28_x86_64.whl"
        info = f"{name}-1.0.dist-info"
        with zipfile.ZipFile(path, "w", zipfile.ZIP_DEFLATED) as zf:
            for j in range(2):
                zf.writestr(f"{name}/lib{j}.so", blobs[(i + j) % len(blobs)])
            zf.writestr(f"{name}/__init__.py", b"")
            zf.writestr(f"{info}/METADATA", f"Metadata-Version: 2.1\nName: {name}\nVersion: 1.0\n")
            zf.writestr(f"{info}/WHEEL", "Wheel-Version: 1.0\nRoot-Is-Purelib: false\nTag: py3-none-any\n")
            zf.writestr(f"{info}/RECORD", "")
        out.append(path)
    return out


def refs_of(directory: Path) -> list[Any]:
    from cudaship.survey.records import WheelRef

    return [
        WheelRef(p.name.split("-")[0], "1.0", p.name, p.as_uri(), size=p.stat().st_size)
        for p in sorted(directory.glob("*.whl"))
    ]


def standin_survey_wheel(ref: Any, options: Any) -> Any:
    """Comparable work to ``cudaship.survey.work.survey_wheel`` on a local wheel: cudaship's scan, one row per
    native library."""
    import urllib.parse
    import urllib.request

    from cudaship.inspection.scan import Purpose, scan
    from cudaship.survey.records import WheelOutcome, empty_row

    path = urllib.request.url2pathname(urllib.parse.urlsplit(ref.url).path)
    scanned = scan(path, purpose=Purpose.INSPECT, workers=1)
    rows = []
    for report in scanned.files:
        row = empty_row()
        row.update(wheel_key=ref.key, project=ref.project, version=ref.version, filename=ref.filename)
        row.update(url=ref.url, wheel_size=ref.size, library=report.path, library_size=report.size)
        row["format"] = report.format.value if report.format else None
        sass = sorted({f"sm_{c.arch}" for c in report.device_code if getattr(c, "kind", None)})
        row.update(sass=sass, arch_bytes=[], error=report.error)
        rows.append(row)
    if not rows:
        rows = [{**empty_row(), "wheel_key": ref.key, "project": ref.project, "filename": ref.filename}]
    return WheelOutcome(ref, rows, fetched_bytes=ref.size or 0, read_members=len(rows))


def _rows(outcomes: list[Any]) -> list[dict[str, Any]]:
    return [row for o in outcomes for row in o.rows]


def _survey_batch(refs: list[Any], options: Any) -> list[Any]:
    return [standin_survey_wheel(r, options) for r in refs]


def _chunks(items: list[Any], size: int) -> list[list[Any]]:
    return [items[i : i + size] for i in range(0, len(items), size)]


# --- peak memory of the process tree ----------------------------------------------------------------------


class TreePeak:
    """The largest sum of resident memory of this process and all its descendants, sampled every 20 ms."""

    def __init__(self) -> None:
        self.peak = 0
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._loop, daemon=True)
        self._thread.start()

    def _tree_rss(self) -> int:
        parents: dict[int, int] = {}
        rss: dict[int, int] = {}
        for pid in os.listdir("/proc"):
            if not pid.isdigit():
                continue
            try:
                with open(f"/proc/{pid}/stat") as f:
                    fields = f.read().rsplit(")", 1)[1].split()
                parents[int(pid)] = int(fields[1])
                rss[int(pid)] = int(fields[21]) * 4096
            except (OSError, IndexError, ValueError):
                continue
        mine = {os.getpid()}
        changed = True
        while changed:
            changed = False
            for pid, ppid in parents.items():
                if ppid in mine and pid not in mine:
                    mine.add(pid)
                    changed = True
        return sum(rss.get(p, 0) for p in mine)

    def _loop(self) -> None:
        while not self._stop.is_set():
            self.peak = max(self.peak, self._tree_rss())
            time.sleep(0.02)

    def stop(self) -> int:
        self._stop.set()
        self._thread.join()
        return self.peak


# --- the engines ------------------------------------------------------------------------------------------


def _noop(x: int) -> int:
    return x + 1


def dask_start(workers: int) -> Any:
    from dask.distributed import Client, LocalCluster

    cluster = LocalCluster(
        n_workers=workers, threads_per_worker=1, processes=True, dashboard_address=None, silence_logs=40
    )
    client = Client(cluster)
    client.submit(_noop, 1).result()
    return client


def ray_start(workers: int) -> Any:
    import ray

    ray.init(num_cpus=workers, include_dashboard=False, log_to_driver=False, configure_logging=False)
    ray.get(ray.remote(_noop).remote(1))
    return ray


def dask_tasks(client: Any, n: int) -> None:
    assert sum(client.gather(client.map(_noop, range(n), pure=False))) == n * (n + 1) // 2


def ray_tasks(ray: Any, n: int) -> None:
    f = ray.remote(_noop)
    assert sum(ray.get([f.remote(i) for i in range(n)])) == n * (n + 1) // 2


def dask_survey(client: Any, refs: list[Any], options: Any, parts: Path, part: int) -> int:
    import dask
    import dask.dataframe as dd
    import pandas as pd
    import pyarrow as pa

    from cudaship.survey.store import arrow_schema

    schema = arrow_schema()

    def frame(outcomes: list[Any]) -> Any:
        return pa.Table.from_pylist(_rows(outcomes), schema=schema).to_pandas(types_mapper=pd.ArrowDtype)

    meta = schema.empty_table().to_pandas(types_mapper=pd.ArrowDtype)
    batches = [dask.delayed(_survey_batch)(c, options) for c in _chunks(refs, part)]
    ddf = dd.from_delayed([dask.delayed(frame)(b) for b in batches], meta=meta, verify_meta=False)
    dd.to_parquet(
        ddf,
        str(parts),
        schema=arrow_schema(),
        write_index=False,
        write_metadata_file=False,
        name_function=lambda i: f"bench-{i:05d}.parquet",
        compute_kwargs={"retries": 2},
    )
    return len(batches)


def ray_survey(ray: Any, refs: list[Any], options: Any, parts: Path, part: int) -> int:
    import pyarrow as pa
    import ray.data

    from cudaship.survey.store import arrow_schema

    schema = arrow_schema()

    from cudaship.survey.records import WheelRef

    def batch(items: Any) -> Any:
        outcomes = _survey_batch([WheelRef(**r) for r in items.to_pylist()], options)
        return pa.Table.from_pylist(_rows(outcomes), schema=schema)

    chunks = _chunks(refs, part)
    ds = ray.data.from_items([dataclasses.asdict(r) for r in refs], override_num_blocks=len(chunks))
    ds = ds.map_batches(batch, batch_size=part, batch_format="pyarrow", max_retries=2)
    ds.write_parquet(str(parts), min_rows_per_file=None)
    return len(chunks)


def local_survey(workers: int, refs: list[Any], options: Any, parts: Path, part: int) -> int:
    from concurrent.futures import ProcessPoolExecutor

    import pyarrow as pa
    import pyarrow.parquet as pq

    from cudaship.survey.records import WheelOutcome
    from cudaship.survey.store import arrow_schema

    def write_rows(path: Path, rows: list[dict[str, Any]]) -> None:
        pq.write_table(pa.Table.from_pylist(rows, schema=arrow_schema()), path)

    n = 0
    with ProcessPoolExecutor(workers) as pool:
        outcomes: list[WheelOutcome] = []
        for outcome in pool.map(standin_survey_wheel, refs, [options] * len(refs)):
            outcomes.append(outcome)
            if len(outcomes) == part:
                write_rows(parts / f"bench-{n:05d}.parquet", _rows(outcomes))
                n, outcomes = n + 1, []
        if outcomes:
            write_rows(parts / f"bench-{n:05d}.parquet", _rows(outcomes))
            n += 1
    return n


def one(args: argparse.Namespace) -> dict[str, Any]:
    """One measurement in this process."""
    from cudaship.survey.records import SurveyOptions

    peak = TreePeak()
    t0 = time.perf_counter()
    result: dict[str, Any] = {"engine": args.engine, "what": args.what, "workers": args.workers}
    handle = None
    if args.engine == "dask":
        handle = dask_start(args.workers)
    elif args.engine == "ray":
        handle = ray_start(args.workers)
    result["start_s"] = time.perf_counter() - t0
    t1 = time.perf_counter()
    if args.what == "tasks":
        (dask_tasks if args.engine == "dask" else ray_tasks)(handle, args.tasks)
        result["tasks"] = args.tasks
        result["per_task_ms"] = (time.perf_counter() - t1) * 1000 / args.tasks
    elif args.what == "survey":
        refs = refs_of(Path(args.wheels))
        dest = Path(tempfile.mkdtemp(prefix="survey-engines-"))
        parts = dest / "parts"
        parts.mkdir()
        options = SurveyOptions(cache_dir=str(dest / "cache"), audit=False)
        if args.engine == "dask":
            n = dask_survey(handle, refs, options, parts, args.part)
        elif args.engine == "ray":
            n = ray_survey(handle, refs, options, parts, args.part)
        else:
            n = local_survey(args.workers, refs, options, parts, args.part)
        import pyarrow.parquet as pq

        files = sorted(parts.glob("*.parquet"))
        result["rows"] = sum(pq.read_metadata(f).num_rows for f in files)
        result["parts"] = len(files)
        result["batches"] = n
        result["wheels"] = len(refs)
        result["survey_s"] = time.perf_counter() - t1
        result["wheels_per_s"] = len(refs) / result["survey_s"]
        shutil.rmtree(dest)
    result["work_s"] = time.perf_counter() - t1
    t2 = time.perf_counter()
    if args.engine == "dask":
        cluster = handle.cluster
        handle.close()
        cluster.close()
    elif args.engine == "ray":
        handle.shutdown()
    result["stop_s"] = time.perf_counter() - t2
    result["total_s"] = time.perf_counter() - t0
    result["peak_tree_mb"] = peak.stop() / 1e6
    return result


def table(args: argparse.Namespace) -> None:
    pythons = {"local": sys.executable, "dask": os.environ.get("PY_DASK"), "ray": os.environ.get("PY_RAY")}
    env = {**os.environ, "PYTHONPATH": str(ROOT / "src")}
    results: dict[tuple[str, str], list[dict[str, Any]]] = {}
    plan = [(e, w) for e in ("dask", "ray") for w in ("start", "tasks", "survey")] + [("local", "survey")]
    for _ in range(args.runs):
        for engine, what in plan:  # interleaved: a drift of the machine's speed touches every engine alike
            python = pythons[engine]
            if not python:
                continue
            cmd = [python, __file__, "one", engine, what, "--workers", str(args.workers)]
            cmd += ["--wheels", args.wheels, "--part", str(args.part), "--tasks", str(args.tasks)]
            out = subprocess.run(cmd, env=env, capture_output=True, text=True, check=True).stdout
            results.setdefault((engine, what), []).append(json.loads(out.strip().splitlines()[-1]))

    def med(engine: str, what: str, key: str) -> float:
        values = [r[key] for r in results.get((engine, what), []) if key in r]
        return statistics.median(values) if values else float("nan")

    rows = [
        ("cold start + 1 task, s", "start", "start_s"),
        ("shutdown, s", "start", "stop_s"),
        (f"per task ({args.tasks} trivial), ms", "tasks", "per_task_ms"),
        ("peak tree RSS, idle cluster, MB", "start", "peak_tree_mb"),
        (f"peak tree RSS, {args.tasks} tasks, MB", "tasks", "peak_tree_mb"),
        ("survey wheels/s (after start)", "survey", "wheels_per_s"),
        ("survey whole process, s", "survey", "total_s"),
        ("peak tree RSS, survey, MB", "survey", "peak_tree_mb"),
    ]
    print(
        f"medians of {args.runs} runs, {args.workers} workers, wheels of {args.wheels}, parts of {args.part}"
    )
    print(f"{'measure':40} {'dask':>9} {'ray':>9} {'ray/dask':>9} {'local':>9}")
    for label, what, key in rows:
        d, r, loc = med("dask", what, key), med("ray", what, key), med("local", what, key)
        print(f"{label:40} {d:9.2f} {r:9.2f} {r / d:9.2f} {loc:9.2f}")
    print(json.dumps({f"{e}/{w}": v for (e, w), v in results.items()}))


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    sub = parser.add_subparsers(dest="cmd", required=True)
    w = sub.add_parser("wheels")
    w.add_argument("directory")
    w.add_argument("--count", type=int, default=200)
    for name in ("one", "table"):
        p = sub.add_parser(name)
        if name == "one":
            p.add_argument("engine", choices=("local", "dask", "ray"))
            p.add_argument("what", choices=("start", "tasks", "survey"))
        p.add_argument("--workers", type=int, default=2)
        p.add_argument("--wheels", default="")
        p.add_argument("--part", type=int, default=16)
        p.add_argument("--tasks", type=int, default=1000)
        p.add_argument("--runs", type=int, default=3)
    args = parser.parse_args()
    if args.cmd == "wheels":
        print(len(make_wheels(Path(args.directory), args.count)), "wheels in", args.directory)
    elif args.cmd == "one":
        print(json.dumps(one(args)))
    else:
        table(args)


if __name__ == "__main__":
    main()
