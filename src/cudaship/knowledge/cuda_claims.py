"""What claims a CUDA build (``data/cuda_claims.toml``): a project-name component (``-cu12``, ``-cuda12x``),
a local version label (``+cu128``), the requirements that count as using CUDA for a wheel without native
code of its own, the projects through which a wheel's own code finds CUDA libraries at run time, and NVIDIA's
GPU libraries outside the toolkit's component table (TensorRT, cuTENSOR, cuQuantum, nvCOMP, ...)."""

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


@once
def _loaders() -> tuple[str, ...]:
    rows = _data.document(_FILE).rows("loaders")
    return tuple(g for row in rows for g in row.strings("patterns", single=False))


@once
def _libraries() -> tuple[str, ...]:
    rows = _data.document(_FILE).rows("libraries")
    return tuple(g.lower() for row in rows for g in row.strings("patterns", single=False))


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


def is_cuda_loader(project: str) -> bool:
    """A requirement on ``project`` (canonical name) means the wheel's own code finds CUDA libraries at run
    time through it (``cuda-pathfinder``): it uses CUDA, native code or not."""
    return any(fnmatch.fnmatchcase(project, g) for g in _loaders())


def is_nvidia_gpu_library(name: str) -> bool:
    """A file name of one of NVIDIA's GPU libraries outside the CUDA toolkit's component table
    (``libnvinfer.so.11``, ``libcustatevec.so.1``, ``libnvcomp.so.6``): built on CUDA."""
    base = name.rsplit("/", 1)[-1].lower()
    return any(fnmatch.fnmatchcase(base, g) for g in _libraries())
