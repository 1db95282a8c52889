"""``cudaship doctor --env``: argument handling for the environment question (the subcommand itself is
:mod:`cudaship.cli.doctor_cmd`; the work is :func:`cudaship.checks.environment.doctor_env`)."""

from __future__ import annotations

import os
import sys
from dataclasses import dataclass, replace
from pathlib import Path

import click
from packaging.utils import canonicalize_name

from cudaship import envvars
from cudaship.analysis.loader import LD_CACHE
from cudaship.checks.environment import EnvReport, doctor_env, with_confirmation
from cudaship.errors import NoGpuError, UsageError
from cudaship.exitcodes import ExitCode
from cudaship.probe.gpus import probe
from cudaship.providers.sources import venv_interpreter
from cudaship.render.escape import line
from cudaship.render.output import write_report
from cudaship.render.style import Style
from cudaship.render.table import DOCTOR_ENV, render
from cudaship.words import size


@dataclass(frozen=True)
class ConfirmOptions:
    only: tuple[str, ...] = ()
    timeout: float = 120.0
    jobs: int | None = None
    memory: int | None = 8 << 30  #: ``--confirm-memory``: each child's private writable memory; None: none
    deadline: float | None = 3600.0  #: ``--confirm-deadline``: seconds for every child together


#: The first line of a ``--confirm`` report (and its first note).
RAN_CODE = (
    "--confirm imported the environment's packages, RUNNING THEIR CODE, in child processes: allow-listed "
    "environment (no tokens or keys), fresh HOME and TMPDIR, memory limit {memory}, deadline {deadline}; "
    "every process it started is ended before it returns (docs/reliability.md: what this does not protect "
    "against)"
)


def confirm_python(env: str) -> str:
    """The interpreter the children run: the one given, this one, or that of the virtual environment given
    as its root or holding the site-packages directory given."""
    if not env:
        return sys.executable
    path = Path(env)
    if not path.is_dir():
        return env
    python = venv_interpreter(path)
    if python is not None:
        return str(python)
    raise UsageError(
        "--confirm needs the environment's interpreter: give it as --env PYTHON (no virtual environment "
        "holds this directory)",
        path=env,
    )


def _confirm(report: EnvReport, env: str, options: ConfirmOptions) -> EnvReport:
    # only doctor --env --confirm runs the loader oracle (subprocess, JSON probes): start-up time
    from cudaship.checks.confirm import compare, plan
    from cudaship.oracle.observe import observe

    here = (
        "windows"
        if sys.platform == "win32"
        else "linux"
        if sys.platform.startswith("linux")
        else sys.platform
    )
    if report.env.os != here:
        raise UsageError(
            f"--confirm loads the environment here: a {report.env.os} environment cannot load on {here}"
        )
    python = confirm_python(env)
    names = {d.dist.name for d in report.env.distributions}
    unknown = [n for n in options.only if canonicalize_name(n) not in names]
    if unknown:
        raise UsageError(f"--confirm-only: not installed in this environment: {', '.join(unknown)}")
    planned = plan(report.env, options.only)
    jobs = options.jobs or max(1, min(8, (os.cpu_count() or 2) // 2))
    observation = observe(
        python,
        [p for _, p in planned],
        timeout=options.timeout,
        jobs=jobs,
        memory=options.memory,
        deadline=options.deadline,
    )
    paths = {lib.path for lib in report.env.libraries}
    paths |= {e.target for e in report.graph.edges if e.target is not None}
    realpaths = {p: os.path.realpath(p) for p in paths}
    confirmed = compare(report.env, report.graph, planned, observation, realpaths, timeout=options.timeout)
    memory = size(options.memory) if options.memory else "none"
    deadline = f"{options.deadline:g} s" if options.deadline else "none"
    honest = RAN_CODE.format(memory=memory, deadline=deadline)
    confirmed = replace(confirmed, ran_code=honest, notes=(honest, *confirmed.notes))
    return with_confirmation(report, confirmed)


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
    confirm: ConfirmOptions | None = None,
) -> int:
    """Exit status: 0 loads; 1 an error finding; 2 an unreadable library (or bad --env); 3 ``--require-gpu``
    and no GPU here."""
    try:
        result = probe()
        no_gpu = None
    except NoGpuError as e:
        result, no_gpu = None, e.message
    report = doctor_env(
        [env or sys.executable],
        ld_library_path=envvars.get("LD_LIBRARY_PATH") if ld_library_path is None else ld_library_path,
        ld_cache=ld_cache if ld_cache is not None else LD_CACHE,
        system=system,
        dll_path=(envvars.get("PATH") if sys.platform == "win32" else None) if dll_path is None else dll_path,
        probe=result,
        no_gpu=no_gpu,
    )
    if confirm is not None:
        report = _confirm(report, env, confirm)
    text = render(DOCTOR_ENV, fmt, report, Style(details=details))
    write_report(text, output)
    for f in report.findings:
        if f.name == "unreadable":
            click.echo(
                line(f"cudaship: error: {f.subject.file}: {f.reason.split(': cannot read: ', 1)[-1]}"),
                err=True,
            )
    if report.unreadable:
        return int(ExitCode.BAD_INPUT)
    if report.errors:
        return int(ExitCode.FINDINGS)
    if require_gpu and (result is None or not result.gpus):
        return int(ExitCode.NO_GPU)
    return int(ExitCode.OK)
