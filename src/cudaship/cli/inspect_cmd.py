"""``cudaship inspect PATH...``: what each native library, wheel or device-code file needs and carries."""

from __future__ import annotations

import click

from cudaship.cli.common import (
    details_option,
    format_option,
    jobs_option,
    output_option,
    progress_option,
    quick_gil_handover,
    show_progress,
    text_style,
)
from cudaship.cli.progress import InspectProgress
from cudaship.inspection.report import demangle
from cudaship.inspection.walk import inspect_paths
from cudaship.records.files import FileReport
from cudaship.render.escape import line
from cudaship.render.output import write_report
from cudaship.render.table import INSPECT, render


@click.command("inspect")
@click.argument("paths", nargs=-1, required=True, type=click.Path(path_type=str))
@format_option("inspect")
@output_option()
@click.option(
    "--demangle",
    "demangle_names",
    is_flag=True,
    help="Demangle exported C++ symbol names (and list them, as -v does).",
)
@details_option()
@click.option(
    "--all-exports",
    is_flag=True,
    help="List every exported symbol in the text report (with -v the first 20; by default their count; JSON "
    "has all).",
)
@click.option(
    "--verbose",
    "-v",
    is_flag=True,
    help="Text: list the first 20 exported symbol names, not only their count.",
)
@click.option(
    "--exports/--no-exports",
    default=True,
    show_default=True,
    help="List exported (defined dynamic) symbols.",
)
@progress_option()
@jobs_option("files and wheel members")
def command(
    paths: tuple[str, ...],
    fmt: str,
    output: str | None,
    demangle_names: bool,
    details: bool,
    all_exports: bool,
    exports: bool,
    verbose: bool,
    progress: bool | None,
    jobs: int | None,
) -> int:
    """Report what each PATH needs and what GPU code it carries.

    PATH is a native library or program (.so, .dll, .pyd, .exe, .dylib), a device-code file (.cubin,
    .fatbin, .ptx), a COFF import library (.lib), a wheel or an exported program (.pt2, .pte), read in
    place with each member reported under the package's path, or a directory (walked).
    Formats are recognised by content, from any OS: Windows DLLs read on Linux and the other way round.
    """
    with quick_gil_handover():
        if show_progress(progress):
            with InspectProgress("inspecting") as bar:
                report = inspect_paths(paths, details=details, observer=bar, workers=jobs)
        else:
            report = inspect_paths(paths, details=details, workers=jobs)
    demangler = demangle if demangle_names else None
    style = text_style(
        output,
        exports=exports,
        export_names=verbose or demangle_names,
        demangle=demangler,
        all_exports=all_exports,
    )
    # nothing at all was read (a missing path, an empty directory): a text report on the terminal would only
    # say again what the error lines say (issue 35: `inspect missing.so` reported the error twice)
    nothing_read = bool(report.items) and all(
        isinstance(item, FileReport) and item.error is not None for item in report.items
    )
    if not (nothing_read and fmt == "text" and output in (None, "-")):
        write_report(render(INSPECT, fmt, report, style), output)
    for failed in report.failed:
        where = f"{failed.container}!{failed.path}" if failed.container else failed.path
        click.echo(line(f"cudaship: error: {where}: {failed.error}"), err=True)
    return int(report.exit_code)
