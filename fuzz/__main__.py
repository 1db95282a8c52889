"""``python -m fuzz TARGET [TARGET ...] --time 60``: fuzz cudaship's readers (see docs/reliability.md).

Per target: the seeds are built once from real files (``python -m fuzz.seeds``, cached), the engine runs for
``--time`` seconds (atheris when it is installed, else the mutation loop), the corpus it grew is kept in
``<test cache>/fuzz-corpus/TARGET`` for the next run, a finding's input is written to
``<test cache>/fuzz-crashes/TARGET``, and the whole corpus is then replayed in a fresh process for line
coverage and the per-input time and memory ceilings. Exit status: 0 when every target held, 1 on a finding.
"""

from __future__ import annotations

import argparse
import hashlib
import json
import os
import re
import subprocess
import sys
import time
from pathlib import Path

from fuzz._harness import HANG_LIMIT, TARGET_NAMES

REPO = Path(__file__).resolve().parent.parent


def _cache() -> Path:
    root = Path(os.environ.get("CUDASHIP_TEST_CACHE", Path.home() / ".cache" / "cudaship-tests"))
    return root


def _have_atheris() -> bool:
    try:
        import atheris  # noqa: F401
    except ImportError:
        return False
    return True


def _seed_kinds(name: str) -> tuple[str, ...]:
    """The target's seed kinds, read in a child so this process does not import cudaship before atheris."""
    code = f"from fuzz._harness import load_target; print(' '.join(load_target({name!r}).seed_kinds))"
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True, cwd=REPO)
    return tuple(out.stdout.split())


def _ensure_seeds(kinds: tuple[str, ...]) -> list[Path]:
    root = _cache() / "fuzz-seeds"
    if any(not (root / k).is_dir() for k in kinds):
        subprocess.run([sys.executable, "-m", "fuzz.seeds", *kinds], check=True, cwd=REPO)
    return [root / k for k in kinds]


def _run_atheris(
    name: str, corpus: Path, seed_dirs: list[Path], crashes: Path, args: argparse.Namespace
) -> dict:
    flags = [
        f"-max_total_time={args.time}",
        f"-timeout={int(HANG_LIMIT)}",
        f"-rss_limit_mb={args.rss_limit_mb}",
        f"-malloc_limit_mb={args.rss_limit_mb}",
        f"-artifact_prefix={crashes}/",
        "-print_final_stats=1",
        f"-seed={args.seed or 1}",
    ]
    if args.runs:
        flags.append(f"-runs={args.runs}")
    cmd = [sys.executable, "-m", "fuzz._atheris", name, *flags, str(corpus), *map(str, seed_dirs)]
    proc = subprocess.run(cmd, cwd=REPO, capture_output=True, text=True, check=False)
    log = proc.stdout + proc.stderr
    (crashes.parent / f"{name}.atheris.log").write_text(log)
    executions = re.findall(r"stat::number_of_executed_units:\s*(\d+)", log)
    covs = re.findall(r"\bcov: (\d+) ft: (\d+)", log)
    artifact = re.search(r"Test unit written to (\S+)", log)
    finding = None
    if proc.returncode != 0:
        tail = [ln for ln in log.splitlines() if "Error" in ln or "RuntimeError" in ln or "==" in ln]
        finding = {"detail": "; ".join(tail[-3:])[:500], "input": artifact.group(1) if artifact else None}
    return {
        "engine": "atheris",
        "executions": int(executions[-1]) if executions else None,
        "edges": int(covs[-1][0]) if covs else None,
        "features": int(covs[-1][1]) if covs else None,
        "finding": finding,
    }


