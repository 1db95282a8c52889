"""The rich console text renderers write into: a string buffer, colour only when asked."""

from __future__ import annotations

import io

from rich.console import Console


def text_console(buffer: io.StringIO, *, color: bool, width: int) -> Console:
    """A console rendering into ``buffer`` at ``width`` columns, with ANSI colour iff ``color`` (the CLI asks
    for it only when standard output is a terminal and NO_COLOR is unset)."""
    return Console(
        file=buffer,
        width=width,
        force_terminal=color,
        color_system="standard" if color else None,
        no_color=not color,
        highlight=False,
        emoji=False,
        soft_wrap=True,
    )
