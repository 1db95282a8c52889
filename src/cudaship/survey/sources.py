"""Which wheels a survey reads: an index's project pages, a file of wheel URLs, or a local wheelhouse, then
the filters (latest N versions, platforms, upload dates), as :class:`~cudaship.survey.records.WheelRef`\\ s
in one canonical order.

- An index (:func:`from_index`): each project's page through the provider's :class:`IndexSource` (PEP 691
  JSON, or PEP 503 HTML where that is all the index serves), read fresh every run (no page cache: a second
  run must see the files uploaded since). A project the index does not have is bad input.
- A URL list (:func:`from_urls`): one wheel URL per line (``http(s)://`` or ``file://``), ``#`` starts a
  comment line, a ``#sha256=<hex>`` fragment gives the wheel's hash, and ``size=<bytes>`` and
  ``uploaded=<RFC 3339 time>`` words after the URL its size and upload time (what :func:`urls_text` writes
  from a selection, so a run from the list gives the rows the index's run gave).
- A wheelhouse (:func:`from_wheelhouse`): the ``*.whl`` files of a directory (not its subdirectories), each
  hashed here (sha256) and named by a ``file://`` URL.

Filters (:class:`Filters`): yanked files are always skipped (counted); ``platforms`` keeps wheels with a
platform tag of one of those OS (``any``: a pure wheel), read from the tags by
:func:`cudaship.knowledge.platforms.platform_from_tag`; ``uploaded_after``/``uploaded_before`` keep files
uploaded in ``[after, before)`` by PEP 700's ``upload-time`` and keep a file without one (counted as
undated); ``latest`` keeps, per project, the N newest versions that still have a wheel after the other
filters (by :mod:`packaging.version` ordering; pre-releases and development releases are left out unless
``pre``).

The canonical order: project name, then version newest first, then file name. Bad input (a file that cannot
be read, a line that is no wheel URL, a project the index does not have) raises :class:`UsageError`, one line
naming the file or project; this module never prints.
"""

from __future__ import annotations

import datetime as dt
import hashlib
import os
import re
import stat
import urllib.parse
import urllib.request
from collections.abc import Iterable, Sequence
from dataclasses import dataclass, field
from pathlib import Path

from packaging.utils import InvalidWheelFilename, canonicalize_name, parse_wheel_filename
from packaging.version import InvalidVersion, Version

from cudaship.errors import UsageError
from cudaship.knowledge.platforms import platform_from_tag
from cudaship.providers.cache import DiskCache
from cudaship.providers.constraints import format_date, parse_date
from cudaship.providers.http import Client, IndexUnavailable, NotFound
from cudaship.providers.index import IndexSource
from cudaship.providers.select import Candidate
from cudaship.survey.records import WheelRef

#: The platform names ``--platform`` takes: an OS of the wheel's platform tags, or ``any`` (a pure wheel).
PLATFORMS = ("linux", "windows", "macos", "any")
#: Most bytes a ``--urls`` or ``--projects`` file may hold (a list of a million URLs is ~100 MB).
MAX_LIST_BYTES = 256 << 20
_SHA256 = re.compile(r"[0-9a-fA-F]{64}")
_CHUNK = 1 << 20


@dataclass(frozen=True)
class Filters:
    """Which of the listed wheels are surveyed (see the module's docstring)."""

    latest: int | None = None  #: versions per project, newest first; None: every version
    pre: bool = False  #: with ``latest``: pre-releases and development releases count as versions
    platforms: tuple[str, ...] = ()  #: OS names of :data:`PLATFORMS`; empty: every platform
    uploaded_after: dt.datetime | None = None  #: kept: uploaded at or after this (UTC)
    uploaded_before: dt.datetime | None = None  #: kept: uploaded before this (UTC)

    def as_json(self) -> dict[str, object]:
        return {
            "latest": self.latest,
            "pre": self.pre,
            "platforms": list(self.platforms),
            "uploaded_after": format_date(self.uploaded_after) if self.uploaded_after else None,
            "uploaded_before": format_date(self.uploaded_before) if self.uploaded_before else None,
        }


