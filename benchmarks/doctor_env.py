#!/usr/bin/env python3
"""Benchmark: ``cudaship doctor --env`` on a full torch environment.

The environment: torch 2.8.0 for CUDA 12.8 (the PyPI default build, cp311 manylinux_2_28_x86_64) with triton
and the 14 NVIDIA wheels it pins, unpacked from the real PyPI wheels into a site-packages directory with
RECORD and INSTALLER (tests/fixtures/envs.py; cached under ``$CUDASHIP_TEST_CACHE/envs``): 16 distributions,
57 native libraries, 6.4 GB on disk.

Measured, each run in a fresh process (``python -m cudaship doctor --env SITE --format json``), ``--repeat``
times, median reported: wall time, and the child's CPU time (user + system, from ``getrusage``) so a figure
taken on a shared, loaded machine can be read for what it is. The page cache is warm after the first run
(the files are memory-mapped and only their headers, dynamic sections, symbol and version tables are read).
Then, in this process, where the time goes: reading the environment (RECORDs and every library's host-side
facts), the simulated process, the checks. Counts are printed with the times (libraries, bytes on disk,
imports resolved, files read): they bound the work independently of the machine.

Usage: python benchmarks/doctor_env.py [--site DIR] [--repeat N] [--json FILE]
"""

# ruff: noqa: E402  (the path fix below must run before the imports)
from __future__ import annotations

import os
import sys

# Run as a script, this directory is sys.path[0], and benchmarks/inspect.py would shadow the standard
# ``inspect``; the repository root is needed for tests.fixtures.
_HERE = os.path.dirname(os.path.abspath(__file__))
sys.path[:] = [p for p in sys.path if os.path.abspath(p or os.curdir) != _HERE]
sys.path.insert(0, os.path.dirname(_HERE))

import argparse
import json
import resource
import statistics
import subprocess
import time
from pathlib import Path
from typing import Any


def _child_run(site: Path) -> dict[str, float]:
    before = resource.getrusage(resource.RUSAGE_CHILDREN)
    start = time.perf_counter()
    done = subprocess.run(
        [sys.executable, "-m", "cudaship", "doctor", "--env", str(site), "--format", "json"],
        check=False,
        stdout=subprocess.DEVNULL,
        env={**os.environ, "CUDASHIP_LIBCUDA": "/nonexistent/libcuda.so"},
    )
    wall = time.perf_counter() - start
    after = resource.getrusage(resource.RUSAGE_CHILDREN)
    cpu = (after.ru_utime - before.ru_utime) + (after.ru_stime - before.ru_stime)
    return {"wall_s": wall, "cpu_s": cpu, "exit": float(done.returncode)}


def _phases(site: Path) -> dict[str, Any]:
    from cudaship.analysis.envload import simulate
    from cudaship.analysis.loader import DEFAULT_DIRS, LD_CACHE, LinuxLoader
    from cudaship.checks.environment import check_environment
    from cudaship.inspection.environment import SystemFiles, ld_cache_names, read_environment
    from cudaship.records.binary import Machine

    t0 = time.perf_counter()
    env = read_environment([str(site)])
    t1 = time.perf_counter()
    loader = LinuxLoader(
        cache=ld_cache_names(LD_CACHE, Machine.X86_64), default_dirs=DEFAULT_DIRS[Machine.X86_64]
    )
    files = SystemFiles(env)
    graph = simulate(env, loader, files.exists, files.host, system_checked=True)
    t2 = time.perf_counter()
    findings = check_environment(env, graph)
    t3 = time.perf_counter()
    size = sum(os.path.getsize(lib.path) for lib in env.libraries)
    return {
        "read_environment_s": t1 - t0,
        "simulate_s": t2 - t1,
        "checks_s": t3 - t2,
        "distributions": len(env.distributions),
        "libraries": len(env.libraries),
        "library_bytes": size,
        "imports_resolved": len(graph.edges),
        "files_read": len(graph.hosts),
        "findings": len(findings),
    }


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--site", type=Path, help="a site-packages to check (default: build the torch env)")
    parser.add_argument("--repeat", type=int, default=5)
    parser.add_argument("--json", type=Path)
    ns = parser.parse_args()
    site = ns.site
    if site is None:
        from tests.fixtures.envs import TORCH_CU12, build_env

        site = build_env("torch-2.8.0-cu12", TORCH_CU12)
    _child_run(site)  # warm the page cache
    runs = [_child_run(site) for _ in range(ns.repeat)]
    result: dict[str, Any] = {
        "site": str(site),
        "cpus": os.cpu_count(),
        "load_average": os.getloadavg(),
        "wall_s_median": statistics.median(r["wall_s"] for r in runs),
        "cpu_s_median": statistics.median(r["cpu_s"] for r in runs),
        "wall_s_min": min(r["wall_s"] for r in runs),
        "exit_codes": sorted({int(r["exit"]) for r in runs}),
        "phases": _phases(site),
    }
    p = result["phases"]
    print(f"environment: {site}")
    print(
        f"  {p['distributions']} distributions, {p['libraries']} native libraries, "
        f"{p['library_bytes'] / 1e9:.2f} GB; {p['imports_resolved']} imports resolved, "
        f"{p['files_read']} files read"
    )
    print(
        f"doctor --env (fresh process, median of {ns.repeat}): wall {result['wall_s_median']:.2f} s "
        f"(min {result['wall_s_min']:.2f} s), CPU {result['cpu_s_median']:.2f} s; exit {result['exit_codes']}"
    )
    print(
        f"in process: read environment {p['read_environment_s']:.2f} s, simulate {p['simulate_s']:.2f} s, "
        f"checks {p['checks_s']:.2f} s"
    )
    print(
        "machine: {} CPUs, load average {}".format(
            result["cpus"], ", ".join(f"{x:.1f}" for x in result["load_average"])
        )
    )
    if ns.json:
        ns.json.write_text(json.dumps(result, indent=2) + "\n")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
