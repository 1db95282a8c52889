"""``python -m fuzz.table REPORT.jsonl``: the reliability table (docs/reliability.md) from ``--report`` lines.

The last line of each target wins, so a report file can collect several runs.
"""

from __future__ import annotations

import json
import sys
from pathlib import Path

from fuzz._harness import TARGET_NAMES


def _row(run: dict) -> str:
    replay = run.get("replay") or {}
    m = replay.get("measurement") or {}
    edges = f"{run['edges']} edges / {run['features']} features" if run.get("edges") is not None else "-"
    finding = "none" if not (run.get("finding") or replay.get("finding")) else "**FOUND** (see log)"
    return (
        f"| {run['target']} | {run['engine']} | {run.get('executions') or 0:,} | {run['seconds']:.0f} s | "
        f"{replay.get('inputs', 0)} | {edges} | {replay.get('line_coverage', '-')}% / "
        f"{replay.get('branch_coverage', '-')}% | {finding} | {m.get('max_seconds', 0) * 1000:.1f} ms | "
        f"{m.get('max_peak', 0) / (1 << 20):.1f} MiB | {m.get('worst_excess', 0):.3f} of "
        f"{replay.get('memory_ceiling', '-')} |"
    )


def main(path: str) -> int:
    runs: dict[str, dict] = {}
    for line in Path(path).read_text().splitlines():
        if line.strip():
            run = json.loads(line)
            runs[run["target"]] = run
    print(
        "| target | engine | executions | time | corpus | libFuzzer coverage | lines / branches covered "
        "| contract broken | slowest input | largest peak | worst peak vs ceiling |"
    )
    print("|---|---|---:|---:|---:|---|---|---|---:|---:|---|")
    for name in TARGET_NAMES:
        if name in runs:
            print(_row(runs[name]))
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1]))
