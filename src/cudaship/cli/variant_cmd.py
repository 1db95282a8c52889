"""``cudaship variant``: wheel variants (PEP 825) and the NVIDIA provider's properties (docs/variants.md)."""

from __future__ import annotations

from pathlib import Path

import click

from cudaship.exitcodes import ExitCode
from cudaship.render.output import write_report
from cudaship.render.table import VARIANT_PROPERTIES, render

from .common import format_option, jobs_option, output_option


@click.group("variant")
def command() -> None:
    """Wheel variants: the nvidia properties a CUDA wheel's binaries justify (checked by `audit`)."""


@command.command("properties")
@click.argument("wheel", type=click.Path(dir_okay=False, path_type=Path))
@format_option("variant properties")
@output_option()
@jobs_option("wheel members")
def properties_command(wheel: Path, fmt: str, output: str | None, jobs: int | None) -> int:
    """Print the nvidia variant properties WHEEL's binaries justify (sm_arch from its SASS and PTX, the CUDA
    version bounds from its runtime linkage and device code), in the syntax variant.json and
    `variantlib make-variant -p` take: a maintainer never writes them by hand."""
    # subcommand start-up: the scan and the checks only when it runs
    from cudaship.checks.context import AuditContext
    from cudaship.checks.table import default_policy
    from cudaship.checks.variant_props import properties_report
    from cudaship.inspection.scan import scan

    scanned = scan(wheel, workers=jobs)
    ctx = AuditContext(scan=scanned, policy=default_policy(), platform=scanned.platform)
    write_report(render(VARIANT_PROPERTIES, fmt, properties_report(ctx)), output)
    return ExitCode.OK
