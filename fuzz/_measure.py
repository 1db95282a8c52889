"""Replay a corpus in a fresh process: line coverage of the target's modules (coverage.py, started before
cudaship is imported), then the per-input time and memory ceilings (see :func:`fuzz._harness.measure`).

``python -m fuzz._measure TARGET DIR [DIR...]`` prints one JSON object.
"""

from __future__ import annotations

import json
import sys
from dataclasses import asdict
from pathlib import Path


def main(argv: list[str]) -> int:
    import coverage

    name, dirs = argv[0], [Path(d) for d in argv[1:]]
    src = Path(__file__).resolve().parent.parent / "src" / "cudaship"
    cov = coverage.Coverage(data_file=None, branch=True, config_file=False)
    cov.start()
    from fuzz._harness import Finding, load_target, measure, outcome

    target = load_target(name)
    inputs = [p.read_bytes() for d in dirs if d.is_dir() for p in sorted(d.iterdir()) if p.is_file()]
    inputs = [i for i in inputs if len(i) <= max(target.max_seed_size, 1 << 20) * 2]
    finding = None
    for data in inputs:
        try:
            outcome(target, data)
        except Finding as e:
            finding = str(e)
    cov.stop()
    files = [str(src / m) for m in target.modules]
    analysis = [cov._analyze(f) for f in files]
    statements = sum(a.numbers.n_statements for a in analysis)
    missing = sum(a.numbers.n_missing for a in analysis)
    branches = sum(a.numbers.n_branches for a in analysis)
    missing_branches = sum(a.numbers.n_missing_branches for a in analysis)
    try:
        m = measure(target, inputs)
    except Finding as e:
        finding = finding or str(e)
        m = None
    out = {
        "target": name,
        "inputs": len(inputs),
        "line_coverage": round(100 * (statements - missing) / max(statements, 1), 1),
        "branch_coverage": round(100 * (branches - missing_branches) / max(branches, 1), 1),
        "statements": statements,
        "memory_ceiling": target.memory.describe(),
        "finding": finding,
        "measurement": asdict(m) if m is not None else None,
    }
    print(json.dumps(out))
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
