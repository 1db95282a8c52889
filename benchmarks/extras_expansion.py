#!/usr/bin/env python3
"""Benchmark: requirement/extra expansion on hostile METADATA (issue 30, class 7).

Two cases, each a generated wheel audited ``--offline`` in a fresh process (CPU time of the child), and the
expansion alone in this process (marker evaluations counted, CPU time):

- ``gated``: a wheel with N requirements, each behind its own extra (``Requires-Dist: p7; extra == "e7"``);
  the audit follows every extra its markers name.
- ``many-extras``: a wheel whose one requirement asks for K extras (``dep[aa,ab,...,z9]``, two characters
  each) of a distribution (in a ``--find-links`` wheelhouse) whose METADATA has N requirements, each behind
  its own extra (the first K behind those asked for).

"after" is :class:`cudaship.providers.closure.RequirementIndex` (each Requires-Dist parsed once, indexed by
the extras its marker names: evaluations = N + N). "before" (``--before``) is the expansion cudaship did
until issue 30, kept here as a reference: every requirement's marker evaluated once per extra asked for
until one holds (N x K / 2 evaluations); it takes minutes at N = 9,999.

Usage: python benchmarks/extras_expansion.py [-n 9999] [-k 936] [--before] [--json FILE]
"""

# ruff: noqa: E402  (the path fix below must run before the imports)
from __future__ import annotations

import os
import sys

_HERE = os.path.dirname(os.path.abspath(__file__))
sys.path[:] = [p for p in sys.path if os.path.abspath(p or os.curdir) != _HERE]

import argparse
import io
import json
import resource
import string
import subprocess
import tempfile
import time
import zipfile
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any

from packaging.markers import Marker
from packaging.requirements import InvalidRequirement, Requirement

from cudaship.providers.closure import RequirementIndex
from cudaship.wheel.metadata import marker_environment

TAG = "py3-none-manylinux_2_17_x86_64"


#: extras of two characters (936 of them): as many as one Requires-Dist entry of 4,096 characters can ask for
SHORT = [a + b for a in string.ascii_lowercase for b in string.ascii_lowercase + string.digits]


def gated(n: int, prefix: str = "p", extras: Sequence[str] = ()) -> list[str]:
    """``n`` requirements, the i-th behind its own extra: ``extras[i]``, past them ``e<i>``."""
    return [f'{prefix}{i}; extra == "{extras[i] if i < len(extras) else f"e{i}"}"' for i in range(n)]


def write_wheel(directory: Path, name: str, requires: Sequence[str]) -> Path:
    lines = ["Metadata-Version: 2.1", f"Name: {name}", "Version: 1.0"]
    lines += [f"Requires-Dist: {r}" for r in requires]
    buffer = io.BytesIO()
    with zipfile.ZipFile(buffer, "w", zipfile.ZIP_DEFLATED) as zf:
        zf.writestr(f"{name}/__init__.py", "")
        zf.writestr(
            f"{name}-1.0.dist-info/WHEEL", f"Wheel-Version: 1.0\nRoot-Is-Purelib: false\nTag: {TAG}\n"
        )
        zf.writestr(f"{name}-1.0.dist-info/METADATA", "\n".join(lines) + "\n")
        zf.writestr(f"{name}-1.0.dist-info/RECORD", "")
    path = directory / f"{name}-1.0-{TAG}.whl"
    path.write_bytes(buffer.getvalue())
    return path


def before(requires_dist: Sequence[str], env: dict[str, str], extras: Sequence[str]) -> tuple[int, int]:
    """The expansion before issue 30: (requirements selected, marker evaluations)."""
    count = 0

    def holds(marker: Marker | None, extra: str) -> bool:
        nonlocal count
        if marker is None:
            return True
        count += 1
        try:
            return bool(marker.evaluate({**env, "extra": extra}))
        except Exception:
            return False

    out = 0
    for text in requires_dist:
        try:
            req = Requirement(text)
        except InvalidRequirement:
            continue
        if holds(req.marker, ""):
            out += 1
            continue
        for extra in extras:
            if holds(req.marker, extra):
                out += 1
                break
    return out, count


