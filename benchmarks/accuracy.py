#!/usr/bin/env python3
"""Benchmark: accuracy of cudaship's static load verdicts, measured against the real loader on a corpus of
popular CUDA wheels from PyPI (issue 21, item 5). Network, slow; not part of the test run.

The corpus is ``benchmarks/accuracy_corpus.toml``: per wheel its project, version, platform, file name, URL,
sha256 and size (from PyPI's JSON API) and why it is there. Subcommands:

- ``download``: fetch every corpus wheel into ``~/.cache/cudaship-accuracy/`` (``$CUDASHIP_ACCURACY_CACHE``),
  each checked against its sha256 and renamed into place atomically (a wheel already there with the right
  digest is kept).
- ``static``: run ``cudaship audit --format json`` (default policy, online) on every wheel; the JSON reports
  are kept in the cache's ``static/`` folder.
- ``load``: for Linux wheels that install on this Python, the loader's verdict (see ``--loader``).
- ``report``: the tables of docs/accuracy.md from the kept results (``--output FILE`` writes them).

Usage: python benchmarks/accuracy.py {download,static,load,report,all} [--only PROJECT ...] [--jobs N]
"""

# ruff: noqa: E402  (the path fix below must run before the imports)
from __future__ import annotations

import os
import sys

# Run as a script, this directory is sys.path[0], and benchmarks/inspect.py would shadow the standard
# ``inspect``.
_HERE = os.path.dirname(os.path.abspath(__file__))
sys.path[:] = [p for p in sys.path if os.path.abspath(p or os.curdir) != _HERE]

import argparse
import concurrent.futures
import hashlib
import json
import shutil
import subprocess
import tempfile
import time
import tomllib
import urllib.request
from dataclasses import dataclass
from pathlib import Path

ROOT = Path(_HERE).parent
CORPUS_FILE = Path(_HERE) / "accuracy_corpus.toml"


@dataclass(frozen=True)
class CorpusWheel:
    project: str
    version: str
    platform: str  #: "linux" or "windows"
    filename: str
    url: str
    sha256: str
    size: int
    why: str

    @property
    def key(self) -> str:
        return f"{self.project}=={self.version} ({self.platform})"


def cache_root() -> Path:
    env = os.environ.get("CUDASHIP_ACCURACY_CACHE")
    path = Path(env) if env else Path.home() / ".cache" / "cudaship-accuracy"
    path.mkdir(parents=True, exist_ok=True)
    return path


def load_corpus(path: Path = CORPUS_FILE) -> list[CorpusWheel]:
    with path.open("rb") as handle:
        data = tomllib.load(handle)
    return [CorpusWheel(**row) for row in data["wheel"]]


def wheel_path(wheel: CorpusWheel) -> Path:
    return cache_root() / "wheels" / wheel.filename


def _sha256(path: Path) -> str:
    digest = hashlib.sha256()
    with path.open("rb") as handle:
        while chunk := handle.read(1 << 20):
            digest.update(chunk)
    return digest.hexdigest()


def download(wheel: CorpusWheel) -> tuple[CorpusWheel, str]:
    """Fetch one wheel (sha256 verified, renamed into place atomically); returns a one-line outcome."""
    target = wheel_path(wheel)
    target.parent.mkdir(parents=True, exist_ok=True)
    if target.exists() and target.stat().st_size == wheel.size and _sha256(target) == wheel.sha256:
        return wheel, "cached"
    fd, tmp_name = tempfile.mkstemp(prefix=".part-", dir=target.parent)
    tmp = Path(tmp_name)
    try:
        digest = hashlib.sha256()
        with os.fdopen(fd, "wb") as out, urllib.request.urlopen(wheel.url, timeout=120) as response:
            while chunk := response.read(1 << 20):
                digest.update(chunk)
                out.write(chunk)
        if digest.hexdigest() != wheel.sha256:
            raise OSError(f"sha256 mismatch: got {digest.hexdigest()}, corpus says {wheel.sha256}")
        os.replace(tmp, target)
        return wheel, "downloaded"
    except BaseException:
        tmp.unlink(missing_ok=True)
        raise


def cmd_download(wheels: list[CorpusWheel], jobs: int) -> int:
    failures = 0
    with concurrent.futures.ThreadPoolExecutor(jobs) as pool:
        futures = {pool.submit(download, w): w for w in wheels}
        for future in concurrent.futures.as_completed(futures):
            wheel = futures[future]
            try:
                _, outcome = future.result()
                print(f"{outcome:10} {wheel.filename}", flush=True)
            except Exception as exc:  # one line per failure, the run goes on
                failures += 1
                print(f"FAILED     {wheel.filename}: {exc}", flush=True)
    return 1 if failures else 0


def static_dir() -> Path:
    path = cache_root() / "static"
    path.mkdir(parents=True, exist_ok=True)
    return path


def cudaship_command() -> list[str]:
    """The cudaship CLI of this checkout (its ``src`` first on the path), run by this Python."""
    return [sys.executable, "-m", "cudaship"]


def cudaship_env() -> dict[str, str]:
    env = dict(os.environ)
    env["PYTHONPATH"] = os.pathsep.join(filter(None, [str(ROOT / "src"), env.get("PYTHONPATH")]))
    return env


def run_static(wheel: CorpusWheel) -> dict:
    """``cudaship audit --format json`` (default policy, online) on one wheel; kept as JSON with its exit code."""
    started = time.monotonic()
    proc = subprocess.run(
        [*cudaship_command(), "audit", "--format", "json", "--no-progress", "--jobs", "1", str(wheel_path(wheel))],
        capture_output=True,
        text=True,
        env=cudaship_env(),
        cwd=tempfile.gettempdir(),  # no pyproject.toml / cudaship.toml of this checkout as the policy
        check=False,
    )
    try:
        report = json.loads(proc.stdout) if proc.stdout.strip() else None
    except json.JSONDecodeError:
        report = None
    result = {
        "filename": wheel.filename,
        "exit_code": proc.returncode,
        "seconds": round(time.monotonic() - started, 1),
        "stderr": proc.stderr[-4000:],
        "report": report,
    }
    _write_json_atomic(static_dir() / f"{wheel.filename}.json", result)
    return result


def _write_json_atomic(path: Path, data: object) -> None:
    fd, tmp = tempfile.mkstemp(prefix=".part-", dir=path.parent)
    with os.fdopen(fd, "w") as out:
        json.dump(data, out, indent=1)
    os.replace(tmp, path)


def cmd_static(wheels: list[CorpusWheel], jobs: int) -> int:
    present = [w for w in wheels if wheel_path(w).exists()]
    for missing in sorted(set(wheels) - set(present), key=lambda w: w.filename):
        print(f"not downloaded: {missing.filename}", flush=True)
    with concurrent.futures.ThreadPoolExecutor(jobs) as pool:
        for result in pool.map(run_static, present):
            print(f"exit {result['exit_code']}  {result['seconds']:7.1f} s  {result['filename']}", flush=True)
    return 0


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("command", choices=["download", "static", "load", "report", "all"])
    parser.add_argument("--only", action="append", default=[], help="only these projects (repeatable)")
    parser.add_argument("--jobs", type=int, default=3)
    args = parser.parse_args(argv)
    wheels = load_corpus()
    if args.only:
        wheels = [w for w in wheels if w.project in args.only]
    if args.command == "download":
        return cmd_download(wheels, args.jobs)
    if args.command == "static":
        return cmd_static(wheels, args.jobs)
    return 2


if __name__ == "__main__":
    sys.exit(main())
