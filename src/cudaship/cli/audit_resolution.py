"""``audit``'s options that pin the resolution of the requirements, so that the verdict is the same tomorrow:
``--constraint/-c FILE``, ``--exclude-newer DATE``, ``--replay REPORT`` and ``--write-constraints FILE``,
with ``[tool.cudaship.resolution]`` of the configuration; and the report's record of what was resolved.

Precedence: constraints add up (every file, the configuration's, a replayed report's: a version must satisfy
all of them); the cut-off date is ``--exclude-newer``, else the replayed report's, else the configuration's.
``--replay REPORT`` reads the ``resolution`` of a JSON report of ``audit``: every project pinned to the
version it resolved to, the index it asked (unless ``--index-url``), offline (unless ``--online``): the
answers come from the on-disk cache that run filled.
"""

from __future__ import annotations

import datetime as dt
import os
from collections.abc import Callable
from dataclasses import dataclass, replace
from pathlib import Path
from typing import Any, TypeVar

import click

from cudaship.checks.records import AuditReport
from cudaship.config import ProjectConfig
from cudaship.errors import PolicyError, UsageError
from cudaship.loaders import MAX_DOCUMENT, load_json
from cudaship.providers.constraints import (
    Constraints,
    constraints_text,
    inline_constraints,
    parse_date,
    parse_line,
    read_constraints,
)
from cudaship.render.escape import line
from cudaship.safe_read import read_regular
from cudaship.safe_write import write_text
from cudaship.schema import Table

F = TypeVar("F", bound=Callable[..., Any])

#: the keys of ``[tool.cudaship.resolution]``
CONFIG_KEYS = ("constraints", "constraint-files", "exclude-newer")


def resolution_options(f: F) -> F:
    """The four options, in the order ``--help`` lists them."""
    options = [
        click.option(
            "--constraint",
            "-c",
            "constraint_files",
            multiple=True,
            metavar="FILE",
            help="Only versions this constraints file allows (pip's syntax: name==1.2, specifiers, markers, "
            "-c FILE); repeatable, added to [tool.cudaship.resolution] constraints.",
        ),
        click.option(
            "--exclude-newer",
            "exclude_newer",
            metavar="DATE",
            default=None,
            help="Ignore the index's files uploaded after DATE (2026-11-01: 00:00 UTC that day, or an RFC "
            "3339 time), from its PEP 700 upload times; an index that gives none is warned about, "
            "not trusted.",
        ),
        click.option(
            "--replay",
            "replay",
            metavar="REPORT",
            default=None,
            help="Resolve as the JSON report REPORT recorded (its 'resolution'): every project pinned to its "
            "version, the same index, offline from the cache unless --online.",
        ),
        click.option(
            "--write-constraints",
            "write_constraints",
            metavar="FILE",
            default=None,
            help="Write what the requirements resolved to as a constraints file (name==version per project) "
            "for a later --constraint.",
        ),
    ]
    for option in reversed(options):
        f = option(f)
    return f


@dataclass(frozen=True)
class Pinning:
    """What pins this run's resolution."""

    constraints: Constraints = Constraints()  # noqa: RUF009 (frozen: one shared empty value is safe)
    exclude_newer: dt.datetime | None = None
    index_url: str | None = None  #: a replay: the index the report recorded
    offline: bool | None = None  #: a replay: True (the cache it filled)
    resolved_at: str | None = None  #: a replay: when the replayed report resolved


def pinning(
    config: ProjectConfig,
    constraint_files: tuple[str, ...],
    exclude_newer: str | None,
    replay: str | None,
) -> Pinning:
    """The pins from the configuration, the files, ``--exclude-newer`` and the replayed report; bad input is
    one line naming the file."""
    found = _from_config(config)
    for path in constraint_files:
        found = replace(found, constraints=found.constraints + read_constraints(path))
    if replay is not None:
        recorded = _from_report(replay)
        found = replace(
            found,
            constraints=found.constraints + recorded.constraints,
            exclude_newer=recorded.exclude_newer or found.exclude_newer,
            index_url=recorded.index_url,
            offline=True,
            resolved_at=recorded.resolved_at,
        )
    if exclude_newer is not None:
        found = replace(found, exclude_newer=parse_date(exclude_newer))
    return found


