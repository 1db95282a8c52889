"""``cudaship toolkit install|list|verify --format json``: the toolkit's manifest (less the file list)."""

from __future__ import annotations

import json
from typing import Any

from cudaship.toolkit.records import ToolkitCatalog, ToolkitView

SCHEMA_VERSION = 1


def _view(view: ToolkitView) -> dict[str, Any]:
    data = view.info.to_json()
    data.pop("files")
    doc: dict[str, Any] = {"schema": SCHEMA_VERSION, "path": str(view.root), **data}
    if view.installed or view.removed:
        doc["action"] = "installed" if view.installed else "removed"
    if view.problems is not None:
        doc.update(
            ok=not view.problems,
            files=len(view.info.files),
            problems=[{"path": p.path, "problem": p.problem} for p in view.problems],
        )
    return doc


def _catalog(catalog: ToolkitCatalog) -> dict[str, Any]:
    return {
        "schema": SCHEMA_VERSION,
        "trains": catalog.trains,
        "releases": list(catalog.releases),
        "components": catalog.components,
        "sets": {k: list(v) for k, v in catalog.sets.items()},
    }


def render(view: ToolkitView | ToolkitCatalog) -> str:
    doc = _catalog(view) if isinstance(view, ToolkitCatalog) else _view(view)
    return json.dumps(doc, indent=2) + "\n"
