"""``cudaship toolkit``: assemble, list, verify and remove CUDA toolkits, and print their environment."""

from __future__ import annotations

import platform as _host
import re
import sys
from pathlib import Path
from types import TracebackType
from typing import Any

import click

from cudaship import envvars
from cudaship.ci.github import append_github_file
from cudaship.errors import ToolkitError, UsageError
from cudaship.exitcodes import ExitCode
from cudaship.knowledge import toolkit_data
from cudaship.knowledge.platforms import cuda_platform_for, machine_of, os_of
from cudaship.render.output import write_report
from cudaship.render.table import TOOLKIT, TOOLKIT_ENV, render
from cudaship.toolkit import download, layout
from cudaship.toolkit import install as installer
from cudaship.toolkit.extract import ExtractLimits
from cudaship.toolkit.records import Observer, Platform, Source, ToolkitCatalog, ToolkitEnv, ToolkitView
from cudaship.words import byte_count, count

from .common import cache_dir_option, format_option, output_option, platform_option

_SIZE = re.compile(r"^(\d+)([KMGT]?)i?B?$", re.IGNORECASE)


def host_platform() -> Platform:
    return Platform(cuda_platform_for(os_of(sys.platform), machine_of(_host.machine())).redist)


def _parse_size(text: str) -> int:
    match = _SIZE.match(text.strip())
    if not match:
        raise UsageError(f"--max-size: not a size: {text!r} (write e.g. 40G or 512M)")
    exponent = {"": 0, "K": 1, "M": 2, "G": 3, "T": 4}[match.group(2).upper()]
    return int(match.group(1)) << (10 * exponent)


class _Progress(Observer):
    """Stage lines on standard error; a rich progress bar for downloads when standard error is a terminal."""

    def __init__(self, quiet: bool) -> None:
        self.quiet = quiet
        self.bar: Any = None
        self.tasks: dict[str, Any] = {}
        if not quiet and sys.stderr.isatty():
            # rich only for a bar on a terminal: start-up time
            from rich.console import Console
            from rich.progress import (
                BarColumn,
                DownloadColumn,
                Progress,
                TextColumn,
                TimeRemainingColumn,
                TransferSpeedColumn,
            )

            self.bar = Progress(
                TextColumn("{task.description}"),
                BarColumn(),
                DownloadColumn(),
                TransferSpeedColumn(),
                TimeRemainingColumn(),
                console=Console(stderr=True),
                transient=True,
            )

    def __enter__(self) -> _Progress:
        if self.bar is not None:
            self.bar.start()
        return self

    def __exit__(
        self, exc_type: type[BaseException] | None, exc: BaseException | None, tb: TracebackType | None
    ) -> None:
        if self.bar is not None:
            self.bar.stop()

    def _say(self, text: str) -> None:
        if self.bar is not None:
            self.bar.console.print(text, markup=False, highlight=False)
        else:
            click.echo(text, err=True)

    def stage(self, message: str) -> None:
        if not self.quiet:
            self._say(f"cudaship: toolkit: {message}")

    def warning(self, message: str) -> None:
        self._say(f"cudaship: toolkit: warning: {message}")

    def download_started(self, filename: str, total: int | None, already: int) -> None:
        if self.bar is not None:
            self.tasks[filename] = self.bar.add_task(filename, total=total, completed=already)
        elif not self.quiet:
            resumed = f" (resuming at {byte_count(already)})" if already else ""
            self._say(f"cudaship: toolkit: downloading {filename}{resumed}")

    def download_progress(self, filename: str, done: int) -> None:
        if self.bar is not None and filename in self.tasks:
            self.bar.advance(self.tasks[filename], done)

    def download_finished(self, filename: str) -> None:
        if self.bar is not None and filename in self.tasks:
            self.bar.remove_task(self.tasks.pop(filename))


