#!/usr/bin/env python3
"""Where a large inflated member should go on a worker process: a temporary file (as round 2 did), a temporary
file allocated at once (``posix_fallocate``), or anonymous memory. Each way writes ``--mib`` MiB in 1 MiB
chunks (as the inflater hands them over), maps the result and touches every page (as the readers do), in a
fresh process per measurement, interleaved, ``--repeat`` rounds. Prints wall and system time per way.

Usage: python benchmarks/spill.py [--mib 480] [--repeat 4] [--dir DIR]
"""

from __future__ import annotations

import argparse
import json
import mmap
import os
import resource
import statistics
import subprocess
import sys
import tempfile
import time

WAYS = ("temporary file", "temporary file, fallocate", "anonymous memory")


def one(way: str, mib: int, directory: str | None) -> dict[str, float]:
    chunk = os.urandom(1 << 20)
    size = mib << 20
    before = resource.getrusage(resource.RUSAGE_SELF)
    start = time.perf_counter()
    if way == "anonymous memory":
        memory = mmap.mmap(-1, size, flags=mmap.MAP_PRIVATE | mmap.MAP_ANONYMOUS | mmap.MAP_POPULATE)
        for i in range(mib):
            memory[i << 20 : (i + 1) << 20] = chunk
        view: mmap.mmap = memory
        file = None
    else:
        file = tempfile.TemporaryFile(dir=directory)  # noqa: SIM115 - closed below
        if way.endswith("fallocate"):
            os.posix_fallocate(file.fileno(), 0, size)
        for _ in range(mib):
            os.write(file.fileno(), chunk)
        view = mmap.mmap(file.fileno(), 0, access=mmap.ACCESS_READ)
    touched = sum(view[i] for i in range(0, size, mmap.PAGESIZE))
    view.close()
    if file is not None:
        file.close()
    wall = time.perf_counter() - start
    after = resource.getrusage(resource.RUSAGE_SELF)
    return {"wall_s": wall, "sys_s": after.ru_stime - before.ru_stime, "touched": touched}


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--mib", type=int, default=480)
    parser.add_argument("--repeat", type=int, default=4)
    parser.add_argument("--dir", default=None, help="temporary directory (default: $TMPDIR or /tmp)")
    parser.add_argument("--one", help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.one:
        print(json.dumps(one(args.one, args.mib, args.dir)))
        return 0
    runs: dict[str, list[dict[str, float]]] = {way: [] for way in WAYS}
    for _ in range(args.repeat):
        for way in WAYS:
            command = [sys.executable, __file__, "--one", way, "--mib", str(args.mib)]
            if args.dir:
                command += ["--dir", args.dir]
            done = subprocess.run(command, capture_output=True, text=True, check=True)
            runs[way].append(json.loads(done.stdout))
    print(f"{args.mib} MiB in 1 MiB chunks, mapped, every page touched; load {os.getloadavg()[0]:.2f}")
    for way, results in runs.items():
        walls = " ".join(f"{r['wall_s']:.3f}" for r in results)
        print(
            f"{way:28} wall {statistics.median(r['wall_s'] for r in results):.3f} s (runs {walls}), "
            f"system {statistics.median(r['sys_s'] for r in results):.3f} s"
        )
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
