"""``cudaship survey``: every wheel of an index's projects, a URL list or a wheelhouse read into one dataset
(one row per wheel x native library), resumable; the summary of the run on stdout (docs/survey.md)."""

from __future__ import annotations

import contextlib
import importlib
import signal
import threading
import urllib.parse
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import click

from cudaship import cachedir, envvars
from cudaship.cli.common import (
    cache_dir_option,
    details_option,
    format_option,
    output_dir_option,
    platform_option,
    progress_option,
    show_progress,
    text_style,
)
from cudaship.errors import UsageError
from cudaship.render.escape import line
from cudaship.render.output import write_report
from cudaship.render.table import SURVEY, render
from cudaship.safe_write import check_writable, write_text
from cudaship.survey import engine as survey_engine
from cudaship.survey import sources, store
from cudaship.survey.records import SurveyOptions, WheelOutcome, WheelRef
from cudaship.words import byte_count, count


def _url(option: str, value: str) -> str:
    if urllib.parse.urlsplit(value).scheme not in ("http", "https"):
        raise UsageError(f"{option}: {value[:200]!r} is not an http(s) URL")
    return value


@click.command("survey")
@click.argument("projects", nargs=-1)
@click.option(
    "--index-url",
    default=None,
    metavar="URL",
    help="A simple package index (PEP 691 JSON or PEP 503 HTML) whose PROJECTs' wheels are surveyed; "
    "default: $CUDASHIP_INDEX_URL when PROJECTs are named without --urls or --wheelhouse.",
)
@click.option(
    "--projects",
    "projects_file",
    default=None,
    metavar="FILE",
    help="Project names, one per line ('#' comments), added to the PROJECT arguments (with --index-url).",
)
@click.option(
    "--urls",
    "urls_file",
    default=None,
    metavar="FILE",
    help="Survey the wheels this file names: one http(s):// or file:// URL per line, '#' comments, an "
    "optional #sha256=<hex> fragment.",
)
@click.option(
    "--wheelhouse",
    default=None,
    metavar="DIR",
    help="Survey the *.whl files of this directory (not its subdirectories).",
)
@click.option(
    "--write-urls",
    default=None,
    metavar="FILE",
    help="Also write the wheels selected (after the filters, those already in the dataset included) to FILE "
    "as a --urls list (URL#sha256=..., size=, uploaded=), before surveying: the run's file list, from which "
    "'--urls FILE' surveys the same wheels again.",
)
@output_dir_option("The survey directory: parts/, survey.json, rows.jsonl, rows.parquet")
@click.option(
    "--latest",
    type=click.IntRange(min=1),
    default=None,
    metavar="N",
    help="Only the N newest versions of each project that still have a wheel after the other filters "
    "(pre-releases do not count unless --pre).",
)
@click.option("--pre", is_flag=True, help="With --latest: pre-releases and development releases count too.")
@platform_option(
    "Only wheels for this OS (from their platform tags; any: pure wheels)",
    sources.PLATFORMS,
    "every platform",
    dest="platforms",
    choice=True,
    multiple=True,
)
@click.option(
    "--uploaded-after",
    default=None,
    metavar="DATE",
    help="Only files uploaded at or after DATE (2026-01-31 or an RFC 3339 time; PEP 700 upload-time); a file "
    "the index gives no time for is kept and counted as undated.",
)
@click.option(
    "--uploaded-before",
    default=None,
    metavar="DATE",
    help="Only files uploaded before DATE (as --uploaded-after).",
)
@click.option(
    "--index-host",
    "index_hosts",
    multiple=True,
    metavar="HOST",
    help="Another host the index's file URLs may point at (repeatable); the index's own host and its known "
    "file hosts are always allowed.",
)
@click.option(
    "--engine",
    type=click.Choice(survey_engine.ENGINES),
    default="local",
    show_default=True,
    help="Where the wheels are surveyed: a local process pool, or a Dask or Ray cluster (pip install "
    "'cudaship[dask]' / 'cudaship[ray]').",
)
@click.option(
    "--scheduler",
    default=None,
    metavar="ADDRESS",
    help="With --engine dask: a running Dask scheduler (tcp://host:8786) whose workers see DIR at the same "
    "path; default: a local cluster of --workers processes.",
)
@click.option(
    "--workers",
    "-j",
    "workers",
    type=click.IntRange(1, 1024),
    default=None,
    help="Worker processes (default: the usable CPUs, at most 4).",
)
@click.option(
    "--no-audit",
    is_flag=True,
    help="Do not run the audit per wheel (the audit_* columns stay empty): faster, inspect-only rows.",
)
@click.option(
    "--requirements-index",
    default=None,
    metavar="URL",
    help="Where the audit looks declared requirements up (a PEP 691 index); default: cudaship's knowledge "
    "table only, no network.",
)
@click.option(
    "--retry-errors",
    is_flag=True,
    help="Survey again the wheels whose rows say they could not be read.",
)
@details_option()
@format_option("survey", help_text="Format of the run's summary.")
@click.option(
    "--report",
    default=None,
    metavar="FILE.html",
    help="Also write the dataset's HTML report (coverage by capability, bytes per arch, CUDA majors over "
    "time) to FILE.html.",
)
@cache_dir_option("the member cache (facts of native members by their RECORD sha256)")
@progress_option("wheels surveyed, by their size on the index")
def command(
    projects: tuple[str, ...],
    index_url: str | None,
    projects_file: str | None,
    urls_file: str | None,
    wheelhouse: str | None,
    write_urls: str | None,
    output: str,
    latest: int | None,
    pre: bool,
    platforms: tuple[str, ...],
    uploaded_after: str | None,
    uploaded_before: str | None,
    index_hosts: tuple[str, ...],
    engine: str,
    scheduler: str | None,
    workers: int | None,
    no_audit: bool,
    requirements_index: str | None,
    retry_errors: bool,
    details: bool,
    fmt: str,
    report: str | None,
    cache_dir: Path | None,
    progress: bool | None,
) -> int:
    """Survey every wheel of PROJECTs on an index (or of a URL list or a wheelhouse) into a dataset in
    DIR: one row per wheel and native library (CUDA train, runtime linkage, SASS and PTX per arch, bytes per
    arch, minimum driver, vendored NVIDIA libraries, declared NVIDIA requirements, audit verdict), as JSON
    Lines and Parquet. A run that stops (Ctrl-C, a kill) keeps every complete part; the next run over the
    same sources surveys only the wheels no part holds yet. Wheels that cannot be read are rows with an
    error, counted in the summary, not a failure of the command.
    """
    from cudaship.providers.constraints import parse_date  # the survey's modules: only when it runs

    for value in (report, write_urls):
        if value is not None:
            check_writable(value, error=UsageError)
    given = [name for name, value in (("--urls", urls_file), ("--wheelhouse", wheelhouse)) if value]
    if index_url is not None:
        given.insert(0, "--index-url")
    if len(given) > 1:
        raise UsageError(f"{' and '.join(given)}: give one source of wheels")
    names = list(projects) + (sources.read_projects(projects_file) if projects_file else [])
    if not given:
        index_url = envvars.get("CUDASHIP_INDEX_URL") or None
        if index_url is None or not names:
            raise UsageError(
                "no wheels to survey: give --index-url URL with PROJECTs, --urls FILE or --wheelhouse DIR"
            )
    elif names and index_url is None:
        raise UsageError(f"PROJECT and --projects go with --index-url, not {given[0]}")
    filters = sources.Filters(
        latest=latest,
        pre=pre,
        platforms=tuple(dict.fromkeys(platforms)),
        uploaded_after=parse_date(uploaded_after, "--uploaded-after") if uploaded_after else None,
        uploaded_before=parse_date(uploaded_before, "--uploaded-before") if uploaded_before else None,
    )
    if requirements_index is not None:
        _url("--requirements-index", requirements_index)
    if scheduler is not None and engine != "dask":
        raise UsageError("--scheduler goes with --engine dask")
    if engine != "local":
        survey_engine.check_engine(engine)  # a missing extra: one line, before any page is read
    hosts: tuple[str, ...] | None = None
    if index_url is not None:
        _url("--index-url", index_url)
        selection = sources.from_index(index_url, names, filters, allowed_hosts=index_hosts)
        source: dict[str, Any] = {"kind": "index", "url": index_url, "projects": names}
        hosts = selection.hosts
    elif urls_file is not None:
        selection = sources.from_urls(urls_file, filters)
        source = {"kind": "urls", "file": str(Path(urls_file).resolve())}
    else:
        assert wheelhouse is not None
        selection = sources.from_wheelhouse(wheelhouse, filters)
        source = {"kind": "wheelhouse", "directory": str(Path(wheelhouse).resolve())}
    options = SurveyOptions(
        cache_dir=str(cache_dir or cachedir.folder("survey")),
        audit=not no_audit,
        requirements_index=requirements_index,
        hosts=hosts,
        details=details,
    )
    for problem in selection.problems:
        click.echo(line(f"cudaship: note: {problem}"), err=True)
    if write_urls is not None:
        write_text(write_urls, _url_list(selection, source, filters), error=UsageError)
    with _terminate_as_interrupt():
        summary = _run(
            selection, options, output, source, filters, retry_errors, engine, scheduler, workers, progress
        )
    for damaged in summary.damaged:
        click.echo(line(f"cudaship: warning: {damaged}"), err=True)
    if not store.has_pyarrow():
        click.echo(
            f"cudaship: note: rows.parquet not written: pyarrow is not installed ({store.SURVEY_EXTRA})",
            err=True,
        )
    write_report(render(SURVEY, fmt, summary, text_style(None)), None)
    if report is not None:
        write_text(report, _html(store.read_rows(output), store.read_manifest(output)), error=UsageError)
    return 0