@click.group("toolkit")
def command() -> None:
    """Assemble CUDA toolkits from NVIDIA's redist archives or wheels: any platform, verified, atomic."""


@command.command("install")
@click.argument("train")
@platform_option("Target platform", (p.value for p in Platform), "this machine's")
@click.option(
    "--components",
    "-c",
    multiple=True,
    help="Components or sets, comma-separated or repeated (default: the 'default' set, enough to "
    "compile and link a CUDA program). See 'cudaship toolkit list'.",
)
@click.option(
    "--dest",
    required=True,
    type=click.Path(file_okay=False, path_type=Path),
    help="Directory to assemble into; replaced atomically if it holds a cudaship toolkit.",
)
@click.option(
    "--source",
    type=click.Choice([s.value for s in Source]),
    default=Source.REDIST.value,
    show_default=True,
    help="redist: NVIDIA's archives and manifest; pypi: NVIDIA's wheels via pip.",
)
@click.option("--mirror", default=None, help="Redist base URL or a local directory laid out like it.")
@click.option("--offline", is_flag=True, help="Use only the download cache.")
@cache_dir_option("the downloads under toolkit/")
@click.option(
    "--retries",
    type=click.IntRange(0, 50),
    default=4,
    show_default=True,
    help="Extra attempts for a failed or cut download (resumed where it stopped).",
)
@click.option(
    "--deadline",
    type=click.FloatRange(min=0.1),
    default=3600.0,
    show_default=True,
    help="Seconds one archive or manifest may take to arrive in all, retries included (a server that "
    "trickles never trips the per-read timeout; it fails here).",
)
@click.option(
    "--max-size",
    default="64G",
    show_default=True,
    help="Refuse archives that expand past this size in total, and downloads larger than it (counted as they "
    "arrive, whatever the server says).",
)
@click.option("--quiet", "-q", is_flag=True, help="No progress output.")
@format_option("toolkit")
@output_option()
def install_command(
    train: str,
    platform_name: str | None,
    components: tuple[str, ...],
    dest: Path,
    source: str,
    mirror: str | None,
    offline: bool,
    cache_dir: Path | None,
    retries: int,
    deadline: float,
    max_size: str,
    quiet: bool,
    fmt: str,
    output: str | None,
) -> int:
    """Assemble CUDA TRAIN (13.2, cu132 or an exact release 13.2.2) into --dest."""
    release = toolkit_data.resolve_release(train)
    target = Platform.parse(platform_name) if platform_name else host_platform()
    wanted = toolkit_data.expand_components(list(components))
    if mirror and source == Source.PYPI.value:
        raise UsageError("--mirror applies to --source redist; for pypi configure pip's index instead")
    limit = _parse_size(max_size)
    request = installer.InstallRequest(
        release=release,
        platform=target,
        components=wanted,
        dest=dest,
        source=Source(source),
        mirror=mirror,
        cache_dir=(cache_dir / "toolkit") if cache_dir else download.default_cache_dir(),
        fetch=download.FetchOptions(retries=retries, offline=offline, max_bytes=limit, deadline=deadline),
        limits=ExtractLimits(max_total_bytes=limit, max_member_bytes=limit),
    )
    with _Progress(quiet) as progress:
        notes = toolkit_data.release_notes(release, target.value)
        progress.stage(
            f"CUDA {release} ({train}) for {target.value}: {', '.join(wanted)}"
            + (f". {notes}" if notes else "")
        )
        info = installer.install(request, progress)
    write_report(render(TOOLKIT, fmt, ToolkitView(info, dest.absolute(), installed=True)), output)
    return int(ExitCode.OK)


