"""``cudaship matrix --format json``: rows, skipped rows with reasons, notes and problems
(schema: render/schemas/matrix.schema.json)."""

from __future__ import annotations

import json
from typing import Any

from cudaship.ci.records import MatrixResult

SCHEMA_VERSION = 1


def to_json(result: MatrixResult) -> dict[str, Any]:
    return {
        "schema": SCHEMA_VERSION,
        "event": result.event.value,
        "kind": result.kind.value,
        "ok": result.ok,
        "include": [row.to_github() for row in result.rows],
        "skipped": [
            {
                "kind": s.kind.value,
                "train": s.train,
                "python": s.python,
                "platform": s.platform,
                "reason": s.reason,
            }
            for s in result.skipped
        ],
        "notes": list(result.notes),
        "problems": list(result.problems),
    }


def render(result: MatrixResult) -> str:
    return json.dumps(to_json(result), indent=2) + "\n"
