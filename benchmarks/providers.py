#!/usr/bin/env python3
"""Benchmark: dependency resolution (providers) for an audit of torch 2.14.1's CUDA 13 Linux wheel.

What the audit adds when it resolves the wheel's declared requirements against the package index: the
closure of ``cuda-toolkit[...]==13.0.3``, ``nvidia-cudnn-cu13``, ``nvidia-nccl-cu13``, ... and their own
requirements, each project's PEP 691 page, and each chosen wheel's central directory and METADATA by HTTP
range requests (or PEP 658 metadata where the index offers it).

- cold: an empty cache directory (every page and every wheel's directory fetched);
- warm: the same cache again (project pages younger than a day and wheel listings are not fetched again);
- offline: ``--offline`` with the warm cache.

Each is run ``--repeat`` times in this process (median reported) with its own cache state; requests and bytes
come from the client's counters. ``--audit`` also times the whole ``cudaship audit`` of the wheel without the
index (``--index-url ''``) and with the warm index, in fresh processes.

Usage: python benchmarks/providers.py [--wheel PATH] [--repeat N] [--audit] [--json FILE]
"""

# ruff: noqa: E402  (the path fix below must run before the imports)
from __future__ import annotations

import os
import sys

_HERE = os.path.dirname(os.path.abspath(__file__))
sys.path[:] = [p for p in sys.path if os.path.abspath(p or os.curdir) != _HERE]

import argparse
import json
import shutil
import statistics
import subprocess
import tempfile
import time
import zipfile
from pathlib import Path
from typing import Any

from cudaship.providers.closure import wheel_extras
from cudaship.providers.index import DEFAULT_INDEX
from cudaship.providers.options import ProviderOptions, closure_for
from cudaship.providers.records import Target
from cudaship.wheel.metadata import parse_metadata

DEFAULT_WHEEL = (
    Path.home() / ".cache/cudaship-tests/wheels/torch-2.14.1-cp311-cp311-manylinux_2_28_x86_64.whl"
)


def _requirements(wheel: Path) -> tuple[str, tuple[str, ...]]:
    with zipfile.ZipFile(wheel) as zf:
        meta = next(n for n in zf.namelist() if n.endswith(".dist-info/METADATA"))
        metadata = parse_metadata(zf.read(meta), strict=False)
    return metadata.name, metadata.requires_dist


def _resolve(requires: tuple[str, ...], name: str, options: ProviderOptions) -> dict[str, Any]:
    start = time.perf_counter()
    closure, fetched = closure_for(
        requires,
        Target("linux", "x86_64", "3.11"),
        options,
        extras=wheel_extras(requires),
        own_name=name,
    )
    return {
        "seconds": time.perf_counter() - start,
        "distributions": len(closure.reached),
        "requests": fetched.requests,
        "bytes": fetched.bytes,
        "page_bytes": fetched.page_bytes,
        "wheel_bytes": fetched.bytes - fetched.page_bytes,
        "cache_hits": fetched.cache_hits,
        "unresolved": [u.requirement for u in closure.unresolved],
    }


def _median(runs: list[dict[str, Any]]) -> dict[str, Any]:
    out = dict(runs[-1])
    out["seconds"] = statistics.median(r["seconds"] for r in runs)
    return out


def _audit_seconds(wheel: Path, args: list[str]) -> float:
    start = time.perf_counter()
    subprocess.run(
        [sys.executable, "-m", "cudaship", "audit", "--no-progress", "--format", "json", *args, str(wheel)],
        check=False,
        stdout=subprocess.DEVNULL,
    )
    return time.perf_counter() - start


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--wheel", type=Path, default=DEFAULT_WHEEL)
    parser.add_argument("--index-url", default=DEFAULT_INDEX)
    parser.add_argument("--repeat", type=int, default=3)
    parser.add_argument(
        "--audit", action="store_true", help="also time whole audits without and with the index"
    )
    parser.add_argument("--json", type=Path)
    ns = parser.parse_args()
    name, requires = _requirements(ns.wheel)
    results: dict[str, Any] = {"wheel": ns.wheel.name, "requirements": len(requires)}
    cold_runs, warm_runs, offline_runs = [], [], []
    for _ in range(ns.repeat):
        cache = Path(tempfile.mkdtemp(prefix="cudaship-bench-cache-"))
        try:
            opts = ProviderOptions(index_url=ns.index_url, cache_dir=cache)
            cold_runs.append(_resolve(requires, name, opts))
            warm_runs.append(_resolve(requires, name, opts))
            offline_runs.append(
                _resolve(
                    requires, name, ProviderOptions(index_url=ns.index_url, cache_dir=cache, offline=True)
                )
            )
        finally:
            shutil.rmtree(cache, ignore_errors=True)
    results["cold"] = _median(cold_runs)
    results["warm"] = _median(warm_runs)
    results["offline"] = _median(offline_runs)
    if ns.audit:
        cache = Path(tempfile.mkdtemp(prefix="cudaship-bench-cache-"))
        try:
            _audit_seconds(ns.wheel, ["--cache-dir", str(cache)])  # fill the cache
            without = [_audit_seconds(ns.wheel, ["--index-url", ""]) for _ in range(ns.repeat)]
            warm = [_audit_seconds(ns.wheel, ["--cache-dir", str(cache)]) for _ in range(ns.repeat)]
        finally:
            shutil.rmtree(cache, ignore_errors=True)
        results["audit_without_index_s"] = statistics.median(without)
        results["audit_warm_index_s"] = statistics.median(warm)
    print(f"{results['wheel']}: {results['requirements']} Requires-Dist entries")
    header = ("run", "seconds", "dists", "requests", "KiB", "page KiB", "wheel KiB", "cache")
    print(f"{header[0]:8} " + " ".join(f"{h:>9}" for h in header[1:]))
    for key in ("cold", "warm", "offline"):
        r = results[key]
        print(
            f"{key:8} {r['seconds']:9.2f} {r['distributions']:9} {r['requests']:9} {r['bytes'] / 1024:9.0f} "
            f"{r['page_bytes'] / 1024:9.0f} {r['wheel_bytes'] / 1024:9.0f} {r['cache_hits']:9}"
        )
    if ns.audit:
        print(
            f"audit without the index: {results['audit_without_index_s']:.2f} s; "
            f"with the warm index: {results['audit_warm_index_s']:.2f} s"
        )
    if ns.json:
        ns.json.write_text(json.dumps(results, indent=2) + "\n")
    return 0


if __name__ == "__main__":
    sys.exit(main())
