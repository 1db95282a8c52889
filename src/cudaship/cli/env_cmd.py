"""``cudaship env``: the build environment of a matrix row, for ``$GITHUB_ENV`` or a sourced file."""

from __future__ import annotations

from pathlib import Path

import click

from cudaship import envvars
from cudaship.ci.archs import arch_table
from cudaship.ci.env import BUILD_SYSTEM, GUARDED, BuildEnv, build_env, check_env
from cudaship.cli.arch_list_cmd import NoTrainError
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
from cudaship.errors import UsageError
from cudaship.exitcodes import ExitCode
from cudaship.render.output import write_report
from cudaship.render.table import ENV, render
from cudaship.safe_write import append_text
from cudaship.words import count


def _write_github_env(env: BuildEnv) -> Path:
    """Append the variables to ``$GITHUB_ENV`` (later steps of the job see them); returns the file."""
    target = envvars.get("GITHUB_ENV")
    if not target:
        raise UsageError("--write github: GITHUB_ENV is not set (not running in a GitHub Actions step?)")
    path = Path(target)
    append_text(path, render(ENV, "dotenv", env), error=UsageError)
    return path


def _write_file(env: BuildEnv, path: Path) -> None:
    """Write a file a later step sources: ``export NAME='value'`` lines.

    Always shell syntax, whatever the name: a value such as ``8.0;8.6`` is not safe unquoted in a sourced file
    (``;`` ends a shell command), and python-dotenv and most dotenv readers accept ``export`` and quotes.
    """
    write_report(render(ENV, "shell", env), path)


@click.command("env")
@train_option("The CUDA train of the row")
@machine_option("Machine of the row")
@policy_option("the built-in arch table")
@click.option(
    "--write",
    "targets",
    multiple=True,
    metavar="github|dotenv|shell|FILE",
    help="Where to write (repeatable): github appends to $GITHUB_ENV; dotenv and shell print in that "
    "format; FILE writes a file a later step sources (export NAME=value lines). "
    "Default: shell to standard output.",
)
@format_option(
    "env",
    unset=True,
    help_text="Print in this format (besides any --write); default: shell when nothing else is written.",
)
@output_option()
@click.option(
    "--check",
    is_flag=True,
    help="Do not write: exit 1 if a build variable this environment sets (TORCH_CUDA_ARCH_LIST for torch "
    "builds, CMAKE_CUDA_ARCHITECTURES for CMake builds) is not the row's list, or neither is set.",
)
def command(
    train: str | None,
    machine: str | None,
    policy: str | None,
    targets: tuple[str, ...],
    fmt: str | None,
    output: str | None,
    check: bool,
) -> int:
    """Write the build environment (arch lists, CUDA version) of a train, looked up from the arch table."""
    given = train_given(train)
    if given is None:
        raise NoTrainError()
    project = load_config(policy)
    table = arch_table(project)
    env = build_env(project, known_train(*given, table.trains(), table.source).tag, machine)

    if check:
        if targets or fmt or output:
            raise UsageError("--check does not write: drop --write/--format/-o")
        result = check_env(env)
        row = f"train {env.train} on {env.machine}"
        for m in result.mismatches:
            click.echo(f"cudaship: env: {m.name} is {m.found!r}, but {row} builds {m.expected!r}", err=True)
        right = [n for n in result.checked if n not in {m.name for m in result.mismatches}]
        for name in right:
            why = f"checked: {BUILD_SYSTEM[name]} read it"
            click.echo(f"cudaship: env: {name} is the list of {row} ({why})", err=True)
        for name in result.unset:
            what = f"not checked: only {BUILD_SYSTEM[name]} read it" if result.checked else "nothing checked"
            click.echo(f"cudaship: env: {name} is unset ({what})", err=True)
        if not result.checked:
            click.echo(
                f"cudaship: env: set {' or '.join(GUARDED)} to the list of {row}: a build without one builds "
                "its own default list",
                err=True,
            )
        return int(ExitCode.OK if result.ok else ExitCode.FINDINGS)

    if fmt is None and (output is not None or not targets):
        fmt = "shell"
    if fmt is not None:
        write_report(render(ENV, fmt, env), output)
    for target in targets:
        if target == "github":
            path = _write_github_env(env)
            click.echo(f"cudaship: env: wrote {count(len(env.values), 'variable')} to {path}", err=True)
        elif target in ("shell", "dotenv"):
            write_report(render(ENV, target, env), None)
        else:
            _write_file(env, Path(target))
    return int(ExitCode.OK)
