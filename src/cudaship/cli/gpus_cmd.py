"""``cudaship gpus PATH...``: which GPU generations (and drivers) a library, wheel or program runs on."""

from __future__ import annotations

import click

from cudaship.analysis.gpus import gpu_report
from cudaship.analysis.variant_here import with_variants
from cudaship.cli.common import (
    details_option,
    driver_option,
    format_option,
    gpu_option,
    jobs_option,
    output_option,
    progress_option,
    quick_gil_handover,
    show_progress,
)
from cudaship.cli.progress import InspectProgress
from cudaship.cli.variant_cmd import variant_index
from cudaship.errors import KnowledgeError, UsageError
from cudaship.exitcodes import ExitCode
from cudaship.inspection.walk import inspect_paths
from cudaship.knowledge.archs import Arch
from cudaship.knowledge.driver import Driver, parse_driver
from cudaship.knowledge.gpus import capability_of
from cudaship.render.escape import line
from cudaship.render.output import write_report
from cudaship.render.table import GPUS, render


def _driver(text: str | None, platform: str) -> Driver | None:
    if text is None:
        return None
    try:
        return parse_driver(text, platform)
    except KnowledgeError as e:
        raise UsageError(f"--driver: {e.message}") from e


def _capabilities(values: tuple[str, ...]) -> tuple[list[Arch] | None, list[tuple[Arch, str]]]:
    """The capabilities asked for (None: the default rows) and each GPU name given, with its capability
    (a capability given as a number names no GPU)."""
    if not values:
        return None, []
    caps: list[Arch] = []
    asked: list[tuple[Arch, str]] = []
    for value in values:
        for item in (part.strip() for part in value.split(",")):
            if not item:
                continue
            for arch, name in _gpu_item(item):
                if arch not in caps:
                    caps.append(arch)
                if name is not None:
                    asked.append((arch, name))
    return sorted(caps), asked


def _gpu_item(item: str) -> list[tuple[Arch, str | None]]:
    """One comma-separated item: a GPU name with spaces ("RTX 6000 Ada"), else space-separated names or
    capabilities ("8.6 9.0", "A10G H100") when every word is one."""
    try:
        return [_named(item)]
    except KnowledgeError as e:
        words = item.split()
        if len(words) > 1:
            try:
                return [_named(word) for word in words]
            except KnowledgeError:
                pass
        raise UsageError(f"--gpu: {e.message}") from e


def _named(text: str) -> tuple[Arch, str | None]:
    arch = capability_of(text)
    return arch, None if text.strip() == arch.capability else " ".join(text.split())


@click.command("gpus")
@click.argument("paths", nargs=-1, required=True, type=click.Path(path_type=str))
@driver_option("The driver to judge for")
@gpu_option(multiple=True, what="Only these GPUs")
@details_option()
@progress_option()
@click.option(
    "--require",
    is_flag=True,
    help="Make the GPUs asked (--gpu; without it every row shown) and the driver given (--driver) a "
    "requirement: exit 1 when the input as a whole does not run on any of them (for a CI gate).",
)
@format_option("gpus")
@output_option()
@jobs_option("files and wheel members")
def command(
    paths: tuple[str, ...],
    driver: str | None,
    gpus: tuple[str, ...],
    require: bool,
    details: bool,
    progress: bool | None,
    fmt: str,
    output: str | None,
    jobs: int | None,
) -> int:
    """Tell which GPUs (the compute capabilities 7.0 to 12.1 of the inputs' machine) each PATH runs on.

    PATH is a library, program, device-code file, wheel or directory, as for cudaship inspect. For each
    library with device code and for each wheel as a whole (it runs on a GPU only where every such library
    does), each capability gets a verdict: native (SASS for it), jit (PTX compiled by the driver at the first
    launch) or no, with the reason, and the minimum driver needed and why. An x86_64 or Windows input is
    judged only against x86_64 GPUs, an aarch64 one only against Arm ones (as audit judges).

    Given variant wheels of a release (PEP 825; and/or the index's NAME-VERSION-variants.json as a PATH), a
    section says which variant an installer picks for each GPU row (under --driver, else under every driver
    from CUDA 11.0, as ranges), as the NVIDIA provider and PEP 825's ordering decide, whether it runs, and
    where no variant fits.
    """
    capabilities, asked = _capabilities(gpus)
    parsed_driver = _driver(driver, "linux")
    paths, index = variant_index(paths)
    with quick_gil_handover():
        if show_progress(progress):
            with InspectProgress("reading") as bar:
                inspected = inspect_paths(paths, details=details, observer=bar, workers=jobs)
        else:
            inspected = inspect_paths(paths, details=details, workers=jobs)
    report = gpu_report(
        inspected, capabilities=capabilities, driver=parsed_driver, asked=asked, required=require
    )
    report = with_variants(report, inspected, index)
    write_report(render(GPUS, fmt, report), output)
    for failed in report.failed:
        click.echo(line(f"cudaship: error: {failed.label}: {failed.error}"), err=True)
    if report.failed:
        return int(ExitCode.BAD_INPUT)
    return int(ExitCode.FINDINGS if report.unmet else ExitCode.OK)
