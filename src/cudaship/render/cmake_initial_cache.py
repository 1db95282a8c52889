"""``cudaship cmake --format initial-cache``: a ``cmake -C FILE`` script.

The generator cannot be chosen in an initial cache: the header says what to pass with it.
"""

from __future__ import annotations

import shlex
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from cudaship.ci.cmake import CMakePlan


def _cmake_quote(value: str) -> str:
    return '"' + value.replace("\\", "\\\\").replace('"', '\\"').replace("$", "\\$") + '"'


def generator_args(plan: CMakePlan) -> list[str]:
    """``-G GENERATOR`` and ``-T TOOLSET``: what ``cmake -C`` needs besides the file."""
    return ["-G", plan.generator] + (["-T", plan.toolset] if plan.toolset else [])


def render(plan: CMakePlan) -> str:
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
