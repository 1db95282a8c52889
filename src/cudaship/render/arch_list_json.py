"""``cudaship arch-list --format json``: the list in every syntax, with where it came from."""

from __future__ import annotations

import json

from cudaship.ci.archs import TrainArchs
from cudaship.knowledge.archs import format_arch_list

SCHEMA_VERSION = 1


def render(answer: TrainArchs) -> str:
    archs = answer.archs
    doc = {
        "schema": SCHEMA_VERSION,
        "train": answer.train,
        "cuda": answer.cuda,
        "machine": answer.machine,
        "source": answer.source,
        "sass": list(archs.sass_names()),
        "ptx": list(archs.ptx_names()),
        **{s: format_arch_list(archs, s) for s in ("torch", "cmake", "gencode", "list")},
    }
    return json.dumps(doc, indent=2) + "\n"
