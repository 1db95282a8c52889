#!/usr/bin/env python3
"""Benchmark: the wall time and CPU time of ``cudaship audit --load`` on real wheels from the tests' cache,
installed offline (``--offline --find-links`` the cache's wheel directory), for one or more source trees,
interleaved (one run of each tree per round, so the machine's load falls on both alike); the median of
``--repeat`` rounds per wheel, and with two trees the ratio of the second to the first (after / before).

CPU time is the user + system time of the command and every descendant it waited for (``RUSAGE_CHILDREN``
around each run): on a shared, loaded machine it moves far less than the wall time.

Usage: python benchmarks/load_cost.py [--src DIR]... [--wheel W]... [--repeat N]
``--src`` default: this tree's ``src``; an earlier one: ``git worktree add --detach /tmp/before REV`` (or
``git archive REV src | tar -x -C /tmp/base``).
"""

from __future__ import annotations

import argparse
import json
import os
import resource
import statistics
import subprocess
import sys
import time
from pathlib import Path

CACHE = Path(os.environ.get("CUDASHIP_TEST_CACHE", Path.home() / ".cache" / "cudaship-tests")) / "wheels"
WHEELS = (
    "nvidia_cuda_runtime-13.5.37-py3-none-manylinux2014_x86_64.manylinux_2_17_x86_64.whl",
    "nvidia_cuda_runtime_cu12-12.8.90-py3-none-manylinux2014_x86_64.manylinux_2_17_x86_64.whl",
    "nvidia_nccl_cu12-2.27.3-py3-none-manylinux2014_x86_64.manylinux_2_17_x86_64.whl",
)
HERE = Path(__file__).resolve().parent.parent


def _cpu() -> float:
    used = resource.getrusage(resource.RUSAGE_CHILDREN)
    return used.ru_utime + used.ru_stime


def one(src: str, wheel: Path) -> tuple[float, float, int, str]:
    env = dict(os.environ, PYTHONPATH=src)
    command = [sys.executable, "-m", "cudaship", "audit", "--load", "--offline", "--find-links", str(CACHE)]
    command += [str(wheel), "-f", "json"]
    cpu = _cpu()
    started = time.perf_counter()
    done = subprocess.run(command, env=env, capture_output=True, text=True, check=False)
    wall = time.perf_counter() - started
    cpu = _cpu() - cpu
    try:
        load = json.loads(done.stdout)["wheels"][0].get("load") or {}
        what = f"{len(load.get('probes') or ())} children"
    except (ValueError, KeyError, IndexError):
        what = done.stderr.strip()[-200:]
    return wall, cpu, done.returncode, what


def main() -> int:
    ap = argparse.ArgumentParser()
    ap.add_argument("--src", action="append", default=[])
    ap.add_argument("--wheel", action="append", default=[])
    ap.add_argument("--repeat", type=int, default=3)
    args = ap.parse_args()
    srcs = args.src or [str(HERE / "src")]
    wheels = [Path(w) for w in args.wheel] or [CACHE / w for w in WHEELS]
    walls: dict[tuple[str, str], list[float]] = {}
    cpus: dict[tuple[str, str], list[float]] = {}
    print(f"load average {os.getloadavg()}", flush=True)
    for _ in range(args.repeat):
        for wheel in wheels:
            for src in srcs:
                wall, cpu, code, what = one(src, wheel)
                walls.setdefault((src, wheel.name), []).append(wall)
                cpus.setdefault((src, wheel.name), []).append(cpu)
                print(
                    f"{src} {wheel.name}: {wall:.2f} s wall, {cpu:.2f} s CPU (exit {code}, {what})",
                    flush=True,
                )
    print(f"load average {os.getloadavg()}")
    for (src, name), values in walls.items():
        each = ", ".join(f"{v:.2f}" for v in values)
        cpu_each = ", ".join(f"{v:.2f}" for v in cpus[src, name])
        cpu = statistics.median(cpus[src, name])
        wall = statistics.median(values)
        print(f"median {wall:.2f} s wall ({each}), {cpu:.2f} s CPU ({cpu_each})  {src}  {name}")
    if len(srcs) == 2:
        before, after = srcs
        print("\n| wheel | wall s before | wall s after | wall a/b | CPU s before | CPU s after | CPU a/b |")
        print("|---|---:|---:|---:|---:|---:|---:|")
        ratios: list[tuple[float, float]] = []
        for wheel in wheels:
            wb, wa = (statistics.median(walls[s, wheel.name]) for s in (before, after))
            cb, ca = (statistics.median(cpus[s, wheel.name]) for s in (before, after))
            ratios.append((wa / wb, ca / cb))
            cells = f"{wb:.2f} | {wa:.2f} | {wa / wb:.2f} | {cb:.2f} | {ca:.2f} | {ca / cb:.2f}"
            print(f"| {wheel.name} | {cells} |")
        print(
            f"median ratio after/before: wall {statistics.median(r[0] for r in ratios):.2f}, "
            f"CPU {statistics.median(r[1] for r in ratios):.2f}"
        )
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
