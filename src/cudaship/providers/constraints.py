"""What pins a resolution so that the audit gives the same verdict tomorrow: constraints (pip's constraints
syntax), a cut-off date for the index's uploads (``--exclude-newer``, PEP 700 ``upload-time``), and the record
of what a run resolved (the report's ``resolution``), which a later run reads back as constraints.

A constraints file is read as pip reads one: one requirement per line (``name`` and a specifier, with an
optional ``; marker``), ``#`` comments, ``\\`` continuations, ``-c FILE`` / ``--constraint FILE`` (relative to
the file) and per-requirement ``--hash`` options (ignored: the audit reads metadata, not the file's bytes).
As pip does, a constraint names no extras and no URL; any other option line is refused (one line naming the
file and the line). A constraint only narrows: it never adds a project to the closure.
"""

from __future__ import annotations

import datetime as dt
import os
import re
from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from pathlib import Path

from packaging.markers import Marker
from packaging.requirements import InvalidRequirement, Requirement
from packaging.specifiers import SpecifierSet
from packaging.utils import canonicalize_name

from cudaship.errors import UsageError
from cudaship.providers.records import Pin, ResolvedProject, Target
from cudaship.safe_read import read_regular
from cudaship.wheel.metadata import marker_environment

#: a constraints file larger than this is refused (a lock file of 10,000 projects is ~1 MiB)
MAX_CONSTRAINTS_BYTES = 16 << 20
#: ``-c`` inside a constraints file, at most this deep (a cycle is refused before)
MAX_NESTING = 8

_HASH_OPTION = re.compile(r"\s--hash[=\s]\S+")


@dataclass(frozen=True)
class Constraint:
    """One constraint line: a canonical project name, a specifier, the marker it holds under (or None)."""

    name: str
    specifier: str
    marker: str | None
    origin: str  #: ``constraints.txt:3``, ``pyproject.toml [tool.cudaship.resolution]``, ``replay r.json``


@dataclass(frozen=True)
class Constraints:
    """Constraints from every place they were given (files, configuration, a replayed report)."""

    entries: tuple[Constraint, ...] = ()
    origins: tuple[str, ...] = ()  #: where they came from, in order: file paths, the configuration, a report

    def __add__(self, other: Constraints) -> Constraints:
        return Constraints(self.entries + other.entries, self.origins + other.origins)

    def __bool__(self) -> bool:
        return bool(self.entries)

    def for_env(self, env: Mapping[str, str]) -> dict[str, SpecifierSet]:
        """Project -> the intersection of the specifiers of the constraints that hold in ``env``."""
        out: dict[str, SpecifierSet] = {}
        for c in self.entries:
            if c.marker is not None and not _holds(c.marker, env):
                continue
            out[c.name] = out.get(c.name, SpecifierSet()) & SpecifierSet(c.specifier)
        return out


def _holds(marker: str, env: Mapping[str, str]) -> bool:
    try:
        return bool(Marker(marker).evaluate(dict(env)))
    except Exception:  # as pip: a marker that cannot be evaluated does not apply
        return False


def parse_line(text: str, origin: str, error: type[UsageError] = UsageError) -> Constraint:
    """One requirement of a constraints file (options already taken off)."""
    try:
        req = Requirement(text)
    except InvalidRequirement as e:
        raise error(f"{origin}: not a requirement: {text[:200]!r} ({e})") from None
    if req.url:
        raise error(f"{origin}: a constraint names a version, not a URL ({req.name} @ ...)")
    if req.extras:
        raise error(f"{origin}: a constraint cannot name extras ({req.name}[{','.join(sorted(req.extras))}])")
    return Constraint(
        canonicalize_name(req.name), str(req.specifier), str(req.marker) if req.marker else None, origin
    )


def _logical_lines(text: str) -> Iterable[tuple[int, str]]:
    """(line number, text) with comments removed and ``\\`` continuations joined, as pip reads them."""
    pending = ""
    start = 0
    for number, raw in enumerate(text.splitlines(), 1):
        if not pending:
            start = number
        line = "" if raw.lstrip().startswith("#") else re.sub(r"(^|\s)#.*$", "", raw)
        if line.endswith("\\"):
            pending += line[:-1] + " "
            continue
        yield start, (pending + line).strip()
        pending = ""
    if pending.strip():
        yield start, pending.strip()


