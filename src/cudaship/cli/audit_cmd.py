"""``cudaship audit WHEEL... [--policy FILE]``: check wheels against their CUDA contract.

Exit 0 when every check passed, 1 when any failed, 2 for bad input (an unreadable wheel or wheel member, an
invalid policy).
"""

from __future__ import annotations

import os
import sys
from pathlib import Path

import click

from cudaship.checks.engine import AuditObserver, audit_wheels
from cudaship.checks.policy import load_policy
from cudaship.cli.common import format_option, output_option, text_style
from cudaship.cli.progress import ByteProgress
from cudaship.config import load_config
from cudaship.errors import UsageError
from cudaship.exitcodes import ExitCode
from cudaship.render import audit_text
from cudaship.render.output import write_report
from cudaship.render.table import Style, formats, render


class _ProgressBar(ByteProgress, AuditObserver):
    """Audit's progress: compressed bytes of the current wheel's members, and the wheel's name."""

    def __init__(self) -> None:
        super().__init__("auditing")

    def wheel_started(self, path: str) -> None:
        self.label(Path(path).name, restart=True)


_FORMATS = formats("audit")


def _parse_report_option(value: str) -> tuple[str, str]:
    fmt, sep, path = value.partition("=")
    fmt = fmt.strip().lower()
    if not sep or not path or fmt not in _FORMATS:
        raise UsageError(f"--report {value!r}: expected FORMAT=FILE with FORMAT one of {', '.join(_FORMATS)}")
    return fmt, path


@click.command("audit")
@click.argument("wheels", nargs=-1, required=True, type=click.Path(path_type=str))
@click.option(
    "--policy",
    "policy_file",
    type=click.Path(dir_okay=False, path_type=str),
    default=None,
    help="Policy file (a cudaship.toml, or a pyproject.toml with [tool.cudaship]). "
    "Default: [tool.cudaship] of ./pyproject.toml, else ./cudaship.toml, else the built-in default checks.",
)
@format_option("audit")
@output_option()
@click.option(
    "--report",
    "extra_reports",
    multiple=True,
    metavar="FORMAT=FILE",
    help=f"Also write the report in FORMAT ({', '.join(_FORMATS)}) to FILE, from the same run; "
    "repeatable (e.g. --report junit=audit.xml --report json=audit.json).",
)
@click.option("--verbose", "-v", is_flag=True, help="Text: show the evidence of passing checks too.")
@click.option(
    "--progress/--no-progress", default=None, help="Progress bar on stderr (default: when a terminal)."
)
@click.option(
    "--jobs",
    "-j",
    type=click.IntRange(1, 64),
    default=None,
    help="Members read in parallel (default: the number of CPUs, at most 4).",
)
def command(
    wheels: tuple[str, ...],
    policy_file: str | None,
    fmt: str,
    output: str | None,
    extra_reports: tuple[str, ...],
    verbose: bool,
    progress: bool | None,
    jobs: int | None,
) -> int:
    """Audit WHEEL(s) against their CUDA contract: files, imports, archs, requirements, ownership, closure."""
    for w in wheels:
        if not Path(w).is_file():
            raise UsageError("no such file" if not Path(w).exists() else "not a file", path=w)
    extras = [_parse_report_option(value) for value in extra_reports]
    config = load_config(policy_file)
    policy = load_policy(config)
    show_progress = progress if progress is not None else sys.stderr.isatty()
    if show_progress:
        with _ProgressBar() as bar:
            report = audit_wheels(wheels, policy, observer=bar, workers=jobs)
    else:
        report = audit_wheels(wheels, policy, workers=jobs)

    for error in report.errors:
        click.echo(f"cudaship: error: {error}", err=True)
    if not report.wheels:
        return ExitCode.BAD_INPUT
    fmt = fmt.lower()
    to_stdout = output is None or output == "-"
    write_report(render("audit", fmt, report, text_style(output, verbose=verbose)), output)
    for extra_fmt, path in extras:
        write_report(render("audit", extra_fmt, report, Style(verbose=verbose)), path)
    if os.environ.get("GITHUB_ACTIONS") == "true":
        annotations = audit_text.github_annotations(report)
        if annotations:
            # Workflow commands are read from the job's output; keep a JSON/XML report on stdout parseable.
            stream = sys.stderr if to_stdout and fmt in ("json", "junit") else sys.stdout
            stream.write(annotations)
            stream.flush()
    # A damaged member (the archive cannot give its bytes back) leaves part of the wheel unchecked: bad input
    # (2), as an unreadable wheel is, even though the report above also lists it as a failed check.
    for line in report.damaged:
        click.echo(f"cudaship: error: {line}", err=True)
    if report.errors or report.damaged:
        return ExitCode.BAD_INPUT
    return ExitCode.OK if report.ok else ExitCode.FINDINGS
