#!/usr/bin/env python3
"""Benchmark: the wall time of ``cudaship audit --load`` on real wheels from the tests' cache, installed
offline (``--offline --find-links`` the cache's wheel directory), for one or more source trees, interleaved
(one run of each tree per round, so the machine's load falls on both alike); the median of ``--repeat``
rounds per wheel.

Usage: python benchmarks/load_cost.py [--src DIR]... [--wheel W]... [--repeat N]
``--src`` default: this tree's ``src``; an earlier one: ``git archive REV src | tar -x -C /tmp/base``.
"""

from __future__ import annotations

import argparse
import json
import os
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


def one(src: str, wheel: Path) -> tuple[float, int, str]:
    env = dict(os.environ, PYTHONPATH=src)
    command = [sys.executable, "-m", "cudaship", "audit", "--load", "--offline", "--find-links", str(CACHE)]
    command += [str(wheel), "-f", "json"]
    started = time.perf_counter()
    done = subprocess.run(command, env=env, capture_output=True, text=True, check=False)
    wall = time.perf_counter() - started
    try:
        load = json.loads(done.stdout)["wheels"][0].get("load") or {}
        what = f"{len(load.get('probes') or ())} children"
    except (ValueError, KeyError, IndexError):
        what = done.stderr.strip()[-200:]
    return wall, done.returncode, what


def main() -> int:
    ap = argparse.ArgumentParser()
    ap.add_argument("--src", action="append", default=[])
    ap.add_argument("--wheel", action="append", default=[])
    ap.add_argument("--repeat", type=int, default=3)
    args = ap.parse_args()
    srcs = args.src or [str(HERE / "src")]
    wheels = [Path(w) for w in args.wheel] or [CACHE / w for w in WHEELS]
    walls: dict[tuple[str, str], list[float]] = {}
    for _ in range(args.repeat):
        for wheel in wheels:
            for src in srcs:
                wall, code, what = one(src, wheel)
                walls.setdefault((src, wheel.name), []).append(wall)
                print(f"{src} {wheel.name}: {wall:.2f} s (exit {code}, {what})", flush=True)
    print(f"load average {os.getloadavg()}")
    for (src, name), values in walls.items():
        each = ", ".join(f"{v:.2f}" for v in values)
        print(f"median {statistics.median(values):.2f} s  {src}  {name}  ({each})")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
