"""``cudaship matrix``: ``github`` (``{"include": [...]}`` on one line, what ``fromJSON`` reads), ``json``
(rows, skipped rows with reasons, notes and problems; schema: render/schemas/matrix.schema.json) and
``text`` (one line per row, then notes and release-gate problems)."""

from __future__ import annotations

import json as _json
from collections.abc import Mapping

from cudaship.ci.records import MatrixResult
from cudaship.render.jsonify import dumps, pick, to_json
from cudaship.render.style import Renderer, Style
from cudaship.words import count

SCHEMA_VERSION = 1


def compact(result: MatrixResult) -> str:
    """The matrix as one line of JSON (also what ``--github-output`` writes as ``matrix=``)."""
    return _json.dumps(result.to_github(), separators=(",", ":"))


def github(result: MatrixResult, style: Style) -> str:
    return compact(result) + "\n"


def json(result: MatrixResult, style: Style) -> str:
    doc = {
        "schema": SCHEMA_VERSION,
        **pick(result, "event", "kind", "ok"),
        "include": [row.to_github() for row in result.rows],
        "skipped": [pick(s, "kind", "train", "python", "platform", "reason") for s in result.skipped],
        "notes": to_json(result.notes),
        "problems": to_json(result.problems),
    }
    return dumps(doc)


def text(result: MatrixResult, style: Style) -> str:
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


FORMATS: Mapping[str, Renderer[MatrixResult]] = {"github": github, "json": json, "text": text}
