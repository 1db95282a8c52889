#!/usr/bin/env python3
"""Where the wall time of ``cudaship audit WHEEL`` goes: each phase timed alone, in one process, so the
critical path on many cores can be read off (docs/performance.md, round 3).

Phases: the interpreter and the CLI's imports (a fresh ``python -X importtime``-free run of
``import cudaship.cli.audit_cmd``), the central directory, the dist-info, the worker processes' start (fork
server and ``-j`` workers answering a no-op), the largest member's task as a worker runs it (inflate, hash,
spill, read), its inflation alone, the whole scan on the workers, and the checks and the JSON on the scanned
wheel.

Usage: python benchmarks/audit_phases.py WHEEL [-j N] [--repeat N]
"""

from __future__ import annotations

import os
import sys

# Run as a script, this directory is sys.path[0]: benchmarks/inspect.py would shadow the standard ``inspect``.
_HERE = os.path.dirname(os.path.abspath(__file__))
sys.path[:] = [p for p in sys.path if os.path.abspath(p or os.curdir) != _HERE]

import argparse  # noqa: E402
import statistics  # noqa: E402
import subprocess  # noqa: E402
import time  # noqa: E402
from collections.abc import Callable  # noqa: E402
from pathlib import Path  # noqa: E402
from typing import Any  # noqa: E402


def timed(fn: Callable[[], Any]) -> tuple[float, Any]:
    start = time.perf_counter()
    value = fn()
    return time.perf_counter() - start, value


def _noop() -> int:
    return os.getpid()


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("wheel", type=Path)
    parser.add_argument("-j", "--jobs", type=int, default=os.cpu_count() or 1)
    parser.add_argument("--repeat", type=int, default=3)
    args = parser.parse_args()

    from cudaship.archive.inflate import member_chunks
    from cudaship.archive.pool import ArchiveRef, Workers, batches, read_batch
    from cudaship.archive.zip import ZipFile
    from cudaship.checks.engine import audit_scanned
    from cudaship.checks.records import AuditReport
    from cudaship.checks.table import load_policy
    from cudaship.config import load_config
    from cudaship.inspection.scan import _scan_member
    from cudaship.inspection.scan import scan as scan_wheel
    from cudaship.providers.options import ProviderOptions
    from cudaship.render import audit_json
    from cudaship.render.style import Style

    rows: dict[str, list[float]] = {}

    def add(name: str, seconds: float) -> None:
        rows.setdefault(name, []).append(seconds)

    policy = load_policy(load_config(None))
    offline = ProviderOptions(offline=True)

    def one_round() -> None:
        start = time.perf_counter()
        subprocess.run([sys.executable, "-c", "import cudaship.cli.audit_cmd"], check=True)
        add("interpreter + CLI imports (fresh process)", time.perf_counter() - start)

        directory = time.perf_counter()
        opened = ZipFile(args.wheel)
        archive = opened.archive
        members = archive.files()
        largest = max(members, key=lambda m: m.compressed_size)
        add("central directory (open, parse, local headers)", time.perf_counter() - directory)
        ref = ArchiveRef.of(args.wheel, opened.fileno())

        def inflate() -> int:
            raw = memoryview(archive.buf)[largest.data_offset : largest.data_offset + largest.compressed_size]
            n = sum(len(c) for c in member_chunks(largest.method, raw, 1 << 20, None))
            raw.release()
            return n

        add(f"inflate {largest.name} alone", timed(inflate)[0])
        add(
            f"worker task for {largest.name} (inflate, hash, spill, read)",
            timed(lambda: read_batch(_scan_member, ref, [largest], [(str(args.wheel), "sha256", True)]))[0],
        )
        opened.close()

        with Workers(args.jobs, processes=True) as pool:
            add(
                f"whole scan, {args.jobs} workers started cold",
                timed(lambda: scan_wheel(args.wheel, pool=pool))[0],
            )
        with Workers(args.jobs, processes=True) as pool:

            def start_workers() -> None:
                executor = pool.processes()
                for future in [executor.submit(_noop) for _ in range(args.jobs)]:
                    future.result()

            add(f"start {args.jobs} worker processes (fork server, no-op each)", timed(start_workers)[0])
            seconds, scanned = timed(lambda: scan_wheel(args.wheel, pool=pool))
            add(f"scan on {args.jobs} warm worker processes", seconds)
            timeline(pool)
        seconds, report = timed(lambda: audit_scanned(scanned, policy, offline))
        add("checks (offline providers)", seconds)
        whole = AuditReport(wheels=(report,), policy_source=policy.source, policy_default=policy.is_default)
        add("JSON rendering", timed(lambda: audit_json.render(whole, Style()))[0])

    def timeline(pool: Workers) -> None:
        """The scan's tasks as the scan hands them out, with when each finished (the last round's shown)."""
        from concurrent.futures import as_completed

        opened = ZipFile(args.wheel)
        ref = ArchiveRef.of(args.wheel, opened.fileno())
        order = sorted(opened.archive.files(), key=lambda m: m.compressed_size, reverse=True)
        executor = pool.processes()
        start = time.perf_counter()
        futures = {
            executor.submit(
                read_batch, _scan_member, ref, batch, [(str(args.wheel), "sha256", True)] * len(batch)
            ): batch
            for batch in batches(order)
        }
        finished.clear()
        for future in as_completed(futures):
            batch = futures[future]
            future.result()
            label = batch[0].name if len(batch) == 1 else f"{len(batch)} members from {batch[0].name}"
            finished.append(f"  {time.perf_counter() - start:6.3f} s  {label}")
        opened.close()

    finished: list[str] = []
    for _ in range(args.repeat):
        one_round()

    width = max(map(len, rows))
    print(f"wheel {args.wheel.name}, -j {args.jobs}, {os.cpu_count()} CPUs, load {os.getloadavg()[0]:.2f}")
    for name, values in rows.items():
        shown = " ".join(f"{v:.3f}" for v in values)
        print(f"{name:{width}}  {statistics.median(values):7.3f} s   ({shown})")
    print("tasks on warm workers, in the order they finished (last round):")
    print("\n".join([*finished[:12], "  ...", *finished[-3:]] if len(finished) > 16 else finished))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
