"""What claims a CUDA build (``data/cuda_claims.toml``): a project-name component (``-cu12``, ``-cuda12x``),
a local version label (``+cu128``), and the requirements that count as using CUDA for a wheel without native
code of its own."""

from __future__ import annotations

import fnmatch
import re

from cudaship.knowledge import _data
from cudaship.once import once

_FILE = "cuda_claims.toml"


def _patterns(key: str) -> tuple[re.Pattern[str], ...]:
    return tuple(re.compile(row.text("pattern"), re.IGNORECASE) for row in _data.document(_FILE).rows(key))


@once
def _names() -> tuple[re.Pattern[str], ...]:
    return _patterns("names")


@once
def _locals() -> tuple[re.Pattern[str], ...]:
    return _patterns("locals")


@once
def _requirements() -> tuple[str, ...]:
    rows = _data.document(_FILE).rows("requirements")
    return tuple(g for row in rows for g in row.strings("patterns", single=False))


def claim(name: str | None, local: str | None) -> str | None:
    """What claims a CUDA build, in words (``the local version label +cu128``, ``the project name
    cupy-cuda12x``), or None when neither the project name nor the local label does."""
    if local:
        first = re.split(r"[._-]", local)[0]
        if any(p.fullmatch(first) for p in _locals()):
            return f"the local version label +{local}"
    if name:
        parts = re.split(r"[-_.]+", name)
        if any(p.fullmatch(part) for part in parts for p in _names()):
            return f"the project name {name}"
    return None


def is_cuda_distribution(project: str) -> bool:
    """A requirement on ``project`` (canonical name) counts as using CUDA (``nvidia-cublas-cu12``,
    ``cuda-toolkit``, ``cupy-cuda12x``)."""
    return any(fnmatch.fnmatchcase(project, g) for g in _requirements())
