"""``cudaship arch-list --train cu132``: a train's arch list, from the same arch table ``audit`` uses."""

from __future__ import annotations

import platform
import sys

import click

from cudaship.ci.archs import TrainArchs, arch_table
from cudaship.cli.common import (
    format_option,
    known_train,
    machine_option,
    output_option,
    policy_option,
    train_given,
    train_option,
)
from cudaship.config import load_config
from cudaship.errors import KnowledgeError, UsageError
from cudaship.exitcodes import ExitCode
from cudaship.knowledge.arch_table import BUILTIN_SOURCE
from cudaship.knowledge.platforms import normalize_machine
from cudaship.render.output import write_report
from cudaship.render.table import ARCH_LIST, render


class NoTrainError(UsageError):
    """CUDA was asked for but no train given (exit 5); ``arch-list`` and ``env`` raise it."""

    exit_code = ExitCode.NO_TRAIN

    def __init__(self) -> None:
        super().__init__("no CUDA train given: pass --train cu132 (or set CUDASHIP_TRAIN)")


def _machine(value: str | None) -> str:
    raw = value or platform.machine()
    try:
        return normalize_machine(raw)
    except KnowledgeError as e:
        where = "--machine" if value else f"this machine ({raw}); pass --machine"
        raise UsageError(f"{where}: {e.message}") from e


@click.command("arch-list")
@train_option("The CUDA train of the build")
@machine_option("Host machine of the build")
@format_option(
    "arch-list",
    help_text="torch: TORCH_CUDA_ARCH_LIST; cmake: CMAKE_CUDA_ARCHITECTURES; gencode: nvcc flags; list: "
    "sm_XY / compute_XY names; plain: X.Y (SASS only, no PTX); json: all of them.",
)
@output_option()
@policy_option("the built-in arch table")
def command(train: str | None, machine: str | None, fmt: str, output: str | None, policy: str | None) -> int:
    """Print the arch list a build of TRAIN compiles for, in the syntax the build consumes.

    The list comes from the project's arch table (the "archs" key of [tool.cudaship] or cudaship.toml;
    the one audit checks wheels against), else from the built-in table: a default for every train from
    11.4 to 13.5 (what the release compiles for and what major projects ship), which a project overrides by
    writing its own table. Every arch is real code (SASS) and the newest is also PTX.
    """
    given = train_given(train)
    if given is None:
        raise NoTrainError()
    key = _machine(machine)
    table = arch_table(load_config(policy))
    parsed = known_train(*given, table.trains(), table.source)
    archs = table.lookup(parsed, key)
    answer = TrainArchs(parsed.tag, parsed.version, key, table.source, archs)
    write_report(render(ARCH_LIST, fmt, answer), output)
    if table.source == BUILTIN_SOURCE and sys.stderr.isatty():  # for a person; a build reads stdout only
        click.echo(
            f"cudaship: {parsed.tag} on {key}: the built-in default; a project sets its own list under "
            f"[tool.cudaship.archs.{parsed.tag}] in pyproject.toml (see docs/knowledge.md)",
            err=True,
        )
    return int(ExitCode.OK)
