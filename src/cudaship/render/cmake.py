"""``cudaship cmake``: ``args`` (CMake command-line arguments, POSIX-shell quoted, one line), ``json`` (every
decision with its reason; schema: schemas/cmake.schema.json) and ``initial-cache`` (a ``cmake -C FILE``
script; the generator cannot be chosen in an initial cache, so the header says what to pass with it)."""

from __future__ import annotations

import shlex
from collections.abc import Mapping
from typing import TYPE_CHECKING

from cudaship.render.jsonify import JSON, dumps, fields, pick, to_json
from cudaship.render.style import Renderer, Style

if TYPE_CHECKING:
    from cudaship.ci.cmake import CMakePlan

SCHEMA_VERSION = 1


def generator_args(plan: CMakePlan) -> list[str]:
    """``-G GENERATOR`` and ``-T TOOLSET``: what ``cmake -C`` needs besides the file."""
    return ["-G", plan.generator] + (["-T", plan.toolset] if plan.toolset else [])


def args(plan: CMakePlan, style: Style) -> str:
    entries = [f"-D{e.name}:{e.type}={e.value}" for e in plan.entries]
    return " ".join(shlex.quote(a) for a in [*generator_args(plan), *entries]) + "\n"


def _document(p: CMakePlan) -> dict[str, JSON]:
    toolkit = None
    if p.toolkit is not None:
        nvcc = p.toolkit.nvcc.as_posix() if p.toolkit.nvcc else None
        toolkit = {**fields(p.toolkit), "root": p.toolkit.root.as_posix(), "nvcc": nvcc}
    return {
        "schema": SCHEMA_VERSION,
        **pick(p, "train", "cuda", "platform", "os", "machine", "generator", "toolset", "multi_config"),
        "toolkit": toolkit,
        "cache": {e.name: pick(e, "value", "type") for e in p.entries},
        "decisions": to_json(p.decisions),
        "warnings": to_json(p.warnings),
    }


def json(plan: CMakePlan, style: Style) -> str:
    return dumps(_document(plan))


def _cmake_quote(value: str) -> str:
    return '"' + value.replace("\\", "\\\\").replace('"', '\\"').replace("$", "\\$") + '"'


def initial_cache(plan: CMakePlan, style: Style) -> str:
    p = plan
    lines = [
        f"# cudaship cmake: CUDA train {p.train} (CUDA {p.cuda}) for {p.platform}, machine {p.machine}",
        "# Use: cmake -C THIS_FILE " + " ".join(shlex.quote(a) for a in generator_args(p)) + " -S . -B build",
    ]
    if p.toolkit is not None:
        lines.append(
            f"# Toolkit: {p.toolkit.root.as_posix()} (from {p.toolkit.source}; CUDA {p.toolkit.release} "
            f"by {p.toolkit.release_from})"
        )
    for d in p.decisions:
        if d.value is None or d.key in ("generator", "toolset"):
            lines.append(f"# {d.key}: {d.value if d.value is not None else 'not set'}: {d.reason}")
    for e in p.entries:
        doc = e.reason if len(e.reason) < 200 else e.reason[:197] + "..."
        lines.append(
            f"set({e.name} {_cmake_quote(e.value)} CACHE {e.type} {_cmake_quote('cudaship: ' + doc)})"
        )
    return "\n".join(lines) + "\n"


FORMATS: Mapping[str, Renderer[CMakePlan]] = {"args": args, "json": json, "initial-cache": initial_cache}
