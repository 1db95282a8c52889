"""``cudaship program inspect|export|check|run``: AOTInductor packages and ExecuTorch programs, end to end."""

from __future__ import annotations

from pathlib import Path

import click

from cudaship.cli.common import (
    driver_option,
    format_option,
    gpu_option,
    known_train,
    output_option,
    platform_option,
    progress_option,
    show_progress,
    train_option,
)
from cudaship.errors import CudashipError, NoGpuError
from cudaship.exitcodes import ExitCode
from cudaship.knowledge.releases import RELEASE_DATA, known_trains
from cudaship.program.toolchain import TARGETS
from cudaship.render.escape import line
from cudaship.render.output import write_report
from cudaship.render.table import PROGRAM_CHECK, PROGRAM_EXPORT, PROGRAM_INSPECT, PROGRAM_RUN, render


@click.group("program")
def command() -> None:
    """Inspect, export, check and run ahead-of-time compiled programs (.pt2, .pte)."""


@command.command("inspect")
@click.argument("paths", nargs=-1, required=True, type=click.Path(path_type=Path))
@format_option("program inspect")
@output_option()
def inspect_command(paths: tuple[Path, ...], fmt: str, output: str | None) -> int:
    """What a .pt2 / .pte (or an export directory) holds: platform, imports, device code, train."""
    from cudaship.inspection.program import read_program  # subcommand start-up: each subcommand its modules

    infos = []
    unreadable: list[str] = []  # one bad input never hides the others: they are reported, it gets its line
    broken = False  # an input met a bug (exit 70), still after the others were reported
    for p in paths:
        try:
            infos.append(read_program(p))
        except CudashipError as e:
            unreadable.append(str(e.with_path(str(p))))
        except Exception as e:  # a bug met on this input: its line, and the others still reported
            broken = True
            unreadable.append(f"{p}: internal error: {type(e).__name__}: {e} (rerun with --debug)")
    if infos:
        try:
            text = render(PROGRAM_INSPECT, fmt, infos)
        except Exception:  # one input's report cannot be rendered: render each alone, keep the others
            kept = []
            for info in infos:
                try:
                    render(PROGRAM_INSPECT, fmt, [info])
                except Exception as e:
                    broken = True
                    unreadable.append(
                        f"{info.path}: internal error: {type(e).__name__}: {e} (rerun with --debug)"
                    )
                else:
                    kept.append(info)
            infos = kept
            text = render(PROGRAM_INSPECT, fmt, infos) if infos else ""
        if text:
            write_report(text, output)
    for message in unreadable:
        click.echo(line(f"cudaship: error: {message}"), err=True)
    if broken:
        return ExitCode.INTERNAL
    return ExitCode.BAD_INPUT if unreadable or any(i.errors for i in infos) else ExitCode.OK


@command.command("export")
@click.argument("model")
@click.option(
    "--out",
    "out_dir",
    required=True,
    type=click.Path(file_okay=False, path_type=Path),
    help="Directory to write.",
)
@click.option("--device", type=click.Choice(["auto", "cuda", "cpu"]), default="auto", show_default=True)
@click.option(
    "--cxx",
    default=None,
    help="C++ compiler AOTInductor uses (default: the first of $CXX, g++, c++, clang++ on PATH that links "
    "libstdc++ dynamically; for Windows: x86_64-w64-mingw32-g++).",
)
@click.option(
    "--target-platform",
    default=None,
    help=f"Platform to compile for: {', '.join(TARGETS)} (a cross compile); default: this machine's.",
)
@click.option(
    "--windows-cuda",
    type=click.Path(file_okay=False, path_type=Path),
    default=None,
    help="Windows CUDA libraries (cudaship toolkit install TRAIN --platform windows-x86_64 --dest DIR); "
    "default $WINDOWS_CUDA_HOME.",
)
@click.option(
    "--windows-torch",
    type=click.Path(file_okay=False, path_type=Path),
    default=None,
    help="Directory with the Windows torch import libraries (torch.lib, torch_cpu.lib, torch_cuda.lib).",
)
@click.option("--overwrite", is_flag=True, help="Replace an existing package in DIR.")
@format_option("program export")
@output_option()
@progress_option("each phase of the export as it starts (importing torch, compiling, ...)")
def export_command(
    model: str,
    out_dir: Path,
    device: str,
    cxx: str | None,
    target_platform: str | None,
    windows_cuda: Path | None,
    windows_torch: Path | None,
    overwrite: bool,
    fmt: str,
    output: str | None,
    progress: bool | None,
) -> int:
    """Export MODEL (module:function returning (module, inputs), or demo-mlp / demo-conv) with AOTInductor;
    exit 1 when the package fails export's own check (a wrapper with its own static libstdc++, ...)."""
    from cudaship.program.export import export_program  # subcommand start-up, as above

    result = export_program(
        model,
        out_dir,
        device=device,
        cxx=cxx,
        overwrite=overwrite,
        target_platform=target_platform,
        windows_cuda=windows_cuda,
        windows_torch=windows_torch,
        on_phase=_say_phase if show_progress(progress) else None,
    )
    write_report(render(PROGRAM_EXPORT, fmt, result), output)
    return ExitCode.FINDINGS if result.problems else ExitCode.OK


