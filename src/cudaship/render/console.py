"""The rich console text renderers write into: a string buffer, colour only when asked."""

from __future__ import annotations

import io

from rich.console import Console


def text_console(buffer: io.StringIO, *, color: bool, width: int, markup: bool = True) -> Console:
    """A console rendering into ``buffer`` at ``width`` columns, with ANSI colour iff ``color`` (the CLI asks
    for it only when standard output is a terminal and NO_COLOR is unset). ``markup=False``: strings
    printed are never read as rich markup (a renderer that styles with :class:`rich.text.Text` only; with
    markup, every name from an input must go through ``rich.markup.escape``, or ``[link=...]`` in a name is
    a link)."""
    return Console(
        markup=markup,
        file=buffer,
        width=width,
        force_terminal=color,
        color_system="standard" if color else None,
        no_color=not color,
        highlight=False,
        emoji=False,
        soft_wrap=True,
    )
