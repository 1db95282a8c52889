"""Options shared by subcommands, so every command spells them the same way."""

from __future__ import annotations

import os
import shutil
import sys
from collections.abc import Callable, Iterable, Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any, TypeVar

import click

from cudaship import envvars
from cudaship.errors import UsageError
from cudaship.knowledge.platforms import cuda_machines
from cudaship.knowledge.releases import require_train
from cudaship.knowledge.trains import Train
from cudaship.render.style import Style
from cudaship.render.table import formats
from cudaship.safe_write import check_writable

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


def _writable_output(ctx: click.Context, param: click.Parameter, value: str | None) -> str | None:
    """``-o FILE`` checked when the command line is read, before any work: a report that cannot be written
    is one line and exit 2 at once, not after the whole read (:func:`cudaship.safe_write.check_writable`)."""
    if value is not None and value != "-":
        check_writable(value, error=UsageError)
    return value


def output_option() -> Callable[[F], F]:
    """``-o/--output FILE``: the report's file, its directory checked before any work (exit 2, one line)."""
    return click.option(
        "-o",
        "--output",
        type=click.Path(dir_okay=False, writable=True, allow_dash=True),
        default=None,
        callback=_writable_output,
        help="Write the report to FILE instead of standard output.",
    )


def _writable_dir(ctx: click.Context, param: click.Parameter, value: str | None) -> str | None:
    """``-o DIR`` checked when the command line is read: an existing DIR must be a writable directory; a new
    one needs its parent to be one (it is created, its parents are not): one line naming DIR, exit 2."""
    if value is None:
        return value
    path = Path(value)
    if path.is_dir():
        if not os.access(path, os.W_OK | os.X_OK):
            raise UsageError("cannot write: the directory is not writable", path=value)
    elif path.exists() or path.is_symlink():
        raise UsageError("cannot write: not a directory", path=value)
    else:
        check_writable(value, error=UsageError)  # its parent: there, a directory, writable
    return value


def output_dir_option(what: str) -> Callable[[F], F]:
    """``-o/--output DIR``: the directory a command writes its results in (``survey``: the dataset), required;
    created when missing (its parent must exist), checked before any work (:func:`_writable_dir`)."""
    return click.option(
        "-o",
        "--output",
        "output",
        required=True,
        type=click.Path(path_type=str),
        callback=_writable_dir,
        metavar="DIR",
        help=f"{what} (created when missing).",
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


def progress_option(what: str = "bytes read and the file or wheel member being read") -> Callable[[F], F]:
    """``--progress/--no-progress``: a bar on stderr (default: when stderr is a terminal); see
    :func:`show_progress`."""
    return click.option(
        "--progress/--no-progress",
        "progress",
        default=None,
        help=f"Progress bar on stderr: {what} (default: when a terminal).",
    )


def show_progress(progress: bool | None) -> bool:
    """Whether to show progress: as ``--progress``/``--no-progress`` says, else when stderr is a terminal."""
    return sys.stderr.isatty() if progress is None else progress


def machine_option(what: str, default_text: str = "this machine") -> Callable[[F], F]:
    """``--machine MACHINE``: a CUDA machine in any spelling that
    :func:`cudaship.knowledge.platforms.normalize_machine` reads; ``what`` it is the machine of,
    ``default_text`` what applies without it."""
    names = ", ".join(cuda_machines())
    return click.option(
        "--machine", default=None, metavar="MACHINE", help=f"{what} ({names}); default: {default_text}."
    )


def platform_option(
    what: str,
    names: Iterable[str],
    default_text: str,
    *,
    dest: str = "platform_name",
    choice: bool = False,
    multiple: bool = False,
) -> Callable[[F], F]:
    """``--platform NAME``: ``what`` the platform is, ``names`` the ones the command takes (``choice``: click
    refuses any other; else the command parses it and says), ``default_text`` what applies without it
    (``multiple``: repeatable, with ``choice`` only)."""
    known = tuple(names)
    if choice:  # click lists the choices itself
        return click.option(
            "--platform",
            dest,
            type=click.Choice(sorted(known)),
            default=None,
            multiple=multiple,
            help=f"{what}{'; repeatable' if multiple else ''}; default: {default_text}.",
        )
    return click.option(
        "--platform",
        dest,
        default=None,
        metavar="PLATFORM",
        help=f"{what}: {', '.join(known)}; default: {default_text}.",
    )


def gpu_option(*, multiple: bool = False, what: str = "Target GPU") -> Callable[[F], F]:
    """``--gpu GPU``: a compute capability or a GPU's name (``multiple``: repeatable, or comma-separated)."""
    more = "; repeat or separate by commas" if multiple else ""
    return click.option(
        "--gpu",
        "gpus" if multiple else "gpu",
        multiple=multiple,
        default=None,
        metavar="GPU",
        help=f"{what}: a capability (8.6) or a name (A10G, 'RTX 4090', 'NVIDIA GeForce RTX 4090'; case and "
        f"vendor words do not matter){more}.",
    )


def driver_option(what: str) -> Callable[[F], F]:
    """``--driver VERSION``: a driver version or the CUDA version it reports."""
    return click.option(
        "--driver",
        default=None,
        metavar="VERSION",
        help=f"{what}: a driver version (595.45.04) or the CUDA version it reports (13.2).",
    )


def details_option() -> Callable[[F], F]:
    """``--details`` of the commands that read device code (``inspect``, ``gpus``)."""
    return click.option(
        "--details",
        is_flag=True,
        help="Also decompress SASS entries to read the toolkit each cubin records: better evidence of the "
        "CUDA release a library was built with (and so of its minimum driver), slower.",
    )


def cache_dir_option(what: str, dest: str = "cache_dir") -> Callable[[F], F]:
    """``--cache-dir DIR``: the root of the on-disk cache (:mod:`cudaship.cachedir`); ``what`` this command
    keeps there."""
    return click.option(
        "--cache-dir",
        dest,
        type=click.Path(file_okay=False, path_type=Path),
        default=None,
        help=f"On-disk cache, {what} (default: $CUDASHIP_CACHE_DIR, else the user cache directory: "
        "~/.cache/cudaship on Linux).",
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
    return Style(color=terminal and envvars.get("NO_COLOR") is None, width=width, **layout)


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
    (see :func:`cudaship.knowledge.releases.require_train` and docs/cli.md)."""
    return require_train(text, known, where, label=label)