def _run_mutate(
    name: str, corpus: Path, seed_dirs: list[Path], crashes: Path, args: argparse.Namespace
) -> dict:
    from fuzz._harness import load_target
    from fuzz._mutate import run_loop

    target = load_target(name)
    inputs = [p.read_bytes() for d in (*seed_dirs, corpus) for p in sorted(d.iterdir()) if p.is_file()]
    result = run_loop(target, inputs, seconds=args.time, seed=args.seed, max_runs=args.runs)
    for data in result.corpus:
        (corpus / hashlib.sha1(data).hexdigest()).write_bytes(data)
    finding = None
    if result.findings:
        problem, data = result.findings[0]
        path = crashes / f"{problem.kind}-{hashlib.sha1(data).hexdigest()}"
        path.write_bytes(data)
        finding = {"detail": str(problem)[:500], "input": str(path)}
    return {
        "engine": "mutate",
        "executions": result.executions,
        "outcomes": len(result.outcomes),
        "finding": finding,
    }


def _replay(name: str, dirs: list[Path]) -> dict:
    cmd = [sys.executable, "-m", "fuzz._measure", name, *map(str, dirs)]
    proc = subprocess.run(cmd, cwd=REPO, capture_output=True, text=True, check=False)
    if proc.returncode != 0:
        return {"error": (proc.stderr or proc.stdout).strip().splitlines()[-1:]}
    return json.loads(proc.stdout.strip().splitlines()[-1])


def _repro(name: str, path: Path) -> int:
    import traceback

    from fuzz._harness import Finding, load_target, outcome

    target = load_target(name)
    data = path.read_bytes()
    try:
        print(f"{name}: {outcome(target, data)}")
    except Finding as e:
        print(f"{name}: {e}")
        traceback.print_exception(e.__cause__ or e)
        return 1
    return 0


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m fuzz", description=__doc__.splitlines()[0])
    parser.add_argument("targets", nargs="*", help=f"'all' or any of: {', '.join(TARGET_NAMES)}")
    parser.add_argument("--time", type=int, default=60, help="seconds per target (default 60)")
    parser.add_argument("--runs", type=int, default=None, help="stop after this many executions")
    parser.add_argument("--engine", choices=("auto", "atheris", "mutate"), default="auto")
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--rss-limit-mb", type=int, default=4096)
    parser.add_argument("--no-replay", action="store_true", help="skip the coverage/ceiling replay")
    parser.add_argument("--report", type=Path, help="append one JSON line per target to this file")
    parser.add_argument("--list", action="store_true", help="list the targets and exit")
    parser.add_argument("--repro", type=Path, help="run one input file through TARGET and show any traceback")
    args = parser.parse_args(argv)
    if args.repro:
        return _repro(args.targets[0], args.repro)
    if args.list or not args.targets:
        print("\n".join(TARGET_NAMES))
        return 0
    names = list(TARGET_NAMES) if args.targets == ["all"] else args.targets
    unknown = [n for n in names if n not in TARGET_NAMES]
    if unknown:
        parser.error(f"unknown target(s) {', '.join(unknown)}; known: {', '.join(TARGET_NAMES)}")
    engine = args.engine
    if engine == "auto":
        engine = "atheris" if _have_atheris() else "mutate"
    if engine == "atheris" and not _have_atheris():
        parser.error("atheris is not installed (pip install 'cudaship[fuzz]'); use --engine mutate")
    status = 0
    for name in names:
        seed_dirs = _ensure_seeds(_seed_kinds(name))
        corpus = _cache() / "fuzz-corpus" / name
        crashes = _cache() / "fuzz-crashes" / name
        corpus.mkdir(parents=True, exist_ok=True)
        crashes.mkdir(parents=True, exist_ok=True)
        start = time.monotonic()
        run = (_run_atheris if engine == "atheris" else _run_mutate)(name, corpus, seed_dirs, crashes, args)
        run["seconds"] = round(time.monotonic() - start, 1)
        run["target"] = name
        if not args.no_replay:
            run["replay"] = _replay(name, [*seed_dirs, corpus])
        line = json.dumps(run)
        print(line, flush=True)
        if args.report:
            with args.report.open("a") as f:
                f.write(line + "\n")
        replay_finding = run.get("replay", {}).get("finding")
        if run["finding"] or replay_finding:
            status = 1
    return status


if __name__ == "__main__":
    sys.exit(main())
