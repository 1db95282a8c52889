"""Options shared by subcommands, so every command spells them the same way."""

from __future__ import annotations

import os
import shutil
import sys
from collections.abc import Callable, Iterable, Iterator
from contextlib import contextmanager
from typing import Any, TypeVar

import click

from cudaship import envvars
from cudaship.knowledge.trains import Train, require_known
from cudaship.render.table import Style, formats

F = TypeVar("F", bound=Callable[..., Any])


def format_option(
    command: str, *, unset: bool = False, help_text: str = "Report format."
) -> Callable[[F], F]:
    """``-f/--format`` with the formats the renderer table has for ``command``; the first is the default
    (with ``unset``, no default: the command sees None and decides)."""
    choices = formats(command)
    chosen = None if unset else choices[0]
    return click.option(
        "-f",
        "--format",
        "fmt",
        type=click.Choice(list(choices), case_sensitive=False),
        default=chosen,
        show_default=chosen is not None,
        help=help_text,
    )


def policy_option(default_text: str, dest: str = "policy") -> Callable[[F], F]:
    """``--policy FILE``, one definition for every command that reads the project configuration
    (:func:`cudaship.config.load_config`); ``default_text`` says what applies when there is none."""
    return click.option(
        "--policy",
        dest,
        type=click.Path(dir_okay=False),
        default=None,
        help="Configuration file: a cudaship.toml, or a pyproject.toml with [tool.cudaship]. Default: the "
        f"nearest one from the current directory upwards, else {default_text}.",
    )


def train_option(
    what: str, *, default_text: str | None = None, required: bool = False, dest: str = "train"
) -> Callable[[F], F]:
    """``--train TRAIN``, one definition for every command that takes a CUDA train: ``what`` the train is of,
    ``default_text`` what applies without it. Every value is judged by one rule (:func:`known_train`: a train
    the command cannot serve is exit 4)."""
    if required:  # no default at all: click 8.3 takes an explicit default=None as a value given
        return click.option("--train", dest, required=True, metavar="TRAIN", help=f"{what} (cu132 or 13.2).")
    return click.option(
        "--train",
        dest,
        default=None,
        metavar="TRAIN",
        help=f"{what} (cu132 or 13.2); default: {default_text or '$CUDASHIP_TRAIN'}.",
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


def to_terminal(output: str | None) -> bool:
    """The report goes to standard output and that is a terminal."""
    return output in (None, "-") and sys.stdout.isatty()


def text_style(output: str | None, **layout: Any) -> Style:
    """Layout for a text report: colour and the terminal's width when it goes to a terminal (colour also
    needs NO_COLOR unset), else no colour at 120 columns."""
    terminal = to_terminal(output)
    width = max(shutil.get_terminal_size().columns, 80) if terminal else 120
    return Style(color=terminal and "NO_COLOR" not in os.environ, width=width, **layout)


def train_given(option: str | None) -> tuple[str, str] | None:
    """The train text a command was given and where it came from (``--train`` or ``$CUDASHIP_TRAIN``); None
    when neither gives one."""
    if option is not None and option.strip():
        return option, "--train"
    value = envvars.get("CUDASHIP_TRAIN")  # validated there: text that is no train is exit 4
    if value is not None and value.strip():
        return value, "$CUDASHIP_TRAIN"
    return None


def known_train(text: str, label: str, known: Iterable[Train], where: str) -> Train:
    """The one rule of every command taking a train: one it cannot serve is exit 4 with one message
    (see :func:`cudaship.knowledge.trains.require_known` and docs/cli.md)."""
    return require_known(text, known, where, label=label)
