"""Options shared by subcommands, so every command spells them the same way."""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import Any, TypeVar

import click

F = TypeVar("F", bound=Callable[..., Any])


def format_option(choices: Sequence[str], default: str = "text") -> Callable[[F], F]:
    return click.option(
        "--format",
        "fmt",
        type=click.Choice(list(choices), case_sensitive=False),
        default=default,
        show_default=True,
        help="Report format.",
    )


def output_option() -> Callable[[F], F]:
    return click.option(
        "-o",
        "--output",
        type=click.Path(dir_okay=False, writable=True, allow_dash=True),
        default=None,
        help="Write the report to FILE instead of standard output.",
    )


def jobs_option(what: str) -> Callable[[F], F]:
    """``-j/--jobs N``: threads reading at once (default: the usable CPUs, at most 4; 1 reads one thing at a
    time)."""
    return click.option(
        "--jobs",
        "-j",
        "jobs",
        type=click.IntRange(1, 256),
        default=None,
        help=f"Threads reading {what} at once (default: the usable CPUs, at most 4; see "
        "docs/performance.md).",
    )
