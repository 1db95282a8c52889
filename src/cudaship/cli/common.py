"""Options shared by subcommands, so every command spells them the same way."""

from __future__ import annotations

import sys
from collections.abc import Callable, Iterator, Sequence
from contextlib import contextmanager
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


@contextmanager
def quick_gil_handover(interval: float = 0.001) -> Iterator[None]:
    """Let a thread coming back from inflating or hashing (which release the GIL) have it back within
    ``interval`` seconds instead of Python's 5 ms, while workers read (the commands with ``-j``); restored
    after. A command-level choice: library code never changes the interpreter's switch interval."""
    before = sys.getswitchinterval()
    sys.setswitchinterval(min(before, interval))
    try:
        yield
    finally:
        sys.setswitchinterval(before)
