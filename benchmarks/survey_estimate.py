"""The whole of PyPI's CUDA wheels on paper: how long `cudaship survey` would take on N workers, from the
index's own file sizes (PEP 691 JSON pages; no wheel is downloaded).

    python benchmarks/survey_estimate.py [PROJECT ... | --projects FILE] [--workers 1,16,64,256]
        [--per-wheel-s 0.011] [--per-mb-s 0.013] [--bandwidth-mbps 1000,10000] [--summary-json FILE]

For each project: its wheels (all versions, yanked ones left out) and their bytes, and those of its newest
version. The time of a survey of ``W`` wheels of ``B`` MB on ``N`` workers is the larger of the CPU time
``(W x per_wheel + B x per_mb) / N`` and the transfer time ``B / bandwidth``; it assumes every byte of a wheel
is fetched (CUDA wheels are almost all native libraries, and the member cache is not counted: an upper bound).
The defaults are measured (docs/performance.md, "survey"): ``per_wheel`` is one worker's time per wheel on
the generated index (small wheels), ``per_mb`` one worker's wall time per MB on real CUDA wheels read from
disk (bitsandbytes, xformers, cupy).

The project list (``benchmarks/data/survey_cuda_projects.txt``) says how it was chosen.
"""

# ruff: noqa: E402  (the path fix below must run before the imports)
from __future__ import annotations

import os
import sys

_HERE = os.path.dirname(os.path.abspath(__file__))
sys.path[:] = [p for p in sys.path if os.path.abspath(p or os.curdir) != _HERE]

import argparse
import json
import time
import urllib.request
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from typing import Any

from packaging.utils import InvalidWheelFilename, parse_wheel_filename

INDEX = "https://pypi.org/simple"
ACCEPT = "application/vnd.pypi.simple.v1+json"
PROJECTS = Path(__file__).parent / "data" / "survey_cuda_projects.txt"


def read_projects(path: Path) -> list[str]:
    names = [line.split("#", 1)[0].strip() for line in path.read_text().splitlines()]
    return [n for n in names if n]


def project_sizes(name: str, index: str = INDEX) -> dict[str, Any]:
    """The wheels of ``name`` on the index: count and bytes, all versions and the newest."""
    req = urllib.request.Request(
        f"{index}/{name}/", headers={"Accept": ACCEPT, "User-Agent": "cudaship-bench"}
    )
    try:
        with urllib.request.urlopen(req, timeout=60) as r:
            page = json.loads(r.read())
    except OSError as e:
        return {"project": name, "error": str(e)}
    wheels = []
    for f in page.get("files", []):
        filename = f.get("filename", "")
        if not filename.endswith(".whl") or f.get("yanked"):
            continue
        try:
            _, version, _, _ = parse_wheel_filename(filename)
        except InvalidWheelFilename:
            continue
        wheels.append((version, int(f.get("size") or 0), f.get("upload-time")))
    if not wheels:
        return {
            "project": name,
            "wheels": 0,
            "bytes": 0,
            "newest": None,
            "newest_wheels": 0,
            "newest_bytes": 0,
        }
    releases = [v for v, _, _ in wheels if not v.is_prerelease] or [v for v, _, _ in wheels]
    newest = max(releases)  # the newest release; a pre-release only where there is nothing else
    return {
        "project": name,
        "wheels": len(wheels),
        "bytes": sum(s for _, s, _ in wheels),
        "newest": str(newest),
        "newest_wheels": sum(1 for v, _, _ in wheels if v == newest),
        "newest_bytes": sum(s for v, s, _ in wheels if v == newest),
        "first_upload": min((t for _, _, t in wheels if t), default=None),
    }


def hours(
    wheels: int, mb: float, workers: int, per_wheel: float, per_mb: float, bandwidth_mbps: float
) -> float:
    cpu = (wheels * per_wheel + mb * per_mb) / workers
    transfer = mb / (bandwidth_mbps / 8)
    return max(cpu, transfer) / 3600


def _duration(h: float) -> str:
    return f"{h:,.1f} h" if h >= 1 else f"{h * 60:.0f} min"


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("projects", nargs="*")
    p.add_argument("--projects-file", type=Path, default=PROJECTS)
    p.add_argument("--index", default=INDEX)
    p.add_argument("--workers", default="1,16,64,256")
    p.add_argument("--per-wheel-s", type=float, default=0.011)
    p.add_argument("--per-mb-s", type=float, default=0.013)
    p.add_argument("--bandwidth-mbps", default="1000,10000", help="the network, in Mbit/s (a list)")
    p.add_argument("--summary-json", type=Path, help="write the per-project sizes here")
    p.add_argument("--from-json", type=Path, help="read the per-project sizes from here (no network)")
    a = p.parse_args(argv)
    if a.from_json:
        sizes = json.loads(a.from_json.read_text())["projects"]
    else:
        names = a.projects or read_projects(a.projects_file)
        with ThreadPoolExecutor(8) as ex:
            sizes = list(ex.map(lambda n: project_sizes(n, a.index.rstrip("/")), names))
        if a.summary_json:
            stamp = time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime())
            a.summary_json.write_text(
                json.dumps({"fetched": stamp, "index": a.index, "projects": sizes}, indent=1)
            )
    ok = [s for s in sizes if "error" not in s]
    for s in sizes:
        if "error" in s:
            print(f"left out {s['project']}: {s['error']}", file=sys.stderr)
    workers = [int(w) for w in a.workers.split(",")]
    print("| project | wheels | GB | newest | its wheels | its GB |")
    print("|---|---:|---:|---|---:|---:|")
    for s in sorted(ok, key=lambda s: -s["bytes"]):
        print(
            f"| {s['project']} | {s['wheels']:,} | {s['bytes'] / 1e9:,.1f} | {s['newest'] or '-'} | "
            f"{s['newest_wheels']:,} | {s['newest_bytes'] / 1e9:,.2f} |"
        )
    print()
    head = " | ".join(f"{w} workers" for w in workers)
    print(f"| what | network | wheels | GB | {head} |")
    print("|---|---|---:|---:|" + "---:|" * len(workers))
    groups = (("every version", "wheels", "bytes"), ("newest versions", "newest_wheels", "newest_bytes"))
    for label, wk, bk in groups:
        n = sum(s[wk] for s in ok)
        mb = sum(s[bk] for s in ok) / 1e6
        for bandwidth in (float(b) for b in a.bandwidth_mbps.split(",")):
            cells = " | ".join(
                _duration(hours(n, mb, w, a.per_wheel_s, a.per_mb_s, bandwidth)) for w in workers
            )
            net = f"{bandwidth / 1000:g} Gbit/s"
            print(f"| {label} ({len(ok)} projects) | {net} | {n:,} | {mb / 1e3:,.0f} | {cells} |")
    print(
        f"\ncosts: {a.per_wheel_s} s a wheel + {a.per_mb_s} s a MB on one worker (the time is the larger of "
        "the CPU time / N and the transfer time)"
    )
    return 0


if __name__ == "__main__":
    sys.exit(main())
