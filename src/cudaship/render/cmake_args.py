"""``cudaship cmake --format args``: CMake command-line arguments, POSIX-shell quoted, one line."""

from __future__ import annotations

import shlex
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from cudaship.ci.cmake import CMakePlan


def render(plan: CMakePlan) -> str:
    args = ["-G", plan.generator]
    if plan.toolset:
        args += ["-T", plan.toolset]
    args += [f"-D{e.name}:{e.type}={e.value}" for e in plan.entries]
    return " ".join(shlex.quote(a) for a in args) + "\n"
