"""``cudaship repair``: point CUDA wheels at NVIDIA's PyPI wheels instead of the libraries they vendor."""

from __future__ import annotations

from pathlib import Path

import click

from cudaship.errors import CudashipError, UsageError
from cudaship.exitcodes import ExitCode
from cudaship.render.output import write_report
from cudaship.render.table import REPAIR, render

from .common import format_option, jobs_option, output_option


@click.command("repair")
@click.argument("wheels", nargs=-1, required=True, type=click.Path(dir_okay=False, path_type=Path))
@click.option(
    "-w",
    "--wheel-dir",
    "directory",
    type=click.Path(file_okay=False, path_type=Path),
    default=None,
    help="Directory to write the repaired wheels to (required unless --dry-run or --print-excludes).",
)
@click.option("--dry-run", is_flag=True, help="Print the plan; write nothing.")
@click.option(
    "--print-excludes",
    "excludes_for",
    type=click.Choice(["auditwheel", "delvewheel"]),
    default=None,
    help="Print the exclude flags that keep this tool from vendoring the CUDA libraries NVIDIA wheels "
    "provide for the wheels' CUDA major, and nothing else.",
)
@click.option(
    "--drop-unused-cuda",
    "drop_unused",
    is_flag=True,
    help="Also remove CUDA DT_NEEDED entries none of whose symbols a library uses (the audit's "
    "'closure: unused imports' verdict), so they neither load nor become requirements.",
)
@click.option(
    "--fix-record",
    "fix_record",
    is_flag=True,
    help="Repair a wheel whose RECORD disagrees with its members (refused otherwise): the output's RECORD "
    "is written from the members, and the report names each row that changed.",
)
@format_option("repair")
@output_option()
@jobs_option("wheel members")
def command(
    wheels: tuple[Path, ...],
    directory: Path | None,
    dry_run: bool,
    excludes_for: str | None,
    drop_unused: bool,
    fix_record: bool,
    fmt: str,
    output: str | None,
    jobs: int | None,
) -> int:
    """Repair WHEELS: remove the CUDA libraries an NVIDIA wheel provides, point DT_NEEDED and RUNPATH at
    NVIDIA's wheel directories and declare those wheels as requirements. The inputs are never changed;
    each repaired wheel is written to -w DIR under its own name."""
    # subcommand start-up: the repair modules only when it runs (--help lists every subcommand)
    from cudaship.repair.records import RepairReport
    from cudaship.repair.run import repair_wheel

    if excludes_for is not None:
        return _print_excludes(excludes_for, wheels, output, jobs)
    if directory is None and not dry_run:
        raise UsageError("repair: give -w DIR for the repaired wheels, or --dry-run")
    if directory is not None and not dry_run:
        _refuse_name_collisions(wheels, directory)
    results = tuple(
        repair_wheel(
            w, directory, dry_run=dry_run, workers=jobs, drop_unused=drop_unused, fix_record=fix_record
        )
        for w in wheels
    )
    report = RepairReport(results, dry_run, str(directory) if directory else None)
    for r in results:
        if r.error:
            click.echo(f"cudaship: error: {r.error}", err=True)
    write_report(render(REPAIR, fmt, report), output)
    if report.unverified:  # a written wheel that does not hold its report's claims: a bug, not bad input
        return ExitCode.INTERNAL
    return ExitCode.BAD_INPUT if report.failed else ExitCode.OK


def _refuse_name_collisions(wheels: tuple[Path, ...], directory: Path) -> None:
    """Each repaired wheel is written under its input's file name: two inputs with one name (compared
    case-insensitively, as a case-insensitive file system would) are refused before anything is written,
    rather than the second silently replacing the first."""
    seen: dict[str, Path] = {}
    for wheel in wheels:
        first = seen.setdefault(wheel.name.casefold(), wheel)
        if first is not wheel:
            raise UsageError(
                f"repair: {first} and {wheel} have the same output name {directory / wheel.name}; "
                "repair them into different -w directories"
            )


def _print_excludes(tool: str, wheels: tuple[Path, ...], output: str | None, jobs: int | None) -> int:
    from cudaship.repair.excludes import command_line, exclude_flags  # subcommand start-up, as above
    from cudaship.repair.run import plan_wheel

    majors: set[int] = set()
    for path in wheels:
        try:
            plan, _ = plan_wheel(path, workers=jobs)
        except CudashipError as e:
            raise e.with_path(str(path)) from None
        if plan.major is not None:
            majors.add(plan.major)
        elif plan.variant_majors:  # variants, each built for its own CUDA major: exclude every major's names
            majors.update(plan.variant_majors)
        else:
            raise CudashipError(f"no CUDA train: {plan.train}", path=str(path))
    write_report(command_line(exclude_flags(tool, majors)), output)
    return ExitCode.OK
