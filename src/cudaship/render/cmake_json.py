"""``cudaship cmake --format json``: every decision with its reason (schema: schemas/cmake.schema.json)."""

from __future__ import annotations

import json
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from cudaship.ci.cmake import CMakePlan

SCHEMA_VERSION = 1


def to_json(p: CMakePlan) -> dict[str, Any]:
    toolkit = None
    if p.toolkit is not None:
        toolkit = {
            "root": p.toolkit.root.as_posix(),
            "source": p.toolkit.source,
            "nvcc": p.toolkit.nvcc.as_posix() if p.toolkit.nvcc else None,
            "release": p.toolkit.release,
            "release_from": p.toolkit.release_from,
            "cudaship_toolkit": p.toolkit.cudaship_toolkit,
        }
    return {
        "schema": SCHEMA_VERSION,
        "train": p.train,
        "cuda": p.cuda,
        "platform": p.platform,
        "os": p.os,
        "machine": p.machine,
        "generator": p.generator,
        "toolset": p.toolset,
        "multi_config": p.multi_config,
        "toolkit": toolkit,
        "cache": {e.name: {"value": e.value, "type": e.type} for e in p.entries},
        "decisions": [{"key": d.key, "value": d.value, "reason": d.reason} for d in p.decisions],
        "warnings": list(p.warnings),
    }


def render(plan: CMakePlan) -> str:
    return json.dumps(to_json(plan), indent=2) + "\n"