@dataclass
class Selection:
    """The wheels chosen, in the canonical order, and what was left out on the way (counts)."""

    refs: list[WheelRef] = field(default_factory=list)
    listed: int = 0  #: wheel files the sources named
    yanked: int = 0  #: left out: yanked
    filtered: int = 0  #: left out by the platform, date or latest-N filters
    duplicates: int = 0  #: the same wheel (same key) named twice: surveyed once
    undated: int = 0  #: kept although the source gave no upload time (while a date filter was set)
    problems: list[str] = field(default_factory=list)  #: files the sources named that were left out, why
    page_requests: int = 0  #: index pages asked for
    page_bytes: int = 0
    #: hosts the wheels' URLs may point at (an index: its own, its file hosts, --index-host); None: each
    #: wheel's own host
    hosts: tuple[str, ...] | None = None

    @property
    def total_bytes(self) -> int:
        """The sources' own size of the chosen wheels (those with a known size)."""
        return sum(r.size or 0 for r in self.refs)

    @property
    def unsized(self) -> int:
        """Chosen wheels whose size the source did not give."""
        return sum(1 for r in self.refs if r.size is None)


@dataclass(frozen=True)
class _Listed:
    """A wheel file as a source names it, before the filters."""

    ref: WheelRef
    version: Version
    tags: frozenset[str]  #: platform tags of its file name
    uploaded: dt.datetime | None
    yanked: bool = False


# --- the sources ------------------------------------------------------------------------------------------


def read_projects(path: str | os.PathLike[str]) -> list[str]:
    """The project names of a ``--projects`` file: one per line, ``#`` comments and blank lines skipped."""
    names = []
    for number, text in _lines(path, "--projects"):
        name = text.split()[0]
        if not re.fullmatch(r"[A-Za-z0-9]([A-Za-z0-9._-]*[A-Za-z0-9])?", name):
            raise UsageError(f"line {number}: {name[:100]!r} is not a project name", path=os.fspath(path))
        names.append(name)
    return names


def from_index(
    url: str,
    projects: Sequence[str],
    filters: Filters,
    *,
    client: Client | None = None,
    allowed_hosts: Iterable[str] = (),
) -> Selection:
    """The wheels of ``projects`` on the index at ``url`` (a PEP 691 or PEP 503 simple index), filtered."""
    if urllib.parse.urlsplit(url).scheme not in ("http", "https"):
        raise UsageError(f"--index-url: {url[:200]!r} is not an http(s) URL")
    if not projects:
        raise UsageError("--index-url: no project named (PROJECT arguments or --projects FILE)")
    client = client or Client()
    source = IndexSource(url, DiskCache(None), client, allowed_hosts=allowed_hosts)
    listed: list[_Listed] = []
    seen: set[str] = set()
    for name in projects:
        project = str(canonicalize_name(name))
        if project in seen:
            continue
        seen.add(project)
        try:
            candidates = source.project_files(project)
        except NotFound:
            raise UsageError(f"--index-url {source.url}: no project {name!r} on this index") from None
        except IndexUnavailable as e:
            raise UsageError(f"--index-url {source.url}: {e}") from None
        listed += [_from_candidate(project, c) for c in candidates]
    selection = _select(listed, filters)
    selection.problems += source.problems
    selection.page_requests = client.fetched.requests
    selection.page_bytes = client.fetched.page_bytes
    selection.hosts = tuple(sorted(source.hosts))
    return selection


def from_urls(path: str | os.PathLike[str], filters: Filters) -> Selection:
    """The wheels a ``--urls`` file names, filtered."""
    label = os.fspath(path)
    listed = []
    for number, text in _lines(path, "--urls"):
        words = text.split()
        size: int | None = None
        uploaded: dt.datetime | None = None
        for word in words[1:]:
            if word.startswith("#"):
                break
            key, eq, value = word.partition("=")
            if eq and key == "size" and size is None and re.fullmatch(r"\d{1,15}", value):
                size = int(value)
            elif eq and key == "uploaded" and uploaded is None:
                uploaded = parse_date(value, f"{label}:{number}: uploaded=")
            elif "://" in word:
                raise UsageError(f"line {number}: more than one URL on a line", path=label)
            else:
                raise UsageError(
                    f"line {number}: {word[:100]!r} is neither size=<bytes> nor uploaded=<time> (given once)",
                    path=label,
                )
        listed.append(_from_url(words[0], f"{label}:{number}", size, uploaded))
    return _select(listed, filters)


