"""``cudaship variant``: wheel variants (PEP 825) and the NVIDIA provider's properties (docs/variants.md)."""

from __future__ import annotations

from pathlib import Path

import click

from cudaship.exitcodes import ExitCode
from cudaship.render.output import write_report
from cudaship.render.table import VARIANT_MAKE, VARIANT_PROPERTIES, VARIANT_RELEASE, render
from cudaship.wheel.records import VariantMetadata

from .common import driver_option, format_option, gpu_option, jobs_option, output_option


@click.group("variant")
def command() -> None:
    """Wheel variants: the nvidia properties a CUDA wheel's binaries justify (checked by audit)."""


@command.command("properties")
@click.argument("wheel", type=click.Path(dir_okay=False, path_type=Path))
@format_option("variant properties")
@output_option()
@jobs_option("wheel members")
def properties_command(wheel: Path, fmt: str, output: str | None, jobs: int | None) -> int:
    """Print the nvidia variant properties WHEEL's binaries justify (sm_arch from its SASS and PTX, the CUDA
    version bounds from its runtime linkage and device code), in the syntax variant.json and
    variantlib make-variant -p take: a maintainer never writes them by hand."""
    # subcommand start-up: the scan and the checks only when it runs
    from cudaship.checks.context import AuditContext
    from cudaship.checks.table import default_policy
    from cudaship.checks.variant_props import properties_report
    from cudaship.inspection.scan import scan

    scanned = scan(wheel, workers=jobs)
    ctx = AuditContext(scan=scanned, policy=default_policy(), platform=scanned.platform)
    write_report(render(VARIANT_PROPERTIES, fmt, properties_report(ctx)), output)
    return ExitCode.OK


@command.command("make")
@click.argument("wheel", type=click.Path(dir_okay=False, path_type=Path))
@click.option(
    "-w",
    "--wheel-dir",
    "directory",
    type=click.Path(file_okay=False, path_type=Path),
    required=True,
    help="Directory to write the variant wheel to.",
)
@click.option("--label", default=None, help="The variant label (default: the wheel's CUDA train, cu128).")
@format_option("variant make")
@output_option()
@jobs_option("wheel members")
def make_command(
    wheel: Path, directory: Path, label: str | None, fmt: str, output: str | None, jobs: int | None
) -> int:
    """Make WHEEL a variant wheel in -w DIR: the same members, a .dist-info/variant.json declaring the nvidia
    properties its binaries justify (as variant properties prints them), RECORD rewritten, the label added
    to the file name. Prints the properties written."""
    from cudaship.repair.variant import make_variant

    _target, report = make_variant(wheel, directory, label, workers=jobs)
    write_report(render(VARIANT_MAKE, fmt, report), output)
    return ExitCode.OK


@command.command("release")
@click.argument("wheels", nargs=-1, type=click.Path(dir_okay=False, path_type=Path))
@click.option(
    "--index-json",
    "index_json",
    type=click.Path(dir_okay=False, path_type=Path),
    default=None,
    help="The index's {name}-{version}-variants.json listing the release's variants.",
)
@click.option(
    "--here",
    is_flag=True,
    help="Judge this machine: its highest GPU and its driver's CUDA version, as the NVIDIA provider reads "
    "them (NV_VARIANT_PROVIDER_FORCE_SM_ARCH and NV_VARIANT_PROVIDER_FORCE_CUDA_DRIVER_VERSION override "
    "them).",
)
@gpu_option(multiple=True, what="Judge this GPU only")
@driver_option("Judge a driver for this CUDA version only")
@format_option("variant release")
@output_option()
@jobs_option("wheel members")
def release_command(
    wheels: tuple[Path, ...],
    index_json: Path | None,
    here: bool,
    gpus: tuple[str, ...],
    driver: str | None,
    fmt: str,
    output: str | None,
    jobs: int | None,
) -> int:
    """Judge a release's variant WHEELS together: which variant the NVIDIA provider and PEP 825's ordering
    give each (GPU, driver), whether it runs there, gaps in the coverage, the null variant. With --gpu and
    --driver: which variant an installer would pick on that machine, and whether it runs."""
    from cudaship.checks.context import AuditContext
    from cudaship.checks.engine import with_severity
    from cudaship.checks.table import default_policy
    from cudaship.checks.variant_release import ReleaseReport, release
    from cudaship.errors import UsageError
    from cudaship.inspection.scan import scan
    from cudaship.knowledge.driver import parse_driver
    from cudaship.knowledge.gpus import capability_of
    from cudaship.safe_read import read_regular
    from cudaship.wheel.variant import MAX_VARIANT_JSON, parse_variant_json

    if not wheels and index_json is None:
        raise UsageError("variant release: give the release's variant wheels (and/or --index-json FILE)")
    policy = default_policy()
    contexts = []
    for wheel in wheels:
        scanned = scan(wheel, workers=jobs)
        contexts.append(AuditContext(scan=scanned, policy=policy, platform=scanned.platform))
    index = None
    if index_json is not None:
        index = parse_variant_json(read_regular(index_json, MAX_VARIANT_JSON), str(index_json))
    caps = [capability_of(g.strip()) for text in gpus for g in text.split(",") if g.strip()] or None
    cudas = None
    if driver:
        cudas = []
        for text in (driver,):
            cuda = parse_driver(text).cuda
            if cuda is None:
                raise UsageError(
                    f"--driver {text}: cudaship's release data does not say which CUDA it supports"
                )
            cudas.append((cuda.major, cuda.minor))
    if here:
        if gpus or driver:
            raise UsageError("variant release: --here or --gpu/--driver, not both")
        from cudaship.analysis.variant_pick import forced_machine, provider_machine

        forced = forced_machine()
        machine = forced
        if forced.capability is None or forced.cuda is None:  # the driver only when the variables leave it
            from cudaship.probe.gpus import probe

            found = probe()  # NoGpuError (exit 3) without a driver or a GPU
            cuda = found.driver.cuda
            machine = provider_machine(
                forced, [g.capability for g in found.gpus], (cuda.major, cuda.minor) if cuda else None
            )
        if machine.capability is None or machine.cuda is None:
            raise UsageError("variant release --here: the driver does not say which CUDA version it supports")
        caps, cudas = [machine.capability], [machine.cuda]
    report = release(contexts, index, capabilities=caps, drivers=cudas)
    report = ReleaseReport(
        report.wheels,
        report.index,
        report.labels,
        report.picks,
        tuple(with_severity(c, policy) for c in report.checks),
    )
    write_report(render(VARIANT_RELEASE, fmt, report), output)
    return ExitCode.OK if report.ok else ExitCode.FINDINGS


def variant_index(paths: tuple[str, ...]) -> tuple[tuple[str, ...], VariantMetadata | None]:
    """``paths`` without an index's ``{name}-{version}-variants.json`` (given among the inputs of ``gpus`` and
    ``doctor``), and that file read (one at most)."""
    from cudaship.errors import UsageError
    from cudaship.safe_read import read_regular
    from cudaship.wheel.variant import MAX_VARIANT_JSON, parse_variant_json

    indexes = [p for p in paths if str(p).endswith("-variants.json")]
    if len(indexes) > 1:
        raise UsageError(f"one index *-variants.json at a time: {', '.join(indexes)}")
    if not indexes:
        return paths, None
    rest = tuple(p for p in paths if p not in indexes)
    return rest, parse_variant_json(read_regular(Path(indexes[0]), MAX_VARIANT_JSON), indexes[0])
