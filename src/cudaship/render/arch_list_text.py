"""``cudaship arch-list --format torch|cmake|gencode|list|plain``: the list in the syntax a build consumes."""

from __future__ import annotations

from cudaship.ci.archs import TrainArchs
from cudaship.knowledge.archs import ArchList, format_arch_list


def render(answer: TrainArchs, syntax: str) -> str:
    if syntax == "plain":  # X.Y of every arch: SASS only, no PTX
        return format_arch_list(ArchList.of(answer.archs.archs()), "plain") + "\n"
    return format_arch_list(answer.archs, syntax) + "\n"
