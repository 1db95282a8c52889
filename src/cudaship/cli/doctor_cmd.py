"""``cudaship doctor [PATH...]``: this machine's GPUs and driver, and whether PATH (or every CUDA-carrying
package installed in this Python) runs here."""

from __future__ import annotations

import click

from cudaship.analysis.doctor import doctor_environment, doctor_paths
from cudaship.cli.common import format_option, output_option
from cudaship.exitcodes import ExitCode
from cudaship.probe.gpus import probe
from cudaship.render.output import write_report
from cudaship.render.table import render


@click.command("doctor")
@click.argument("paths", nargs=-1, type=click.Path(path_type=str))
@format_option("doctor")
@output_option()
def command(paths: tuple[str, ...], fmt: str, output: str | None) -> int:
    """Show this machine's GPUs and driver, and whether each PATH will run here.

    For each GPU: its name, compute capability, memory and whether it supports memory pools
    (cudaMallocAsync); the driver version and the newest CUDA it supports. Read through the CUDA driver API
    (libcuda.so.1 / nvcuda.dll) and NVML; PyTorch is not needed. Without PATH, every native library of the
    packages installed in this Python that carries device code is checked.

    Exit status: 0 everything runs here; 1 something will not run on a GPU here; 2 a PATH could not be read;
    3 no NVIDIA driver or no GPU on this machine.
    """
    result = probe()
    report = doctor_paths(paths, result) if paths else doctor_environment(result)
    write_report(render("doctor", fmt, report), output)
    for item in report.failed:
        click.echo(f"cudaship: error: {item.verdicts.label}: {item.verdicts.error}", err=True)
    if report.failed:
        return int(ExitCode.BAD_INPUT)
    return int(ExitCode.FINDINGS if report.runs_nowhere else ExitCode.OK)