def _say_phase(phase: str) -> None:
    click.echo(line(f"cudaship: export: {phase}"), err=True)


@command.command("check")
@click.argument("directory", type=click.Path(path_type=Path))
@click.option(
    "--wheel",
    type=click.Path(exists=True, dir_okay=False, path_type=Path),
    help="The runtime wheel (its +cuXYZ tag is the train).",
)
@train_option("The runtime's CUDA train", default_text="the --wheel's tag, else none (no train check)")
@gpu_option()
@click.option("--here", is_flag=True, help="Check against this machine's GPU and driver.")
@driver_option("Target driver")
@platform_option("The runtime's platform", TARGETS, "the --wheel's tags", dest="platform")
@format_option("program check")
@output_option()
def check_command(
    directory: Path,
    wheel: Path | None,
    train: str | None,
    gpu: str | None,
    here: bool,
    driver: str | None,
    platform: str | None,
    fmt: str,
    output: str | None,
) -> int:
    """Check an export directory against a runtime: train, GPU arch, driver, package, reference."""
    from cudaship.program.check import check_program  # subcommand start-up, as above

    if train is not None:
        known_train(train, "--train", known_trains(), RELEASE_DATA)
    report = check_program(
        directory, train=train, wheel=wheel, gpu=gpu, here=here, driver=driver, platform=platform
    )
    write_report(render(PROGRAM_CHECK, fmt, report), output)
    return ExitCode.OK if report.passed else ExitCode.FINDINGS


@command.command("run")
@click.argument("directory", type=click.Path(exists=True, file_okay=False, path_type=Path))
@click.option(
    "--runs", default=20, show_default=True, type=click.IntRange(min=1), help="Timed runs (median)."
)
@click.option(
    "--tolerance",
    default=1e-3,
    show_default=True,
    type=click.FloatRange(min=0.0),
    help="Max abs diff allowed.",
)
@click.option("--non-ascii", is_flag=True, help="Run from a directory whose path has non-ASCII characters.")
@click.option("--python", "python", default=None, help="Python to run the program with (default: this one).")
@click.option(
    "--timeout",
    default=600,
    show_default=True,
    type=click.IntRange(min=1),
    help="Seconds before the run is stopped.",
)
@format_option("program run")
@output_option()
def run_command(
    directory: Path,
    runs: int,
    tolerance: float,
    non_ascii: bool,
    python: str | None,
    timeout: int,
    fmt: str,
    output: str | None,
) -> int:
    """Run the program in a fresh process with no compiler on PATH; compare with the reference and eager."""
    from cudaship.program.run import run_program  # subcommand start-up, as above

    report = run_program(
        directory, runs=runs, tolerance=tolerance, non_ascii=non_ascii, python=python, timeout=timeout
    )
    write_report(render(PROGRAM_RUN, fmt, report), output)
    if report.ok:
        return ExitCode.OK
    if report.failure and "sees no CUDA GPU" in report.failure:
        click.echo(f"cudaship: error: {NoGpuError(report.failure)}", err=True)
        return ExitCode.NO_GPU
    return ExitCode.FINDINGS