def _from_config(config: ProjectConfig) -> Pinning:
    section = config.data.get("resolution")
    if section is None:
        return Pinning()
    source = str(config.source) if config.source else None
    where = (
        "tool.cudaship.resolution"
        if config.source and config.source.name == "pyproject.toml"
        else "resolution"
    )
    table = Table.of(section, where, source, PolicyError)
    table.unknown(CONFIG_KEYS)
    shown = f"{config.source} [{where}]"
    try:
        constraints = inline_constraints(table.strings("constraints", single=False), shown)
    except UsageError as e:
        raise PolicyError(e.message) from None
    base = config.source.parent if config.source else Path.cwd()
    for name in table.strings("constraint-files", single=False, strip=False):
        constraints = constraints + read_constraints(name if os.path.isabs(name) else base / name)
    value = table.get("exclude-newer")
    when: dt.datetime | None = None
    if isinstance(value, dt.datetime):  # TOML's own date-time (2026-11-01T00:00:00Z)
        when = value if value.tzinfo else value.replace(tzinfo=dt.timezone.utc)
    elif isinstance(value, dt.date):  # TOML's date (2026-11-01): 00:00 UTC that day
        when = dt.datetime(value.year, value.month, value.day, tzinfo=dt.timezone.utc)
    elif isinstance(value, str):
        try:
            when = parse_date(value, f"{where}.exclude-newer")
        except UsageError as e:
            raise PolicyError(e.message, path=source) from None
    elif value is not None:
        raise table.wrong("exclude-newer", "a date (2026-11-01) or an RFC 3339 time", value)
    return Pinning(constraints, when)


def _from_report(path: str) -> Pinning:
    """The pins a JSON report of ``audit`` recorded."""
    if not Path(path).exists() and not Path(path).is_symlink():
        raise UsageError("--replay: no such report", path=path)
    doc = load_json(
        read_regular(path, MAX_DOCUMENT, error=UsageError, what="report"), error=UsageError, label=path
    )
    top = Table.of(doc, "", path, UsageError, "a JSON report of cudaship audit")
    value = top.get("resolution")
    if not isinstance(value, dict):
        raise UsageError(
            "--replay: no resolution recorded (a JSON report of cudaship audit --format json, from a version "
            "that records one)",
            path=path,
        )
    rec = Table.of(value, "resolution", path, UsageError)
    entries = []
    for row in rec.rows("projects", required=True, what="a list of objects"):
        text = f"{row.text('name')}=={row.text('version')}"
        marker = row.string("marker")
        entries.append(parse_line(text + (f"; {marker}" if marker else ""), f"{path}: {text}"))
    indexes = rec.strings("indexes", single=False)
    newer = rec.string("exclude_newer")
    return Pinning(
        Constraints(tuple(entries), (f"replay {path}",)),
        parse_date(newer, f"{path}: resolution.exclude_newer") if newer else None,
        indexes[0] if indexes else "",
        True,
        rec.string("resolved_at"),
    )


def finish(report: AuditReport, write_constraints: str | None) -> None:
    """Warn where ``--exclude-newer`` could not apply, and write the constraints file if asked."""
    res = report.resolution
    if res is None:
        return
    if res.undated:
        where = ", ".join(res.indexes) or "the index"
        click.echo(
            line(
                f"cudaship: warning: --exclude-newer: {where} gives no upload time (PEP 700) for "
                f"{', '.join(res.undated)}: their newest files were taken whatever their date"
            ),
            err=True,
        )
    if write_constraints is None:
        return
    header = [
        "cudaship audit: the versions the requirements resolved to (pip's constraints syntax)",
        f"index: {', '.join(res.indexes) or 'none'}; resolved at {res.resolved_at}"
        + (f"; uploads after {res.exclude_newer} ignored" if res.exclude_newer else ""),
        f"the same verdict later: cudaship audit -c {os.path.basename(write_constraints)} WHEEL...",
    ]
    write_text(write_constraints, constraints_text(res.projects, header))
