"""``cudaship matrix``: GitHub Actions matrix JSON from ``[tool.cudaship.matrix]``."""

from __future__ import annotations

from pathlib import Path

import click

from cudaship.ci import archs as ci_archs
from cudaship.ci.github import append_github_file
from cudaship.ci.matrix import build_matrix, derive_e2e, load_matrix_config, read_build_matrix
from cudaship.ci.records import ArchSyntaxes, Event, MatrixResult
from cudaship.cli.common import format_option, output_option, policy_option
from cudaship.config import load_config
from cudaship.errors import UsageError
from cudaship.exitcodes import ExitCode
from cudaship.render.matrix import compact
from cudaship.render.output import write_report
from cudaship.render.table import MATRIX, render


def _github_output(result: MatrixResult) -> None:
    text = (
        f"matrix={compact(result)}\nrows={len(result.rows)}\nhas-rows={'true' if result.rows else 'false'}\n"
    )
    append_github_file("GITHUB_OUTPUT", text, "--github-output")


@click.command("matrix")
@policy_option("the built-in trains and arch table")
@click.option(
    "--event",
    type=click.Choice([e.value for e in Event]),
    default=Event.PUSH.value,
    show_default=True,
    help="The GitHub event the matrix is for.",
)
@click.option("--labels", default="", help="Comma-separated labels of the pull request.")
@click.option("--fork", is_flag=True, help="The pull request comes from a fork (no secrets, no GPU runners).")
@click.option(
    "--derive",
    type=click.Choice(["e2e"]),
    default=None,
    help="Derive end-to-end rows from a build matrix (with --from).",
)
@click.option(
    "--from",
    "from_path",
    type=click.Path(dir_okay=False, path_type=Path),
    default=None,
    help="The build matrix JSON that --derive reads.",
)
@click.option(
    "--github-output", is_flag=True, help="Also append matrix=, rows= and has-rows= to $GITHUB_OUTPUT."
)
@format_option("matrix")
@output_option()
def command(
    policy: str | None,
    event: str,
    labels: str,
    fork: bool,
    derive: str | None,
    from_path: Path | None,
    github_output: bool,
    fmt: str,
    output: str | None,
) -> int:
    """Print the GitHub Actions build matrix ({"include": [...]}) for an event.

    One row per (train, Python, platform) from [tool.cudaship.matrix], each with its arch list in the syntaxes
    a build consumes. A pull request without the all-label builds one row; a release fails (exit 1) when a
    supported train or (Python, train) pair has no row. Notes on rows left out go to standard error.
    """
    if derive is not None and from_path is None:
        raise UsageError("--derive e2e needs --from BUILD_MATRIX.json")
    if from_path is not None and derive is None:
        raise UsageError("--from needs --derive e2e")
    project = load_config(policy)
    config = load_matrix_config(project)
    table = ci_archs.arch_table(project)

    def lookup(train: str, machine: str) -> ArchSyntaxes | None:
        return ci_archs.try_syntaxes(table, train, machine)

    chosen = Event(event)
    if derive == "e2e":
        assert from_path is not None
        result = derive_e2e(config, lookup, read_build_matrix(from_path), chosen, fork=fork)
    else:
        result = build_matrix(config, lookup, chosen, labels.split(","), fork=fork)

    write_report(render(MATRIX, fmt, result), output)
    if github_output:
        _github_output(result)
    if fmt != "text":
        for note in result.notes:
            click.echo(f"cudaship: note: {note}", err=True)
        for problem in result.problems:
            click.echo(f"cudaship: release gate: {problem}", err=True)
    return int(ExitCode.FINDINGS if result.problems else ExitCode.OK)
