"""``cudaship doctor --env``: argument handling for the environment question (the subcommand itself is
:mod:`cudaship.cli.doctor_cmd`; the work is :func:`cudaship.checks.environment.doctor_env`)."""

from __future__ import annotations

import os
import sys

import click

from cudaship.checks.environment import LD_CACHE, doctor_env
from cudaship.errors import NoGpuError
from cudaship.exitcodes import ExitCode
from cudaship.render.output import write_report
from cudaship.render.table import Style, render


def run_env(
    env: str,
    *,
    fmt: str,
    output: str | None,
    ld_library_path: str | None,
    ld_cache: str | None,
    system: bool | None,
    dll_path: str | None,
    details: bool,
    require_gpu: bool,
) -> int:
    """Exit status: 0 loads; 1 an error finding; 2 an unreadable library (or bad --env); 3 ``--require-gpu``
    and no GPU here."""
    from cudaship.probe.gpus import probe

    try:
        result = probe()
        no_gpu = None
    except NoGpuError as e:
        result, no_gpu = None, e.message
    report = doctor_env(
        [env or sys.executable],
        ld_library_path=os.environ.get("LD_LIBRARY_PATH") if ld_library_path is None else ld_library_path,
        ld_cache=ld_cache if ld_cache is not None else LD_CACHE,
        system=system,
        dll_path=(os.environ.get("PATH") if sys.platform == "win32" else None)
        if dll_path is None
        else dll_path,
        probe=result,
        no_gpu=no_gpu,
    )
    text = render("doctor --env", fmt, report, Style(details=details))
    write_report(text, output)
    for f in report.findings:
        if f.rule == "unreadable":
            click.echo(f"cudaship: error: {f.file}: {f.message.split(': cannot read: ', 1)[-1]}", err=True)
    if report.unreadable:
        return int(ExitCode.BAD_INPUT)
    if report.errors:
        return int(ExitCode.FINDINGS)
    if require_gpu and (result is None or not result.gpus):
        return int(ExitCode.NO_GPU)
    return int(ExitCode.OK)
