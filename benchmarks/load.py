#!/usr/bin/env python3
"""Benchmark: ``cudaship audit --load`` and what it costs the static audit.

1. Listing what a child mapped, three ways, in a child that imported a large package (``--import``, default
   torch, from ``--python``): ``dl_iterate_phdr`` through ctypes and ``/proc/self/maps`` (the time the child
   spent listing, median of ``--repeat`` children, and the objects each found), and ``LD_DEBUG=files`` (the
   extra wall time of the whole import with it set, and the bytes it wrote).
2. ``audit --load`` of one wheel (``--wheel``, default the cached nvidia-cuda-nvrtc-cu12 12.8.93, 88 MB)
   installed offline from ``--find-links`` (the wheels already on disk: a warm cache), ``--repeat`` runs, wall
   time median; counts printed with it (children started, libraries, imports compared).
3. The static audit of the same wheels with this tree and with ``--base`` (a directory holding an earlier
   ``src/``, e.g. ``git archive 2fe8480 src | tar -x -C /tmp/base``), each in a fresh process, interleaved,
   median of ``--repeat`` of wall and CPU time (user + system of the child: the machine may be shared): the
   static audit's cost of recording every import's verdict.

Usage: python benchmarks/load.py [--python PY] [--wheel W]... [--find-links DIR] [--base DIR] [--repeat N]
"""

# ruff: noqa: E402  (the path fix below must run before the imports)
from __future__ import annotations

import os
import sys

_HERE = os.path.dirname(os.path.abspath(__file__))
sys.path[:] = [p for p in sys.path if os.path.abspath(p or os.curdir) != _HERE]
sys.path.insert(0, os.path.join(os.path.dirname(_HERE), "src"))

import argparse
import json
import resource
import statistics
import subprocess
import time
from pathlib import Path
from typing import Any

CACHE = Path(os.environ.get("CUDASHIP_TEST_CACHE", Path.home() / ".cache" / "cudaship-tests")) / "wheels"
DEFAULT_WHEEL = (
    CACHE / "nvidia_cuda_nvrtc_cu12-12.8.93-py3-none-manylinux2010_x86_64.manylinux_2_12_x86_64.whl"
)
REPO = Path(_HERE).parent


def default_wheel() -> Path:
    """The nvidia-cuda-nvrtc-cu12 12.8.93 wheel in the tests' cache, downloaded there when missing (the suite
    itself only unpacks it into an environment and does not keep it)."""
    if DEFAULT_WHEEL.is_file():
        return DEFAULT_WHEEL
    sys.path.insert(0, str(REPO))
    from tests.fixtures.wheels import RealWheel, fetch

    return fetch(RealWheel("nvidia-cuda-nvrtc-cu12", "12.8.93", "manylinux_2_12_x86_64"))


def listing(python: str, module: str, repeat: int) -> dict[str, Any]:
    from cudaship.oracle.observe import observe
    from cudaship.oracle.records import Probe

    out: dict[str, Any] = {}
    for method in ("phdr", "maps"):
        obs = observe(python, [Probe.import_(module)] * repeat, method=method, jobs=1, stub=False)
        assert all(r.ok for r in obs.results), [r.message for r in obs.results]
        out[method] = {
            "listing_us_median": statistics.median(r.listing_us or 0 for r in obs.results),
            "objects": len(obs.results[0].objects),
            "paths": sorted(obs.results[0].loaded),
        }
    phdr, maps = set(out["phdr"].pop("paths")), set(out["maps"].pop("paths"))
    out["only_phdr"] = sorted(phdr - maps)[:5]
    out["only_maps"] = sorted(maps - phdr)[:5]
    out["only_maps_count"] = len(maps - phdr)
    walls: dict[str, list[float]] = {"plain": [], "ld_debug": []}
    size = 0
    for _ in range(repeat):
        for key in walls:
            env = dict(os.environ)
            if key == "ld_debug":
                env["LD_DEBUG"] = "files"
            started = time.perf_counter()
            done = subprocess.run(
                [python, "-c", f"import {module}"], env=env, capture_output=True, check=True
            )
            walls[key].append(time.perf_counter() - started)
            if key == "ld_debug":
                size = len(done.stderr)
    out["import_wall_s"] = {k: round(statistics.median(v), 3) for k, v in walls.items()}
    out["ld_debug_bytes"] = size
    return out