def after(requires_dist: Sequence[str], env: dict[str, str], extras: Sequence[str]) -> tuple[int, int]:
    index = RequirementIndex(requires_dist, env)
    return len(index.select(extras)), index.evaluations


def _cpu(fn: Callable[[], tuple[int, int]]) -> dict[str, Any]:
    start = time.process_time()
    selected, evaluations = fn()
    return {"selected": selected, "evaluations": evaluations, "cpu_s": round(time.process_time() - start, 2)}


def _audit(args: list[str]) -> dict[str, Any]:
    """``cudaship audit --offline`` in a fresh process: its exit code and CPU seconds."""
    usage = resource.getrusage(resource.RUSAGE_CHILDREN)
    start = time.perf_counter()
    proc = subprocess.run(
        [sys.executable, "-m", "cudaship", "audit", "--offline", "-f", "json", *args],
        capture_output=True,
        check=False,
    )
    wall = time.perf_counter() - start
    used = resource.getrusage(resource.RUSAGE_CHILDREN)
    cpu = (used.ru_utime - usage.ru_utime) + (used.ru_stime - usage.ru_stime)
    return {"exit": proc.returncode, "cpu_s": round(cpu, 2), "wall_s": round(wall, 2)}


def main() -> int:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("-n", type=int, default=9999, help="gated requirements (default 9999)")
    parser.add_argument("-k", type=int, default=936, help="extras asked for in many-extras (at most 936)")
    parser.add_argument("--before", action="store_true", help="also time the old expansion (minutes)")
    parser.add_argument("--json", type=Path, help="write the results here too")
    args = parser.parse_args()
    env = marker_environment("linux", "x86_64", "3.12")
    results: dict[str, Any] = {"n": args.n, "k": args.k}
    with tempfile.TemporaryDirectory() as tmp:
        work = Path(tmp)
        # case 1: N requirements each behind its own extra, every extra followed
        requires = gated(args.n)
        extras = [f"e{i}" for i in range(args.n)]
        wheel = write_wheel(work, "gated", requires)
        case: dict[str, Any] = {"wheel_bytes": wheel.stat().st_size}
        case["after"] = _cpu(lambda: after(requires, env, extras))
        if args.before:
            case["before"] = _cpu(lambda: before(requires, env, extras))
        case["audit"] = _audit([str(wheel)])
        results["gated"] = case
        # case 2: one requirement asking for K extras of a distribution with N gated requirements
        house = work / "house"
        house.mkdir()
        asked = SHORT[: args.k]
        dep_requires = gated(args.n, "q", asked)
        write_wheel(house, "dep", dep_requires)
        root = write_wheel(work, "asker", [f"dep[{','.join(asked)}]"])
        case = {"wheel_bytes": root.stat().st_size}
        case["after"] = _cpu(lambda: after(dep_requires, env, asked))
        if args.before:
            case["before"] = _cpu(lambda: before(dep_requires, env, asked))
        case["audit"] = _audit(["--find-links", str(house), "--index-url", "", str(root)])
        results["many-extras"] = case
    for name in ("gated", "many-extras"):
        case = results[name]
        a = case["after"]
        line = f"{name:12} after: {a['evaluations']:>11,} evaluations {a['cpu_s']:>7.2f} s CPU"
        if "before" in case:
            b = case["before"]
            line += f"   before: {b['evaluations']:>11,} evaluations {b['cpu_s']:>7.2f} s CPU"
        a, size = case["audit"], case["wheel_bytes"]
        line += f"   audit --offline: exit {a['exit']}, {a['cpu_s']:.2f} s CPU ({size:,} byte wheel)"
        print(line)
    if args.json:
        args.json.write_text(json.dumps(results, indent=2) + "\n")
    return 0


if __name__ == "__main__":
    sys.exit(main())
