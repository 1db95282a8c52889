"""``cudaship matrix --format github``: ``{"include": [...]}`` on one line, what ``fromJSON`` reads."""

from __future__ import annotations

import json

from cudaship.ci.records import MatrixResult


def compact(result: MatrixResult) -> str:
    """The matrix as one line of JSON (also what ``--github-output`` writes as ``matrix=``)."""
    return json.dumps(result.to_github(), separators=(",", ":"))


def render(result: MatrixResult) -> str:
    return compact(result) + "\n"