@command.command("list")
@click.argument("directory", required=False, type=click.Path(file_okay=False, path_type=Path))
@format_option("toolkit")
@output_option()
def list_command(directory: Path | None, fmt: str, output: str | None) -> int:
    """Show the toolkit at DIRECTORY; without it, the trains and components cudaship can install."""
    if directory is not None:
        view = ToolkitView(installer.read_toolkit(directory), directory.absolute())
        write_report(render(TOOLKIT, fmt, view), output)
        return int(ExitCode.OK)
    catalog = ToolkitCatalog(
        trains=toolkit_data.trains(),
        releases=tuple(toolkit_data.releases()),
        components={n: toolkit_data.component_description(n) for n in toolkit_data.component_names()},
        sets={k: tuple(v) for k, v in toolkit_data.component_sets().items()},
    )
    write_report(render(TOOLKIT, fmt, catalog), output)
    return int(ExitCode.OK)


@command.command("verify")
@click.argument("directory", type=click.Path(file_okay=False, path_type=Path))
@format_option("toolkit")
@output_option()
def verify_command(directory: Path, fmt: str, output: str | None) -> int:
    """Check every file of the toolkit at DIRECTORY against its cudaship-toolkit.json (exit 1 on changes)."""
    info, problems = installer.verify(directory)
    write_report(render(TOOLKIT, fmt, ToolkitView(info, directory.absolute(), tuple(problems))), output)
    return int(ExitCode.FINDINGS if problems else ExitCode.OK)


@command.command("remove")
@click.argument("directory", type=click.Path(file_okay=False, path_type=Path))
@format_option("toolkit")
@output_option()
def remove_command(directory: Path, fmt: str, output: str | None) -> int:
    """Delete the toolkit at DIRECTORY (only a directory that cudaship assembled)."""
    info = installer.remove(directory)
    write_report(render(TOOLKIT, fmt, ToolkitView(info, directory.absolute(), removed=True)), output)
    return int(ExitCode.OK)


@command.command("env")
@click.argument("directory", type=click.Path(file_okay=False, path_type=Path))
@click.option(
    "--write",
    "target",
    type=click.Choice(["github", "dotenv", "shell"]),
    default=None,
    help="github appends CUDA_HOME/CUDA_PATH/CUDACXX to $GITHUB_ENV and the bin directories to "
    "$GITHUB_PATH; dotenv and shell are the same as --format dotenv / shell.",
)
@format_option("toolkit env", unset=True, help_text="Print in this syntax (default: shell).")
@output_option()
def env_command(directory: Path, target: str | None, fmt: str | None, output: str | None) -> int:
    """Print or write CUDA_HOME, CUDA_PATH and PATH for the toolkit at DIRECTORY."""
    info = installer.read_toolkit(directory)
    variables, bins, notes = layout.env_vars(directory.absolute(), info.platform)
    if target == "github":
        if output or fmt:
            raise UsageError("--write github appends to $GITHUB_ENV and $GITHUB_PATH; drop -o/--format")
        for key, value in variables.items():
            if "\n" in value or "\r" in value:
                raise ToolkitError(f"{key} holds a newline; cannot write it to GITHUB_ENV")
        text = "".join(f"{k}={v}\n" for k, v in variables.items())
        env_file = append_github_file("GITHUB_ENV", text, "--write github")
        wrote = f"{count(len(variables), 'variable')} to {env_file}"
        if bins:  # nothing is appended to GITHUB_PATH when the toolkit has no bin/
            path_file = append_github_file("GITHUB_PATH", "".join(f"{b}\n" for b in bins), "--write github")
            wrote += f" and {count(len(bins), 'directory')} to {path_file}"
        for note in notes:
            click.echo(f"cudaship: toolkit: note: {note}", err=True)
        click.echo(f"cudaship: toolkit: wrote {wrote}", err=True)
        return int(ExitCode.OK)
    if target is not None and fmt is not None and target != fmt.lower():
        raise UsageError(f"--write {target} and --format {fmt} disagree: give one")
    env = ToolkitEnv(variables, tuple(bins), envvars.get("PATH") or "", tuple(notes))
    write_report(render(TOOLKIT_ENV, fmt or target or "shell", env), output)
    return int(ExitCode.OK)