@contextlib.contextmanager
def _terminate_as_interrupt() -> Iterator[None]:
    """While the survey runs, SIGTERM (``kill PID``, a supervisor, a CI job's timeout: sent to this process
    alone) is answered as Ctrl-C is: the completed wheels written as a part, the workers ended, the run
    ``interrupted``, ``cudaship: aborted``, exit 130. Python's default for SIGTERM ends this process at once
    and left the fork server and its workers running, orphaned, holding its output open."""
    if threading.current_thread() is not threading.main_thread():
        yield
        return

    def interrupt(signum: int, frame: Any) -> None:
        raise KeyboardInterrupt

    previous = signal.signal(signal.SIGTERM, interrupt)
    try:
        yield
    finally:
        signal.signal(signal.SIGTERM, previous)


def _run(
    selection: sources.Selection,
    options: SurveyOptions,
    dest: str,
    source: dict[str, Any],
    filters: sources.Filters,
    retry_errors: bool,
    engine: str,
    scheduler: str | None,
    workers: int | None,
    progress: bool | None,
) -> survey_engine.SurveySummary:
    def go(on_start: Any = None, on_outcome: Any = None) -> survey_engine.SurveySummary:
        return survey_engine.survey(
            selection,
            options,
            dest,
            sources=[source],
            filters=filters,
            retry_errors=retry_errors,
            engine=engine,
            workers=workers,
            on_start=on_start,
            on_outcome=on_outcome,
            address=scheduler,
        )

    if not show_progress(progress):
        return go()
    from cudaship.cli.progress import ByteProgress

    with ByteProgress("surveying") as bar:

        def start(refs: list[WheelRef]) -> None:
            bar.planned(sum(r.size or 0 for r in refs))

        def done(outcome: WheelOutcome) -> None:
            bar.label(outcome.ref.filename)
            bar.advanced(outcome.ref.size or 0)

        return go(start, done)