def read_constraints(path: str | os.PathLike[str], _seen: tuple[Path, ...] = ()) -> Constraints:
    """The constraints of a file (and of the files it names with ``-c``); bad input is one UsageError line
    naming the file and the line."""
    shown = os.fspath(path)
    here = Path(path)
    try:
        key = here.resolve()
    except OSError:
        key = here.absolute()
    if key in _seen:
        raise UsageError(f"{shown}: names itself through -c (a cycle)")
    if len(_seen) >= MAX_NESTING:
        raise UsageError(f"{shown}: -c nested more than {MAX_NESTING} levels")
    if not here.exists() and not here.is_symlink():
        raise UsageError("no such constraints file", path=shown)
    data = read_regular(here, MAX_CONSTRAINTS_BYTES, error=UsageError, what="constraints file")
    try:
        text = data.decode("utf-8-sig")
    except UnicodeDecodeError:
        raise UsageError("not a UTF-8 text file (a constraints file)", path=shown) from None
    out = Constraints((), (shown,))
    for number, line in _logical_lines(text):
        if not line:
            continue
        origin = f"{shown}:{number}"
        if line.startswith("-"):
            option, _, value = line.partition(" ")
            option, eq, inline = option.partition("=")
            value = (inline if eq else value).strip()
            if option in ("-c", "--constraint") and value:
                nested = Path(value) if Path(value).is_absolute() else here.parent / value
                out = out + read_constraints(nested, (*_seen, key))
                continue
            raise UsageError(
                f"{origin}: {option} is not read in a constraints file by cudaship audit "
                "(only requirements and -c FILE)"
            )
        line = _HASH_OPTION.sub("", " " + line).strip()
        out = out + Constraints((parse_line(line, origin),), ())
    return out


def inline_constraints(lines: Iterable[str], origin: str) -> Constraints:
    """Constraints given as strings (``[tool.cudaship.resolution] constraints``), each checked as a file's."""
    entries = tuple(parse_line(text, f"{origin}: {text!r}") for text in lines)
    return Constraints(entries, (origin,) if entries else ())


# --- dates -------------------------------------------------------------------------------------------------


def parse_date(text: str, what: str = "--exclude-newer") -> dt.datetime:
    """A cut-off time, UTC: an RFC 3339 time (``2026-11-01T12:00:00Z``, an offset, or none: UTC) or a date
    (``2026-11-01``: 00:00:00 UTC that day, whatever this machine's time zone)."""
    value = text.strip()
    try:
        if re.fullmatch(r"\d{4}-\d{2}-\d{2}", value):
            day = dt.date.fromisoformat(value)
            return dt.datetime(day.year, day.month, day.day, tzinfo=dt.timezone.utc)
        when = dt.datetime.fromisoformat(value.replace("z", "Z").replace("Z", "+00:00"))
    except ValueError:
        raise UsageError(
            f"{what} {text[:100]!r}: not a date (2026-11-01) or an RFC 3339 time (2026-11-01T12:00:00Z)"
        ) from None
    if when.tzinfo is None:
        when = when.replace(tzinfo=dt.timezone.utc)
    return when.astimezone(dt.timezone.utc)


def format_date(when: dt.datetime) -> str:
    """``2026-11-01T00:00:00Z``: the one way a time is written in a report and a constraints file."""
    return when.astimezone(dt.timezone.utc).strftime("%Y-%m-%dT%H:%M:%SZ")


def upload_time(value: object) -> dt.datetime | None:
    """PEP 700's ``upload-time`` (``2026-11-01T12:00:00.123456Z``), or None when absent or unreadable."""
    if not isinstance(value, str):
        return None
    try:
        return parse_date(value, "upload-time")
    except UsageError:
        return None


# --- the record of a resolution ----------------------------------------------------------------------------


def target_marker(target: Target) -> str:
    """The PEP 508 marker that holds on ``target`` only: its OS, machine and Python version."""
    env = marker_environment(target.os, target.machine, target.python)
    parts = [f"sys_platform == '{env['sys_platform']}'"]
    if target.machine is not None and env.get("platform_machine"):
        parts.append(f"platform_machine == '{env['platform_machine']}'")
    parts.append(f"python_version == '{target.python}'")
    return " and ".join(parts)


def target_label(target: Target) -> str:
    """``linux x86_64 3.12``."""
    return " ".join(x for x in (target.os, target.machine, target.python) if x)


def resolved_projects(pins: Iterable[Pin]) -> tuple[ResolvedProject, ...]:
    """Every project -> version the closures resolved, sorted by name then version; a project resolved to
    different versions for different targets gets one entry per version, each with its targets' marker."""
    by_name: dict[str, dict[str, dict[Target, str]]] = {}
    for p in pins:
        by_name.setdefault(p.name, {}).setdefault(p.version, {})[p.target] = p.source
    out: list[ResolvedProject] = []
    for name in sorted(by_name):
        versions = by_name[name]
        for version in sorted(versions):
            targets = versions[version]
            ordered = sorted(targets, key=lambda t: (t.os, t.machine or "", t.python))
            kinds = sorted(set(targets.values()))
            marker = None
            if len(versions) > 1:
                marker = " or ".join(f"({target_marker(t)})" for t in ordered)
            out.append(
                ResolvedProject(
                    name, version, "+".join(kinds), tuple(target_label(t) for t in ordered), marker
                )
            )
    return tuple(out)


def constraints_text(projects: Iterable[ResolvedProject], header: Iterable[str]) -> str:
    """A constraints file (pip's syntax) pinning every resolved project; ``header``: comment lines."""
    lines = [f"# {h}" for h in header]
    lines += [p.constraint for p in projects]
    return "\n".join(lines) + "\n"
