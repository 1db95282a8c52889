"""Throughput of `cudaship survey`'s per-wheel work against workers, over the local index of
benchmarks/survey_index.py served on 127.0.0.1, and which resource is the limit.

    python benchmarks/survey_throughput.py [--index DIR] [--sample N] [--workers 1,2,4,8,16] [--json FILE]

Passes, each with a fresh member cache, over the same ``--sample`` wheels (spread evenly over the index):

- ``fetch``: range requests only (the tail with the central directory, then each native member's bytes, as
  the survey asks for them), 2x the most workers in threads: what the server and loopback deliver, no
  parsing. Its MB/s is the network ceiling.
- ``cpu``: :func:`cudaship.survey.work.survey_wheel` over ``file://`` URLs of the same files (no HTTP; the
  files are in the page cache after the first pass): the CPU cost per wheel.
- ``survey``: :func:`survey_wheel` over the HTTP index, in a process pool of N workers (the engine's default
  shape: one wheel a task).

For each: wall time, wheels/s, MB/s fetched and MB/s of the wheels' total size, CPU seconds of the client
processes and of the server, and utilisation (client CPU / (wall x workers)). The limit is read from the
measurements: ``cpu`` when the survey at N workers keeps its workers busy (utilisation >= 0.8) and runs
near the CPU-only pass; ``network`` when its fetched MB/s is >= 0.8 of the fetch-only pass's; ``server``
when the server processes use near one core each (a GIL each); ``cores`` when N is more than the machine's
cores; ``cpu (the machine's ...)`` when the whole machine was >= 90% busy (/proc/stat) while the survey's
workers were not (other processes had the cores); else ``latency`` (workers waiting on requests).
"""

# ruff: noqa: E402  (the path fix below must run before the imports)
from __future__ import annotations

import os
import sys

_HERE = os.path.dirname(os.path.abspath(__file__))
sys.path[:] = [p for p in sys.path if os.path.abspath(p or os.curdir) != _HERE]
sys.path.insert(0, os.path.dirname(_HERE))  # the repository root: benchmarks.survey_index

import argparse
import json
import resource
import shutil
import struct
import tempfile
import time
import urllib.request
from concurrent.futures import ProcessPoolExecutor, ThreadPoolExecutor
from pathlib import Path
from typing import Any

from benchmarks.survey_index import generate, serving_process

NATIVE = (".so", ".pyd", ".dll", ".dylib")


def _is_native(name: str) -> bool:
    base = name.rsplit("/", 1)[-1]
    return base.endswith(NATIVE) or ".so." in base


def sample(index: dict[str, Any], n: int) -> list[dict[str, Any]]:
    files = sorted(
        ({"project": p, **f} for p, fs in index["projects"].items() for f in fs), key=lambda f: f["filename"]
    )
    if n >= len(files):
        return files
    step = len(files) / n
    return [files[int(i * step)] for i in range(n)]


def _get(url: str, rng: str) -> bytes:
    req = urllib.request.Request(url, headers={"Range": rng})
    with urllib.request.urlopen(req, timeout=60) as r:
        data: bytes = r.read()
        return data


def fetch_only(url: str) -> int:
    """The survey's requests for one wheel, without parsing: the tail, the central directory, each native
    member's local header and data. Bytes transferred."""
    tail = _get(url, "bytes=-65536")
    eocd = tail.rfind(b"PK\x05\x06")
    n, cd_size, cd_offset = struct.unpack_from("<HII", tail, eocd + 10)
    total = len(tail)
    # the central directory is in the tail for these wheels (a few hundred members at most)
    start = len(tail) - (len(tail) - eocd) - cd_size
    cd = (
        tail[start : start + cd_size]
        if start >= 0
        else _get(url, f"bytes={cd_offset}-{cd_offset + cd_size - 1}")
    )
    pos = 0
    for _ in range(n):
        (csize, _usize, nlen, xlen, clen) = struct.unpack_from("<IIHHH", cd, pos + 20)
        offset = struct.unpack_from("<I", cd, pos + 42)[0]
        name = cd[pos + 46 : pos + 46 + nlen].decode()
        pos += 46 + nlen + xlen + clen
        if _is_native(name):
            total += len(_get(url, f"bytes={offset}-{offset + 30 + nlen + csize - 1}"))
    return total