def _url_list(selection: sources.Selection, source: dict[str, Any], filters: sources.Filters) -> str:
    """The ``--write-urls`` file: the selection as a ``--urls`` list, with what chose it as comments."""
    what = {k: v for k, v in filters.as_json().items() if v not in (None, False, [])}
    kind = source["kind"]
    origin = source.get({"index": "url", "urls": "file"}.get(kind, "directory"))
    header = [
        f"wheels selected by cudaship survey at {store.now_text()}",
        f"source: {kind} {origin}"
        + (f", {count(len(source['projects']), 'project')}" if kind == "index" else ""),
        "filters: "
        + (", ".join(f"{k}={','.join(v) if isinstance(v, list) else v}" for k, v in what.items()) or "none"),
        f"{count(len(selection.refs), 'wheel')}, {byte_count(selection.total_bytes)}"
        + (f" ({selection.unsized} of unknown size)" if selection.unsized else ""),
        "survey them again: cudaship survey --urls THIS_FILE -o DIR",
    ]
    return sources.urls_text(selection.refs, header)


def _html(rows: list[dict[str, Any]], manifest: dict[str, Any]) -> str:
    """The dataset's HTML report (:func:`cudaship.render.survey_html.render_html`)."""
    try:
        module = importlib.import_module("cudaship.render.survey_html")
    except ModuleNotFoundError as e:
        if e.name == "cudaship.render.survey_html":
            raise UsageError("--report: the HTML report is not in this version of cudaship") from None
        raise UsageError(f"--report needs {e.name}, which is not installed: {store.SURVEY_EXTRA}") from None
    html: str = module.render_html(rows, manifest)
    return html
