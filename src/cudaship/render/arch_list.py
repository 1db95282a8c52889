"""``cudaship arch-list``: the list in the syntax a build consumes (``torch``, ``cmake``, ``gencode``,
``list``, ``plain``), or ``json``: the list in every syntax, with where it came from."""

from __future__ import annotations

from collections.abc import Mapping

from cudaship.ci.archs import TrainArchs
from cudaship.knowledge.archs import ArchList, format_arch_list
from cudaship.render.jsonify import dumps, pick
from cudaship.render.style import Renderer, Style

SCHEMA_VERSION = 1
SYNTAXES = ("torch", "cmake", "gencode", "list")


def text(answer: TrainArchs, syntax: str) -> str:
    if syntax == "plain":  # X.Y of every arch: SASS only, no PTX
        return format_arch_list(ArchList.of(answer.archs.archs()), "plain") + "\n"
    return format_arch_list(answer.archs, syntax) + "\n"


def json(answer: TrainArchs, style: Style) -> str:
    archs = answer.archs
    doc = {
        "schema": SCHEMA_VERSION,
        **pick(answer, "train", "cuda", "machine", "source"),
        "sass": list(archs.sass_names()),
        "ptx": list(archs.ptx_names()),
        **{s: format_arch_list(archs, s) for s in SYNTAXES},
    }
    return dumps(doc)


def _syntax(syntax: str) -> Renderer[TrainArchs]:
    return lambda answer, style: text(answer, syntax)


FORMATS: Mapping[str, Renderer[TrainArchs]] = {
    **{syntax: _syntax(syntax) for syntax in (*SYNTAXES, "plain")},
    "json": json,
}
