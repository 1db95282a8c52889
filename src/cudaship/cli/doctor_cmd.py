"""``cudaship doctor [PATH...]``: this machine's GPUs and driver, and whether PATH (or every CUDA-carrying
package installed in this Python) runs here."""

from __future__ import annotations

import click

from cudaship.cli.common import format_option, output_option
from cudaship.errors import NoGpuError, UsageError
from cudaship.exitcodes import ExitCode
from cudaship.probe.gpus import probe
from cudaship.render.escape import line
from cudaship.render.output import write_report
from cudaship.render.table import DOCTOR, formats, render


def _memory(value: str | None) -> int | None:
    from cudaship.containment import DEFAULT_MEMORY, parse_memory

    if value is None:
        return DEFAULT_MEMORY
    try:
        return parse_memory(value) or None
    except ValueError:
        raise UsageError(
            f"--confirm-memory: {value[:60]!r} is not a size (8G, 512M, 0 for no limit)"
        ) from None


@click.command("doctor")
@click.argument("paths", nargs=-1, type=click.Path(path_type=str))
@format_option("doctor --env", help_text="Report format (markdown: with --env).")
@output_option()
@click.option(
    "--env",
    "env",
    is_flag=False,
    flag_value="",
    default=None,
    metavar="[PYTHON|VENV|SITE-PACKAGES]",
    help="Will the installed packages load together? Simulate the loader over an environment: an interpreter "
    "(default: this one), a virtual environment's root or prefix, or a site-packages directory (a Linux one "
    "can be read from any OS). One with no distribution installed is bad input (exit 2).",
)
@click.option(
    "--ld-library-path",
    default=None,
    help="With --env: LD_LIBRARY_PATH to simulate (default: $LD_LIBRARY_PATH).",
)
@click.option(
    "--ld-cache",
    default=None,
    metavar="FILE",
    help="With --env: the loader cache to read (default: /etc/ld.so.cache).",
)
@click.option(
    "--system/--no-system",
    default=None,
    help="With --env: search and read this machine's system libraries (default: when running on Linux).",
)
@click.option(
    "--dll-path",
    default=None,
    metavar="PATHS",
    help="With --env, a Windows environment: PATH to report on (;-separated; default: $PATH on Windows).",
)
@click.option("--details", is_flag=True, help="With --env: list every import with the file the loader picks.")
@click.option(
    "--require-gpu", is_flag=True, help="With --env: exit 3 when this machine has no GPU to check against."
)
@click.option(
    "--confirm",
    is_flag=True,
    help="With --env: also import each distribution's top-level modules, each in a fresh child of the "
    "environment's interpreter, and compare what the real loader mapped with the simulation. This RUNS "
    "THE PACKAGES' CODE (contained: allow-listed environment without tokens or keys, fresh HOME and TMPDIR, "
    "memory limit, deadline, every process ended at the end; not a sandbox, docs/reliability.md).",
)
@click.option(
    "--confirm-memory",
    "confirm_memory",
    metavar="SIZE",
    default=None,
    help="With --confirm: each child's memory limit, private writable memory (RLIMIT_DATA on Linux): 8G, "
    "512M; 0 for none.  [default: 8G]",
)
@click.option(
    "--confirm-deadline",
    "confirm_deadline",
    type=click.FloatRange(min=0),
    default=3600,
    show_default=True,
    metavar="SECONDS",
    help="With --confirm: seconds every child together may take (what is left is reported as not run); 0 for "
    "none.",
)
@click.option(
    "--confirm-only",
    "confirm_only",
    multiple=True,
    metavar="NAME",
    help="With --confirm: only these distributions (repeatable; default: every one with native code and "
    "every one requiring such a one directly).",
)
@click.option(
    "--confirm-timeout",
    type=click.FloatRange(min=1),
    default=120.0,
    show_default=True,
    metavar="SECONDS",
    help="With --confirm: seconds one child may take (it is killed, and reported, after that).",
)
@click.option(
    "--confirm-jobs",
    type=click.IntRange(min=1),
    default=None,
    metavar="N",
    help="With --confirm: children run at once (default: half the CPUs, 1 to 8).",
)
def command(
    paths: tuple[str, ...],
    fmt: str,
    output: str | None,
    env: str | None = None,
    ld_library_path: str | None = None,
    ld_cache: str | None = None,
    system: bool | None = None,
    dll_path: str | None = None,
    details: bool = False,
    require_gpu: bool = False,
    confirm: bool = False,
    confirm_only: tuple[str, ...] = (),
    confirm_timeout: float = 120.0,
    confirm_jobs: int | None = None,
    confirm_memory: str | None = None,
    confirm_deadline: float = 3600,
) -> int:
    """Show this machine's GPUs and driver, and whether each PATH will run here.

    For each GPU: its name, compute capability, memory and whether it supports memory pools
    (cudaMallocAsync); the driver version and the newest CUDA it supports. Read through the CUDA driver API
    (libcuda.so.1 / nvcuda.dll) and NVML; PyTorch is not needed. Without PATH, every native library of the
    packages installed in this Python that carries device code is checked.

    With --env: every native library of the environment with each of its imports resolved the way the
    loader will (RPATH/RUNPATH/$ORIGIN, LD_LIBRARY_PATH, the ld.so cache, packages that load their libraries
    on import; Windows: os.add_dll_directory); reports imports found nowhere, symbol versions the picked file
    does not define, two copies of one library in one process, NVIDIA component versions below what a
    sibling needs, and device code that does not run on the GPUs here (skipped without a GPU). With
    --confirm, the real loader is asked too: each distribution's modules are imported in fresh children and
    every DT_NEEDED mapped there is compared with the simulation's pick (docs/doctor-env.md).
    """
    if env == "" and len(paths) == 1:
        # ``--env`` takes an optional value, so click reads ``--env --require-gpu DIR`` (or ``DIR --env``) as
        # --env without one and DIR as a PATH: the one PATH is the environment, in whatever order it came
        env, paths = paths[0], ()
    if env is not None:
        if paths:
            raise UsageError("--env checks one environment: give it no PATH besides (--env DIR)")
        from cudaship.cli.doctor_env import ConfirmOptions, run_env  # start-up: only doctor --env

        return run_env(
            env,
            fmt=fmt,
            output=output,
            ld_library_path=ld_library_path,
            ld_cache=ld_cache,
            system=system,
            dll_path=dll_path,
            details=details,
            require_gpu=require_gpu,
            confirm=ConfirmOptions(
                confirm_only,
                confirm_timeout,
                confirm_jobs,
                _memory(confirm_memory),
                confirm_deadline or None,
            )
            if confirm
            else None,
        )
    if confirm or confirm_only:
        raise UsageError("--confirm and --confirm-only go with --env")
    if fmt.lower() not in formats("doctor"):
        raise UsageError(f"--format {fmt.lower()} is available with --env")
    from cudaship.analysis.doctor import (  # start-up: the walk
        doctor_environment,
        doctor_paths,
        without_gpu,
        without_gpu_variants,
    )
    from cudaship.analysis.variant_pick import forced_machine
    from cudaship.cli.variant_cmd import variant_index

    paths, index = variant_index(paths)
    try:
        result = probe()
    except NoGpuError as e:
        forced = forced_machine()
        answer = without_gpu_variants(paths, str(e), index) if paths or index else without_gpu(str(e))
        if answer.variants and forced.capability is not None and forced.cuda is not None:
            # the provider's override variables stand for the GPU and the driver, as they do for it
            write_report(render(DOCTOR, fmt, answer), output)
            return int(ExitCode.FINDINGS if answer.runs_nowhere else ExitCode.OK)
        if fmt.lower() != "json":
            raise  # text: the one line, exit 3
        # JSON: the report still, with the missing driver or GPU as its fact (a CI step parses it), then the
        # same line on stderr and the same exit status
        write_report(render(DOCTOR, fmt, answer), output)
        click.echo(f"cudaship: error: {e}", err=True)
        return int(e.exit_code)
    report = doctor_paths(paths, result, index) if paths or index else doctor_environment(result)
    write_report(render(DOCTOR, fmt, report), output)
    for item in report.failed:
        click.echo(line(f"cudaship: error: {item.verdicts.label}: {item.verdicts.error}"), err=True)
    if report.failed:
        return int(ExitCode.BAD_INPUT)
    return int(ExitCode.FINDINGS if report.runs_nowhere else ExitCode.OK)
