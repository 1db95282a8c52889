"""``cudaship cmake``: what to hand to CMake for a CUDA train and platform."""

from __future__ import annotations

import sys
from pathlib import Path

import click

from cudaship.ci import archs as ci_archs
from cudaship.ci import cmake
from cudaship.cli.arch_list_cmd import NoTrainError
from cudaship.cli.common import (
    format_option,
    known_train,
    machine_option,
    output_option,
    platform_option,
    policy_option,
    train_given,
    train_option,
)
from cudaship.config import load_config
from cudaship.exitcodes import ExitCode
from cudaship.knowledge.platforms import platform_names
from cudaship.render.output import write_report
from cudaship.render.table import CMAKE, render


def _host_platform() -> str:
    return f"{'windows' if sys.platform == 'win32' else 'linux'}-{ci_archs.host_machine()}"


@click.command("cmake")
@train_option("The CUDA train to configure for")
@platform_option("Target platform", platform_names(), "this machine's", choice=True)
@machine_option("Machine for the arch table", "the platform's")
@click.option(
    "--cxx-standard", type=int, default=None, help="C++ standard of the build; the CUDA standard follows it."
)
@click.option(
    "--toolkit",
    type=click.Path(file_okay=False, path_type=Path),
    default=None,
    help="CUDA toolkit directory; default: $CUDASHIP_TOOLKIT, $CUDA_HOME, $CUDA_PATH, nvcc on PATH.",
)
@policy_option("the built-in arch table")
@click.option(
    "--write",
    "write",
    type=(click.Choice(["initial-cache"]), click.Path(dir_okay=False)),
    default=None,
    metavar="initial-cache FILE",
    help="Write an initial cache for 'cmake -C FILE' (the same as --format initial-cache -o FILE).",
)
@format_option(
    "cmake",
    help_text="args: CMake command-line arguments; json: every decision with its reason; initial-cache: "
    "a script for 'cmake -C FILE'.",
)
@output_option()
def command(
    train: str | None,
    platform_name: str | None,
    machine: str | None,
    cxx_standard: int | None,
    toolkit: Path | None,
    policy: str | None,
    write: tuple[str, str] | None,
    fmt: str,
    output: str | None,
) -> int:
    """Print (or write) the CMake configuration of a CUDA build: generator, compilers, architectures,
    standards, flags and the toolkit, each decision with its reason (--format json)."""
    given = train_given(train)  # --train, else $CUDASHIP_TRAIN (which `cudaship env` sets)
    if given is None:
        raise NoTrainError()
    project = load_config(policy)
    table = ci_archs.arch_table(project)
    info = ci_archs.train_info(known_train(*given, table.trains(), table.source).tag)
    platform_name = platform_name or _host_platform()
    _, _, platform_machine = cmake.parse_platform(platform_name)
    archs = ci_archs.lookup(table, info.tag, machine or platform_machine)
    located = cmake.locate_toolkit(toolkit)
    cmake.check_toolkit(located, info)
    result = cmake.plan(info, platform_name, archs, cmake.probe_host(), located, cxx_standard, machine)
    for warning in result.warnings:
        click.echo(f"cudaship: warning: {warning}", err=True)
    click.echo(
        f"cudaship: toolkit {located.root.as_posix()} from {located.source}: CUDA {located.release} "
        f"({located.release_from})",
        err=True,
    )
    if write is not None:
        fmt, output = "initial-cache", write[1]
    write_report(render(CMAKE, fmt, result), output)
    if fmt == "initial-cache" and output not in (None, "-"):
        gen = " ".join(
            ["-G", repr(result.generator)] + (["-T", repr(result.toolset)] if result.toolset else [])
        )
        click.echo(f"cudaship: wrote {output}: cmake -C {output} {gen} ...", err=True)
    return int(ExitCode.OK)