def _survey_one(args: tuple[dict[str, Any], str, str, bool]) -> tuple[int, int, int, str | None]:
    from cudaship.survey.records import SurveyOptions, WheelRef
    from cudaship.survey.work import survey_wheel

    f, url, cache, audit = args
    ref = WheelRef(f["project"], f["filename"].split("-")[1], f["filename"], url, f["size"], f["sha256"],
                   f["upload-time"])  # fmt: skip
    o = survey_wheel(ref, SurveyOptions(cache_dir=cache, audit=audit))
    return o.fetched_bytes, o.read_members, o.cached_members, o.error


def _server_cpu(pids: list[int]) -> float:
    total = 0.0
    for pid in pids:
        try:
            fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
            total += (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")
        except (OSError, IndexError, ValueError):
            pass
    return total


def _children_cpu() -> float:
    r = resource.getrusage(resource.RUSAGE_CHILDREN)
    return r.ru_utime + r.ru_stime


def _machine_ticks() -> tuple[int, int]:
    """(busy, total) jiffies of all CPUs (/proc/stat), for the machine's busy share over a pass."""
    try:
        values = [int(v) for v in Path("/proc/stat").read_text().split("\n", 1)[0].split()[1:]]
    except (OSError, ValueError):
        return (0, 0)
    idle = values[3] + (values[4] if len(values) > 4 else 0)
    return (sum(values) - idle, sum(values))


def _self_cpu() -> float:
    r = resource.getrusage(resource.RUSAGE_SELF)
    return r.ru_utime + r.ru_stime


def run_pass(kind: str, files: list[dict[str, Any]], base: str, root: Path, workers: int, audit: bool,
             server_pids: list[int]) -> dict[str, Any]:  # fmt: skip
    cache = tempfile.mkdtemp(prefix=f"survey-cache-{kind}-{workers}-")
    c0, s0, srv0, m0 = _children_cpu(), _self_cpu(), _server_cpu(server_pids), _machine_ticks()
    t0 = time.perf_counter()
    fetched = read = cached = errors = 0
    try:
        if kind == "fetch":
            with ThreadPoolExecutor(workers) as ex:
                fetched = sum(ex.map(fetch_only, [f"{base}/files/{f['filename']}" for f in files]))
        else:
            urls = [
                (root / "files" / f["filename"]).as_uri()
                if kind == "cpu"
                else f"{base}/files/{f['filename']}"
                for f in files
            ]
            with ProcessPoolExecutor(workers) as ex:
                tasks = [(f, u, cache, audit) for f, u in zip(files, urls, strict=True)]
                for b, r, c, e in ex.map(_survey_one, tasks, chunksize=1):
                    fetched, read, cached, errors = (
                        fetched + b,
                        read + r,
                        cached + c,
                        errors + (e is not None),
                    )
    finally:
        shutil.rmtree(cache, ignore_errors=True)
    wall = time.perf_counter() - t0
    client = (_children_cpu() - c0) + (_self_cpu() - s0)
    server = _server_cpu(server_pids) - srv0
    total = sum(f["size"] for f in files)
    m1 = _machine_ticks()
    return {
        "machine_busy": round((m1[0] - m0[0]) / max(m1[1] - m0[1], 1), 2),
        "pass": kind,
        "workers": workers,
        "wheels": len(files),
        "errors": errors,
        "wall_s": round(wall, 2),
        "wheels_per_s": round(len(files) / wall, 1),
        "fetched_MB": round(fetched / 1e6, 1),
        "fetched_MB_per_s": round(fetched / 1e6 / wall, 1),
        "index_MB_per_s": round(total / 1e6 / wall, 1),
        "client_cpu_s": round(client, 1),
        "server_cpu_s": round(server, 1),
        "utilisation": round(client / (wall * workers), 2),
        "server_processes": len(server_pids),
        "members_read": read,
        "members_cached": cached,
    }


def limit(survey: dict[str, Any], cpu: dict[str, Any] | None, fetch: dict[str, Any], cores: int) -> str:
    """Which resource bounds the survey pass, from the measurements (see the module's docstring)."""
    if survey["workers"] > cores:
        return "cores"
    if survey["machine_busy"] >= 0.9 and survey["utilisation"] < 0.8:
        return "cpu (the machine's, taken by other processes)"
    if survey["server_cpu_s"] >= 0.8 * survey["wall_s"] * survey["server_processes"]:
        return "server"
    if fetch["fetched_MB_per_s"] and survey["fetched_MB_per_s"] >= 0.8 * fetch["fetched_MB_per_s"]:
        return "network"
    if survey["utilisation"] >= 0.8 or (cpu and survey["wheels_per_s"] >= 0.8 * cpu["wheels_per_s"]):
        return "cpu"
    return "latency"


def main(argv: list[str] | None = None) -> int:
    cores = os.cpu_count() or 1
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--index", type=Path, default=Path(tempfile.gettempdir()) / "cudaship-survey-index")
    p.add_argument("--wheels", type=int, default=5200, help="wheels the index is generated with")
    p.add_argument("--total-mb", type=float, default=2500.0)
    p.add_argument("--sample", type=int, default=1000, help="wheels each pass surveys (0: all)")
    default = ",".join(str(w) for w in (1, 2, 4, 8, 16) if w <= cores)
    p.add_argument("--workers", default=default)
    p.add_argument("--no-cpu-pass", action="store_true", help="skip the file:// (CPU-only) passes")
    p.add_argument("--no-audit", action="store_true", help="survey without the audit columns")
    p.add_argument("--json", type=Path)
    p.add_argument(
        "--server-processes",
        type=int,
        default=max(1, min(4, cores // 4)),
        help="index server processes sharing the port (default: a quarter of the cores, 1 to 4)",
    )
    a = p.parse_args(argv)
    t0 = time.perf_counter()
    index = generate(a.index, wheels=a.wheels, total_mb=a.total_mb)
    print(
        f"index: {index['wheels']} wheels, {len(index['projects'])} projects, {index['bytes'] / 1e6:.0f} MB "
        f"({time.perf_counter() - t0:.1f} s to generate or find); {cores} cores",
        flush=True,
    )
    files = sample(index, a.sample or index["wheels"])
    print(f"sample: {len(files)} wheels, {sum(f['size'] for f in files) / 1e6:.0f} MB", flush=True)
    workers = [int(w) for w in a.workers.split(",")]
    results: list[dict[str, Any]] = []
    with serving_process(a.index, a.server_processes) as (url, pids):
        base = url.rsplit("/simple", 1)[0]
        for f in files:  # warm the page cache
            (a.index / "files" / f["filename"]).read_bytes()
        fetch = run_pass("fetch", files, base, a.index, 2 * max(workers), not a.no_audit, pids)
        print(json.dumps(fetch), flush=True)
        results.append(fetch)
        for w in workers:
            cpu = None
            if not a.no_cpu_pass:
                cpu = run_pass("cpu", files, base, a.index, w, not a.no_audit, pids)
                print(json.dumps(cpu), flush=True)
                results.append(cpu)
            survey = run_pass("survey", files, base, a.index, w, not a.no_audit, pids)
            survey["limit"] = limit(survey, cpu, fetch, cores)
            print(json.dumps(survey), flush=True)
            results.append(survey)
    print(
        "\n| pass | workers | wheels/s | MB/s fetched | MB/s of the index | CPU util. | server CPU s "
        "| limit |"
    )
    print("|---|---|---|---|---|---|---|---|")
    for r in results:
        print(
            f"| {r['pass']} | {r['workers']} | {r['wheels_per_s']} | {r['fetched_MB_per_s']} | "
            f"{r['index_MB_per_s']} | {r['utilisation']} | {r['server_cpu_s']} | {r.get('limit', '')} |"
        )
    if a.json:
        head = {k: index[k] for k in ("wheels", "bytes", "args")}
        a.json.write_text(json.dumps({"cores": cores, "index": head, "results": results}, indent=1))
    return 0


if __name__ == "__main__":
    sys.exit(main())