def urls_text(refs: Iterable[WheelRef], header: Sequence[str] = ()) -> str:
    """A ``--urls`` file naming ``refs`` in their order: each URL with its ``#sha256=`` fragment (when known)
    and its ``size=`` and ``uploaded=`` words (when known), so :func:`from_urls` gives the same refs back;
    ``header`` lines first, as ``#`` comments."""
    lines = [f"# {' '.join(h.splitlines())}".rstrip() for h in header]
    for ref in refs:
        url = ref.url.partition("#")[0]
        words = [f"{url}#sha256={ref.sha256}" if ref.sha256 else url]
        if ref.size is not None:
            words.append(f"size={ref.size}")
        if ref.upload_time is not None:
            words.append(f"uploaded={ref.upload_time}")
        lines.append(" ".join(words))
    return "\n".join(lines) + "\n"


def from_wheelhouse(directory: str | os.PathLike[str], filters: Filters) -> Selection:
    """The ``*.whl`` files of ``directory``, hashed, filtered."""
    label = os.fspath(directory)
    try:
        info = os.stat(label)
        if not stat.S_ISDIR(info.st_mode):
            raise UsageError("--wheelhouse: not a directory", path=label)
        names = sorted(os.listdir(label))
    except OSError as e:
        raise UsageError(f"--wheelhouse: cannot read: {e.strerror or e}", path=label) from None
    listed = []
    problems = []
    for name in names:
        if not name.endswith(".whl"):
            continue
        path = Path(label, name).resolve()
        try:
            project, version, tags = _wheel_name(name)
        except UsageError as e:
            problems.append(f"{path}: {e.message}; left out")
            continue
        try:
            if not path.is_file():
                problems.append(f"{path}: not a regular file; left out")
                continue
            size, digest = _hash_file(path)
        except OSError as e:
            raise UsageError(f"--wheelhouse: cannot read: {e.strerror or e}", path=str(path)) from None
        ref = WheelRef(project, str(version), name, path.as_uri(), size, digest, None)
        listed.append(_Listed(ref, version, tags, None))
    selection = _select(listed, filters)
    selection.problems += problems
    return selection


# --- the filters ------------------------------------------------------------------------------------------


def _select(listed: list[_Listed], filters: Filters) -> Selection:
    out = Selection(listed=len(listed))
    kept: list[_Listed] = []
    dated = filters.uploaded_after is not None or filters.uploaded_before is not None
    keys: set[str] = set()
    for item in listed:
        if item.yanked:
            out.yanked += 1
            continue
        if item.ref.key in keys:
            out.duplicates += 1
            continue
        keys.add(item.ref.key)
        if filters.platforms and not (_oses(item.tags) & set(filters.platforms)):
            out.filtered += 1
            continue
        if dated:
            if item.uploaded is None:
                out.undated += 1
            elif (filters.uploaded_after is not None and item.uploaded < filters.uploaded_after) or (
                filters.uploaded_before is not None and item.uploaded >= filters.uploaded_before
            ):
                out.filtered += 1
                continue
        kept.append(item)
    if filters.latest is not None:
        chosen = _latest(kept, filters.latest, filters.pre)
        out.filtered += len(kept) - len(chosen)
        kept = chosen
    out.refs = [item.ref for item in _canonical(kept)]
    return out


def _latest(items: list[_Listed], n: int, pre: bool) -> list[_Listed]:
    """The items of each project's ``n`` newest versions (those that still have a wheel)."""
    versions: dict[str, set[Version]] = {}
    for item in items:
        v = item.version
        if not pre and (v.is_prerelease or v.is_devrelease):
            continue
        versions.setdefault(item.ref.project, set()).add(v)
    newest = {project: set(sorted(vs, reverse=True)[:n]) for project, vs in versions.items()}
    return [i for i in items if i.version in newest.get(i.ref.project, set())]


