"""``cudaship env --format json`` (schema: render/schemas/env.schema.json)."""

from __future__ import annotations

import json
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from cudaship.ci.env import BuildEnv

SCHEMA_VERSION = 1


def render(env: BuildEnv) -> str:
    doc = {
        "schema": SCHEMA_VERSION,
        "train": env.train,
        "cuda": env.cuda,
        "machine": env.machine,
        "variables": env.as_dict(),
    }
    return json.dumps(doc, indent=2) + "\n"
