"""What every renderer shares, below the table and the renderers alike: the layout a renderer may take
(:class:`Style`) and the shape of a renderer (:class:`Renderer`, a function ``(report, style) -> str``)."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import Protocol, TypeVar

R_contra = TypeVar("R_contra", contravariant=True)


@dataclass(frozen=True)
class Style:
    """Layout a renderer may take (each renderer reads the fields it uses)."""

    color: bool = False  #: ANSI colour (the CLI asks for it only for a terminal without NO_COLOR)
    width: int = 120
    verbose: bool = False  #: audit text: evidence of passing checks too
    exports: bool = True  #: inspect: list exported symbols
    demangle: Callable[[list[str]], list[str]] | None = None  #: inspect: demangle C++ names
    all_exports: bool = False  #: inspect text: every export, not the first 20 (``--all-exports``)
    export_names: bool = False  #: inspect text: export names (``-v``), not only their count
    details: bool = False  #: doctor --env text: every import with the file the loader picks


class Renderer(Protocol[R_contra]):
    """One format of one command: the command's record laid out as text."""

    def __call__(self, report: R_contra, style: Style, /) -> str: ...
