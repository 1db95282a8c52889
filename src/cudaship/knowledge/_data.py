"""Loading the knowledge base's TOML data files (``cudaship/knowledge/data``), once per process."""

from __future__ import annotations

import sys
from importlib import resources
from typing import Any

from cudaship.errors import KnowledgeError
from cudaship.once import once

if sys.version_info >= (3, 11):
    import tomllib
else:  # pragma: no cover - exercised on 3.10 only
    import tomli as tomllib


@once
def load(name: str) -> dict[str, Any]:
    """Parse ``data/<name>`` (shipped with the package). A broken data file is a KnowledgeError naming it."""
    try:
        text = (
            resources.files("cudaship.knowledge").joinpath("data").joinpath(name).read_text(encoding="utf-8")
        )
        return tomllib.loads(text)
    except (OSError, tomllib.TOMLDecodeError, UnicodeDecodeError) as e:
        raise KnowledgeError(f"cannot read knowledge data file {name}: {e}") from e


def table(name: str, key: str) -> dict[str, Any]:
    """The table ``key`` of data file ``name``; missing or not a table is a KnowledgeError."""
    value = load(name).get(key)
    if not isinstance(value, dict):
        raise KnowledgeError(f"knowledge data file {name} has no [{key}] table")
    return value
