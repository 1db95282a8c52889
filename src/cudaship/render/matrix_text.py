"""``cudaship matrix --format text``: one line per row, then notes and release-gate problems."""

from __future__ import annotations

from cudaship.ci.records import MatrixResult
from cudaship.words import count


def render(result: MatrixResult) -> str:
    lines = [f"{result.kind.value} matrix for {result.event.value}: {count(len(result.rows), 'row')}"]
    for row in result.rows:
        archs = row.archs.list if row.archs else "(no arch list)"
        runner = f" on {row.runner}" if row.runner else ""
        lines.append(f"  {row.name}{runner}: {archs}")
    for note in result.notes:
        lines.append(f"note: {note}")
    for problem in result.problems:
        lines.append(f"FAIL: {problem}")
    return "\n".join(lines) + "\n"