def _canonical(items: list[_Listed]) -> list[_Listed]:
    """Project, then version newest first, then file name (stable sorts, last key first)."""
    out = sorted(items, key=lambda i: i.ref.filename)
    out.sort(key=lambda i: i.version, reverse=True)
    out.sort(key=lambda i: i.ref.project)
    return out


def _oses(tags: frozenset[str]) -> set[str]:
    return {platform_from_tag(tag).os for tag in tags}


# --- reading ----------------------------------------------------------------------------------------------


def _wheel_name(filename: str) -> tuple[str, Version, frozenset[str]]:
    """(normalized project, version, platform tags) of a wheel file name; UsageError when it is none."""
    try:
        name, version, _build, tags = parse_wheel_filename(filename)
    except (InvalidWheelFilename, InvalidVersion) as e:
        raise UsageError(f"{filename[:200]!r} is not a wheel file name ({e})") from None
    return str(name), version, frozenset(t.platform for t in tags)


def _from_candidate(project: str, c: Candidate) -> _Listed:
    try:
        _name, _version, tags = _wheel_name(c.filename)
    except UsageError:
        tags = frozenset()
    uploaded = format_date(c.upload_time) if c.upload_time is not None else None
    ref = WheelRef(project, str(c.version), c.filename, c.location, c.size, c.sha256, uploaded)
    return _Listed(ref, c.version, tags, c.upload_time, c.yanked)


def _from_url(text: str, where: str, size: int | None = None, uploaded: dt.datetime | None = None) -> _Listed:
    url, _, fragment = text.partition("#")
    parts = urllib.parse.urlsplit(url)
    if parts.scheme not in ("http", "https", "file") or (parts.scheme != "file" and not parts.hostname):
        raise UsageError(f"{where}: {text[:200]!r} is not an http(s):// or file:// URL")
    digest = None
    if fragment:
        algo, _, value = fragment.partition("=")
        if algo != "sha256" or not _SHA256.fullmatch(value):
            raise UsageError(
                f"{where}: the fragment {('#' + fragment)[:100]!r} is not #sha256=<64 hex digits>"
            )
        digest = value.lower()
    filename = urllib.parse.unquote(parts.path.rsplit("/", 1)[-1])
    try:
        project, version, tags = _wheel_name(filename)
    except UsageError as e:
        raise UsageError(f"{where}: {e.message}") from None
    upload_time = format_date(uploaded) if uploaded is not None else None
    ref = WheelRef(project, str(version), filename, url, size, digest, upload_time)
    return _Listed(ref, version, tags, uploaded)


def _lines(path: str | os.PathLike[str], option: str) -> list[tuple[int, str]]:
    """(line number, stripped text) of the lines of a list file that are neither blank nor ``#`` comments."""
    label = os.fspath(path)
    try:
        with open(label, "rb") as f:
            if not stat.S_ISREG(os.fstat(f.fileno()).st_mode):
                raise UsageError(f"{option}: not a regular file", path=label)
            data = f.read(MAX_LIST_BYTES + 1)
    except OSError as e:
        raise UsageError(f"{option}: cannot read: {e.strerror or e}", path=label) from None
    if len(data) > MAX_LIST_BYTES:
        raise UsageError(f"{option}: larger than {MAX_LIST_BYTES >> 20} MiB", path=label)
    try:
        text = data.decode("utf-8-sig")
    except UnicodeDecodeError as e:
        raise UsageError(f"{option}: not UTF-8 text (byte {e.start})", path=label) from None
    out = []
    for number, raw in enumerate(text.splitlines(), 1):
        stripped = raw.strip()
        if stripped and not stripped.startswith("#"):
            out.append((number, stripped))
    return out


def _hash_file(path: Path) -> tuple[int, str]:
    """(size, sha256 hex) of a file, read in chunks."""
    h = hashlib.sha256()
    size = 0
    with open(path, "rb") as f:
        while chunk := f.read(_CHUNK):
            h.update(chunk)
            size += len(chunk)
    return size, h.hexdigest()


def file_path(url: str) -> str:
    """The local path of a ``file://`` URL (what a wheelhouse's refs hold)."""
    return urllib.request.url2pathname(urllib.parse.urlsplit(url).path)