def audit_load(wheel: Path, find_links: str, repeat: int) -> dict[str, Any]:
    walls: list[float] = []
    data: dict[str, Any] = {}
    for _ in range(repeat):
        started = time.perf_counter()
        done = subprocess.run(
            [
                *(sys.executable, "-m", "cudaship", "audit", "--no-progress", "-f", "json", "--load"),
                *("--offline", "--find-links", find_links, str(wheel)),
            ],
            env={**os.environ, "PYTHONPATH": str(REPO / "src")},
            capture_output=True,
            text=True,
            check=False,
        )
        walls.append(time.perf_counter() - started)
        data = json.loads(done.stdout)
    load = data["wheels"][0]["load"]
    return {
        "wheel": wheel.name,
        "size_mb": round(wheel.stat().st_size / 1e6, 1),
        "wall_s_median": round(statistics.median(walls), 2),
        "walls": [round(w, 2) for w in walls],
        "children": len(load["probes"]),
        "line": load["line"],
    }


def static(wheels: list[Path], base: str | None, repeat: int) -> dict[str, Any]:
    trees = {"this": str(REPO / "src")}
    if base:
        trees["base"] = str(Path(base) / "src")
    out: dict[str, Any] = {}
    for wheel in wheels:
        times: dict[str, list[float]] = {k: [] for k in trees}
        cpu: dict[str, list[float]] = {k: [] for k in trees}
        for _ in range(repeat):
            for name, src in trees.items():
                before = resource.getrusage(resource.RUSAGE_CHILDREN)
                started = time.perf_counter()
                subprocess.run(
                    [
                        *(sys.executable, "-m", "cudaship", "audit", "--no-progress", "-f", "json"),
                        *("--offline", str(wheel)),
                    ],
                    env={**os.environ, "PYTHONPATH": src, "CUDASHIP_OFFLINE": "1"},
                    capture_output=True,
                    check=False,
                )
                times[name].append(time.perf_counter() - started)
                after = resource.getrusage(resource.RUSAGE_CHILDREN)
                cpu[name].append(after.ru_utime + after.ru_stime - before.ru_utime - before.ru_stime)
        out[wheel.name] = {
            "wall_s": {k: round(statistics.median(v), 3) for k, v in times.items()},
            "cpu_s": {k: round(statistics.median(v), 3) for k, v in cpu.items()},
        }
    return out


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--python", default=sys.executable)
    parser.add_argument("--import", dest="module", default="torch")
    parser.add_argument("--wheel", action="append", type=Path)
    parser.add_argument("--find-links", default=str(CACHE))
    parser.add_argument("--base", default=None)
    parser.add_argument("--repeat", type=int, default=5)
    parser.add_argument("--skip", action="append", default=[], choices=["listing", "load", "static"])
    args = parser.parse_args()
    wheels = args.wheel or [default_wheel()]
    result: dict[str, Any] = {}
    if "listing" not in args.skip:
        result["listing"] = listing(args.python, args.module, args.repeat)
        print(json.dumps({"listing": result["listing"]}, indent=1), flush=True)
    if "load" not in args.skip:
        result["load"] = [audit_load(w, args.find_links, args.repeat) for w in wheels]
        print(json.dumps({"load": result["load"]}, indent=1), flush=True)
    if "static" not in args.skip:
        result["static"] = static(wheels, args.base, args.repeat)
        print(json.dumps({"static": result["static"]}, indent=1), flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
