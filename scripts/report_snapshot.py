#!/usr/bin/env python3
"""Every report of the real inputs the tests use, in every format, written to one directory; or two such
directories compared.

A redesign that must not change what users see (issue 26: "every report byte-identical before and after,
except for fixes named") takes a snapshot before and after and compares them:

    python scripts/report_snapshot.py snap /tmp/before          # on the old tree
    python scripts/report_snapshot.py snap /tmp/after           # on the new tree
    python scripts/report_snapshot.py diff /tmp/before /tmp/after

Inputs: ``examples/libvecadd.so`` and, when the test cache (``$CUDASHIP_TEST_CACHE``, else
``~/.cache/cudaship-tests``) has been filled by a test run, its real PyPI wheels, its nvcc-built libraries and
mingw-built DLLs, and any exported programs (``.pt2``, ``.pte``) in it. Commands: ``inspect``, ``gpus`` and
``audit --offline`` (wheels and programs only), each in every format the render table offers. Each run's
standard output, standard error and exit code are kept (``<input>/<command>.<format>.{out,err,rc}``).
"""

from __future__ import annotations

import argparse
import filecmp
import fnmatch
import hashlib
import os
import subprocess
import sys
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT / "src"))

from cudaship.render.table import formats  # noqa: E402

#: wheels larger than this are left out by default (their audit takes minutes)
DEFAULT_MAX_BYTES = 400 << 20


def _cache() -> Path:
    return Path(os.environ.get("CUDASHIP_TEST_CACHE", Path.home() / ".cache" / "cudaship-tests"))


def inputs(max_bytes: int, only: str | None = None) -> list[Path]:
    found = [Path("examples") / "libvecadd.so"]  # relative to the checkout, so two checkouts agree
    cache = _cache()
    if cache.is_dir():
        for pattern in ("wheels/*.whl", "nvcc/**/*.so", "mingw/**/*.dll", "**/*.pt2", "**/*.pte"):
            for path in sorted(cache.glob(pattern)):
                if path.is_file() and path.stat().st_size <= max_bytes and "/envs/" not in str(path):
                    found.append(path)
    unique: dict[Path, None] = dict.fromkeys(found)
    return [p for p in unique if only is None or fnmatch.fnmatch(p.name, only)]


def jobs(paths: list[Path]) -> list[tuple[Path, str, str, list[str]]]:
    out = []
    for path in paths:
        container = path.suffix in (".whl", ".pt2", ".pte")
        for command in ("inspect", "gpus", "audit"):
            if command == "audit" and not container:
                continue
            for fmt in formats(command):
                extra = ["--offline"] if command == "audit" else []
                out.append((path, command, fmt, [command, str(path), "--format", fmt, *extra]))
    return out


def _slot(path: Path) -> str:
    digest = hashlib.sha256(str(path).encode()).hexdigest()[:8]
    return f"{path.name}-{digest}"


def snap(dest: Path, max_bytes: int, workers: int, only: str | None = None) -> int:
    dest.mkdir(parents=True, exist_ok=True)
    env = dict(os.environ, PYTHONPATH=str(ROOT / "src"), NO_COLOR="1", COLUMNS="120", CUDASHIP_OFFLINE="1")
    todo = jobs(inputs(max_bytes, only))

    def one(job: tuple[Path, str, str, list[str]]) -> str:
        path, command, fmt, argv = job
        done = subprocess.run(
            [sys.executable, "-m", "cudaship", *argv], capture_output=True, env=env, cwd=ROOT, check=False
        )
        where = dest / _slot(path)
        where.mkdir(exist_ok=True)
        stem = where / f"{command}.{fmt}"
        stem.with_suffix(stem.suffix + ".out").write_bytes(done.stdout)
        stem.with_suffix(stem.suffix + ".err").write_bytes(done.stderr)
        stem.with_suffix(stem.suffix + ".rc").write_text(f"{done.returncode}\n")
        return f"{done.returncode:3} {command:8} {fmt:9} {path.name}"

    with ThreadPoolExecutor(workers) as pool:
        for line in pool.map(one, todo):
            print(line, flush=True)
    print(f"{len(todo)} reports of {len(inputs(max_bytes, only))} inputs in {dest}")
    return 0


def diff(before: Path, after: Path, partial: bool = False) -> int:
    changed = 0
    names_a = {p.relative_to(before) for p in before.rglob("*") if p.is_file()}
    names_b = {p.relative_to(after) for p in after.rglob("*") if p.is_file()}
    if partial:  # only the inputs the after snapshot has (one taken with --only)
        slots = {rel.parts[0] for rel in names_b}
        names_a = {rel for rel in names_a if rel.parts[0] in slots}
    for rel in sorted(names_a ^ names_b):
        print(f"only in {'before' if rel in names_a else 'after'}: {rel}")
        changed += 1
    for rel in sorted(names_a & names_b):
        if not filecmp.cmp(before / rel, after / rel, shallow=False):
            print(f"differs: {rel}")
            changed += 1
    print(f"{changed} of {len(names_a | names_b)} files differ")
    return 1 if changed else 0


def main() -> int:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    sub = parser.add_subparsers(dest="what", required=True)
    s = sub.add_parser("snap", help="write every report into DIR")
    s.add_argument("dir", type=Path)
    s.add_argument("--max-mb", type=int, default=DEFAULT_MAX_BYTES >> 20, help="skip inputs larger than this")
    s.add_argument("-j", type=int, default=os.cpu_count() or 1)
    s.add_argument("--only", help="only inputs whose file name matches this glob (e.g. 'nvidia_cu*')")
    d = sub.add_parser("diff", help="compare two snapshots")
    d.add_argument("before", type=Path)
    d.add_argument("after", type=Path)
    d.add_argument("--partial", action="store_true", help="compare only the inputs AFTER has")
    args = parser.parse_args()
    if args.what == "snap":
        return snap(args.dir, args.max_mb << 20, args.j, args.only)
    return diff(args.before, args.after, args.partial)


if __name__ == "__main__":
    raise SystemExit(main())
