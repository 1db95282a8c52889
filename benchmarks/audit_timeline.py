#!/usr/bin/env python3
"""One real ``cudaship audit`` run with its timeline: when each phase of the command began and ended, counted
from the moment the kernel started the process (so the interpreter's start and the imports are in it).

Unlike ``audit_phases.py``, which times each phase alone, this runs the command itself once (``main()`` of
the CLI, the same code path as the console script, with the same arguments) and stamps its phases as they
happen, so what overlaps shows as overlapping and the gaps between phases show as gaps.

``--process-budget MIB`` before ``--`` sets the worker processes' memory budget for large members (what
``archive.pool.PROCESS_MEMORY_BUDGET`` holds), to see what a member kept off the disk is worth.

Usage: python benchmarks/audit_timeline.py [--process-budget MIB] -- AUDIT-ARGS...   e.g.
       python benchmarks/audit_timeline.py -- --offline -j 16 --no-progress --format json -o /tmp/a.json W.whl
"""

from __future__ import annotations

import os
import sys

_HERE = os.path.dirname(os.path.abspath(__file__))
sys.path[:] = [p for p in sys.path if os.path.abspath(p or os.curdir) != _HERE]

import time  # noqa: E402


def _process_start() -> float:
    """The process's start on the ``time.time()`` clock (from /proc: clock ticks since boot)."""
    with open("/proc/self/stat", encoding="ascii") as f:
        fields = f.read().rsplit(")", 1)[1].split()
    ticks = os.sysconf("SC_CLK_TCK")
    with open("/proc/uptime", encoding="ascii") as f:
        uptime = float(f.read().split()[0])
    return time.time() - uptime + int(fields[19]) / ticks


EVENTS: list[tuple[float, str]] = []


def stamp(what: str) -> None:
    EVENTS.append((time.time(), what))


def wrap(owner: object, name: str, label: str) -> None:
    fn = getattr(owner, name)

    def wrapped(*args: object, **kwargs: object) -> object:
        stamp(f"{label} begins")
        try:
            return fn(*args, **kwargs)
        finally:
            stamp(f"{label} ends")

    setattr(owner, name, wrapped)


def main() -> int:
    started = _process_start()
    stamp("interpreter running the script")
    argv = sys.argv[1:]
    budget = None
    if argv[:1] == ["--process-budget"]:
        budget, argv = int(argv[1]) << 20, argv[2:]
    if argv[:1] == ["--"]:
        argv = argv[1:]
    from cudaship.cli import main as cli

    stamp("CLI imported")
    from cudaship.archive import pool
    from cudaship.checks import context, engine
    from cudaship.cli import audit_cmd
    from cudaship.inspection import scan

    stamp("audit modules imported")
    if budget is not None:
        pool.PROCESS_MEMORY_BUDGET = budget
    wrap(engine, "scan", "scan (central directory to last member)")
    wrap(scan, "read_dist_info", "dist-info")
    wrap(scan, "_run", "members on the workers")
    wrap(engine, "audit_scanned", "checks")
    wrap(context, "wheel_providers", "providers (requirements' closure)")
    wrap(pool.Workers, "close", "workers shut down")
    wrap(audit_cmd, "render", "render")
    wrap(audit_cmd, "write_report", "write")
    code = cli.main(["audit", *argv])
    stamp(f"main returned {code}")
    for t, what in EVENTS:
        print(f"{t - started:8.3f} s  {what}")
    return 0


if __name__ == "__main__":
    sys.stdout.flush()
    rc = main()
    sys.stdout.flush()
    os._exit(rc)  # as the console script does: no teardown of what the run built
