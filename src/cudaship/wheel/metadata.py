"""A wheel's own metadata: METADATA, WHEEL and RECORD, read from its ``.dist-info`` directory.

* METADATA: name, version (with its local tag, ``+cu132``) and Requires-Dist, whose environment markers are
  evaluated for the wheel's OWN target platform (from its WHEEL tags), never for the machine running cudaship.
* WHEEL: the compatibility tags, turned into the operating system and machine the wheel targets.
* RECORD: every file's hash and size; :class:`RecordVerifier` checks each member as it is streamed (the member
  is read once, by the caller) and reports mismatches, files RECORD lists that are missing, files it does not
  list and names that are not valid wheel paths (:mod:`cudaship.wheel.names`).

Everything here takes bytes or chunks; nothing reads a path. Problems raise :class:`WheelError` with one line.
"""

from __future__ import annotations

import base64
import csv
import hashlib
import io
import re
from collections.abc import Iterable, Iterator, Mapping
from dataclasses import dataclass, field
from email.message import Message
from email.parser import HeaderParser

from packaging.markers import InvalidMarker, Marker, UndefinedComparison, UndefinedEnvironmentName
from packaging.requirements import InvalidRequirement, Requirement
from packaging.utils import canonicalize_name
from packaging.version import InvalidVersion, Version

from cudaship.errors import WheelError
from cudaship.knowledge.platforms import marker_values
from cudaship.wheel.names import name_problem
from cudaship.wheel.records import (
    DeclaredRequirement,
    DistInfo,
    InstallLink,
    Metadata,
    RecordEntry,
    RecordProblem,
    WheelFile,
)
from cudaship.wheel.variant import VARIANT_JSON, split_label, wheel_variant

#: Largest METADATA and WHEEL read (inspect and audit alike); real METADATA with a long description is a few
#: hundred KiB.
MAX_METADATA_BYTES = 4 << 20
#: Largest RECORD read, and most rows it may have (torch's RECORD: 1.5 MB, about 15,000 rows).
MAX_RECORD_BYTES = 16 << 20
MAX_RECORD_ROWS = 250_000
#: Most Requires-Dist entries, and the longest one, accepted (real wheels: tens).
MAX_REQUIREMENTS = 10_000
MAX_REQUIREMENT_LENGTH = 4096
#: Longest Name and Version accepted (PEP 440 versions of real releases: under 40 characters; a version of
#: thousands of digits would otherwise reach Python's 4,300-digit int limit).
MAX_NAME_LENGTH = 256
MAX_VERSION_LENGTH = 128
#: Longest Name, Version or Tag value kept, and most tags kept, where METADATA and WHEEL are read leniently
#: (:func:`declared_fields`: inspect's facts of a wheel).
MAX_FIELD = 256
MAX_TAGS = 1000


# --- METADATA
# -------------------------------------------------------------------------------------------------


def _headers(data: bytes) -> Message:
    """The header block of METADATA or WHEEL (UTF-8, as the core metadata spec says).

    Decoded before parsing: parsing bytes keeps undecodable bytes as surrogates, and the email package then
    hands such a value back as an ``email.header.Header`` object, not a ``str``.
    """
    return HeaderParser().parsestr(data.decode("utf-8", errors="replace"))


def parse_metadata(data: bytes, *, strict: bool = True) -> Metadata:
    """Parse METADATA (an RFC 822 style header block); a missing Name or Version is an error.

    ``strict``: the Version must be a PEP 440 version (a wheel's own METADATA). Not strict, any Version is
    taken as written (an installed distribution's, or a dependency's: legacy versions exist and are skipped
    where a version is compared), its local tag read where it parses."""
    if len(data) > MAX_METADATA_BYTES:
        raise WheelError(f"METADATA is {len(data)} bytes, over the {MAX_METADATA_BYTES} byte limit")
    try:
        message = _headers(data)
    except Exception as e:  # the email parser is lenient; be safe anyway
        raise WheelError(f"METADATA is unreadable: {e}") from e
    name = str(message.get("Name") or "").strip()
    version = str(message.get("Version") or "").strip()
    if not name:
        raise WheelError("METADATA has no Name")
    if len(name) > MAX_NAME_LENGTH:
        raise WheelError(f"METADATA Name is {len(name)} characters long, over the limit of {MAX_NAME_LENGTH}")
    if not version:
        raise WheelError("METADATA has no Version")
    if len(version) > MAX_VERSION_LENGTH:
        raise WheelError(
            f"METADATA Version is {len(version)} characters long, over the limit of {MAX_VERSION_LENGTH}"
        )
    local = _local_tag(version)
    if strict and local is _INVALID:
        raise WheelError(f"METADATA Version {version!r} is not a valid version")
    raw_requires = message.get_all("Requires-Dist") or ()
    if len(raw_requires) > MAX_REQUIREMENTS:
        raise WheelError(
            f"METADATA has {len(raw_requires)} Requires-Dist entries, over the limit of {MAX_REQUIREMENTS}"
        )
    requires = tuple(" ".join(str(v).split()) for v in raw_requires)
    for text in requires:
        if len(text) > MAX_REQUIREMENT_LENGTH:
            raise WheelError(
                f"METADATA has a Requires-Dist entry of {len(text)} characters, over the limit of "
                f"{MAX_REQUIREMENT_LENGTH}"
            )
    raw_extras = message.get_all("Provides-Extra") or ()
    if len(raw_extras) > MAX_REQUIREMENTS:
        raise WheelError(
            f"METADATA has {len(raw_extras)} Provides-Extra entries, over the limit of {MAX_REQUIREMENTS}"
        )
    extras = tuple(str(v).strip() for v in raw_extras)
    rp = message.get("Requires-Python")
    return Metadata(
        name,
        version,
        None if local is _INVALID else local,
        requires,
        rp.strip() if rp else None,
        extras,
    )


_INVALID = "\0invalid"  #: :func:`_local_tag` of a version that does not parse


def metadata_fields(data: bytes) -> tuple[tuple[tuple[str, str], ...], str]:
    """METADATA's header fields (name, value as written, in order) and its body, as the email-header parser
    every METADATA reader uses splits them (UTF-8; an undecodable byte read as U+FFFD)."""
    message = _headers(data)
    body = message.get_payload()
    return tuple((k, str(v)) for k, v in message.items()), body if isinstance(body, str) else ""


def _local_tag(version: str) -> str | None:
    """The local tag of a PEP 440 version (``cu132``), None when it has none, :data:`_INVALID` when the
    version does not parse."""
    try:
        return Version(version).local
    except (InvalidVersion, ValueError):  # ValueError: a number past Python's int digit limit
        return _INVALID


def lenient_local_tag(version: str) -> str | None:
    """The local tag of ``version``, also of one that is not PEP 440 (the text after ``+``)."""
    local = _local_tag(version)
    if local is _INVALID:
        return version.split("+", 1)[1] if "+" in version else None
    return local


def declared_fields(metadata: bytes | None, wheel: bytes | None) -> tuple[str | None, str | None, list[str]]:
    """What a wheel's METADATA and WHEEL say of it, read leniently (inspect reports a wheel whose dist-info is
    malformed): Name and Version as written (None when absent or empty), at most :data:`MAX_FIELD`
    characters each; WHEEL's Tag values (stripped, the first :data:`MAX_TAGS`)."""
    name = version = None
    if metadata:
        headers = _headers(metadata)
        name = str(headers.get("Name") or "")[:MAX_FIELD] or None
        version = str(headers.get("Version") or "")[:MAX_FIELD] or None
    tags: list[str] = []
    if wheel:
        values = _headers(wheel).get_all("Tag", [])[:MAX_TAGS]
        tags = [str(v).strip()[:MAX_FIELD] for v in values if str(v).strip()]
    return name, version, tags


# --- WHEEL and platform tags
# ----------------------------------------------------------------------------------


def parse_wheel_file(data: bytes) -> WheelFile:
    if len(data) > MAX_METADATA_BYTES:
        raise WheelError(f"WHEEL is {len(data)} bytes, over the {MAX_METADATA_BYTES} byte limit")
    try:
        message = _headers(data)
    except Exception as e:
        raise WheelError(f"WHEEL is unreadable: {e}") from e
    tags = tuple(str(t).strip() for t in message.get_all("Tag") or () if str(t).strip())
    expanded: list[str] = []
    for tag in tags:
        parts = tag.split("-")
        if len(parts) != 3:
            raise WheelError(f"WHEEL Tag {tag!r} is not python-abi-platform")
        expanded.extend(_expand_tag(*parts))
        if len(expanded) > MAX_REQUIREMENTS:  # a.b.c.d-e.f.g-h.i.j expands multiplicatively
            raise WheelError(f"WHEEL Tags expand to more than {MAX_REQUIREMENTS} tags")
    purelib = (message.get("Root-Is-Purelib") or "false").strip().lower() == "true"
    wv = message.get("Wheel-Version")
    return WheelFile(wv.strip() if wv else None, purelib, tuple(dict.fromkeys(expanded)))


def tags_from_filename(filename: str) -> tuple[str, ...]:
    """The compressed tag set of a wheel file name, expanded (``py3-none-a.b`` → two tags); a variant label
    (``-cu129`` after the platform tag) is not a tag. A malformed label is a WheelError."""
    filename, _label = split_label(filename)
    stem = filename[:-4] if filename.endswith(".whl") else filename
    parts = stem.split("-")
    if len(parts) < 5:
        return ()
    return _expand_tag(parts[-3], parts[-2], parts[-1])


def _expand_tag(py: str, abi: str, plat: str) -> tuple[str, ...]:
    """A compressed tag (``cp312-cp312-a.b``) as the tags it stands for, python outermost."""
    return tuple(f"{p}-{a}-{q}" for p in py.split(".") for a in abi.split(".") for q in plat.split("."))


# --- Requires-Dist with markers for a target platform
# ---------------------------------------------------------


def marker_environment(os_name: str, machine: str | None, python_version: str = "3.12") -> dict[str, str]:
    """A PEP 508 marker environment describing the target platform (not this machine)."""
    env = {
        "implementation_name": "cpython",
        "implementation_version": f"{python_version}.0",
        "platform_python_implementation": "CPython",
        "platform_release": "",
        "platform_version": "",
        "python_version": python_version,
        "python_full_version": f"{python_version}.0",
        "extra": "",
    }
    env.update(marker_values(os_name, machine))
    return env


def parse_requirement(text: str) -> Requirement:
    try:
        return Requirement(text)
    except InvalidRequirement as e:
        raise WheelError(f"Requires-Dist {text!r} is invalid: {e}") from None


def normalize_specifier(req: Requirement) -> str:
    return ",".join(sorted(str(s) for s in req.specifier))


def requirements_for(
    requires_dist: Iterable[str], os_name: str, machine: str | None, python_version: str = "3.12"
) -> tuple[DeclaredRequirement, ...]:
    """The Requires-Dist entries whose markers hold on ``os_name``/``machine`` (extras are not selected)."""
    env = marker_environment(os_name, machine, python_version)
    out: list[DeclaredRequirement] = []
    for text in requires_dist:
        req = parse_requirement(text)
        if req.marker is not None and not _marker_holds(req.marker, env, text):
            continue
        out.append(DeclaredRequirement(text, canonicalize_name(req.name), normalize_specifier(req)))
    return tuple(out)


def _marker_holds(marker: Marker, env: Mapping[str, str], text: str) -> bool:
    try:
        return bool(marker.evaluate(dict(env)))
    except (UndefinedComparison, UndefinedEnvironmentName, InvalidMarker) as e:
        raise WheelError(f"Requires-Dist {text!r}: cannot evaluate marker: {e}") from None


# --- RECORD
# ---------------------------------------------------------------------------------------------------


def parse_record(data: bytes) -> tuple[RecordEntry, ...]:
    """Parse RECORD (CSV: path, ``algo=urlsafe-b64-digest``, size)."""
    if len(data) > MAX_RECORD_BYTES:
        raise WheelError(f"RECORD is {len(data)} bytes, over the {MAX_RECORD_BYTES} byte limit")
    entries: list[RecordEntry] = []
    try:
        for lineno, row in _record_rows(data):
            _record_row(row, lineno, entries)
    except _RecordSyntax as e:
        raise WheelError(f"RECORD: {e.message}") from None
    return tuple(entries)


def record_paths(data: bytes, label: str) -> list[str]:
    """The paths (first fields) of an installed distribution's RECORD, read leniently (hashes and sizes are
    not looked at); RECORD that is not UTF-8 CSV of at most :data:`MAX_RECORD_ROWS` rows is a
    :class:`WheelError` naming ``label``."""
    try:
        return [row[0] for _, row in _record_rows(data) if row and row[0]]
    except _RecordSyntax as e:
        raise WheelError(e.message, path=label) from None


class _RecordSyntax(WheelError):
    """RECORD is not UTF-8 CSV, or has too many rows (worded by the caller)."""


def _record_rows(data: bytes) -> Iterator[tuple[int, list[str]]]:
    """RECORD's CSV rows, numbered from 1; at most :data:`MAX_RECORD_ROWS`."""
    try:
        text = data.decode("utf-8")
    except UnicodeDecodeError as e:
        raise _RecordSyntax(f"not UTF-8 text (byte {e.start})") from None
    try:
        for lineno, row in enumerate(csv.reader(io.StringIO(text)), start=1):
            if lineno > MAX_RECORD_ROWS:
                raise _RecordSyntax(f"more than {MAX_RECORD_ROWS} lines")
            yield lineno, row
    except csv.Error as e:  # a field over 128 KiB, a NUL, a lone carriage return in a field
        raise _RecordSyntax(f"not valid CSV: {e}") from None


def _record_row(row: list[str], lineno: int, entries: list[RecordEntry]) -> None:
    if not row or (len(row) == 1 and not row[0].strip()):
        return
    if len(row) != 3:
        raise WheelError(f"RECORD line {lineno} has {len(row)} fields, expected 3")
    path, hash_field, size_field = row
    algorithm: str | None = None
    digest: str | None = None
    if hash_field:
        algorithm, sep, digest = hash_field.partition("=")
        if not sep or not digest:
            raise WheelError(f"RECORD line {lineno}: hash {hash_field!r} is not algo=digest")
        if algorithm not in hashlib.algorithms_guaranteed or algorithm in ("md5", "sha1"):
            raise WheelError(f"RECORD line {lineno}: hash algorithm {algorithm!r} is not allowed")
    size: int | None = None
    size_field = size_field.strip()
    if size_field:
        if len(size_field) > 20 or not size_field.isascii() or not size_field.isdigit():
            raise WheelError(f"RECORD line {lineno}: size {size_field[:40]!r} is not a number")
        size = int(size_field)
    entries.append(RecordEntry(path, algorithm, digest, size))


def b64_digest(raw: bytes) -> str:
    return base64.urlsafe_b64encode(raw).rstrip(b"=").decode("ascii")


_NO_HASH_OK = re.compile(r"[^/]+\.dist-info/(RECORD|RECORD\.jws|RECORD\.p7s)$")


@dataclass
class RecordVerifier:
    """Checks streamed members against RECORD. Call :meth:`observe` once per member, then :meth:`problems`."""

    entries: tuple[RecordEntry, ...]
    _by_path: dict[str, RecordEntry] = field(default_factory=dict, init=False)
    _seen: set[str] = field(default_factory=set, init=False)
    _problems: list[RecordProblem] = field(default_factory=list, init=False)

    def __post_init__(self) -> None:
        for entry in self.entries:
            if entry.path in self._by_path:
                self._problems.append(
                    RecordProblem("duplicate", entry.path, f"{entry.path} is listed twice in RECORD")
                )
            self._by_path[entry.path] = entry

    def algorithm_for(self, path: str) -> str:
        entry = self._by_path.get(path)
        return entry.algorithm if entry is not None and entry.algorithm else "sha256"

    def _named(self, path: str) -> None:
        """``path`` seen; a name that is not a valid wheel member path (:mod:`cudaship.wheel.names`) is a
        problem of kind ``name``."""
        self._seen.add(path)
        why = name_problem(path)
        if why is not None:
            self._problems.append(RecordProblem("name", path, f"{path}: not a valid wheel path: {why}"))

    def observe(self, path: str, algorithm: str, digest: str, size: int) -> None:
        """Record what streaming ``path`` produced: its ``algorithm`` digest (urlsafe b64) and size."""
        self._named(path)
        entry = self._by_path.get(path)
        if entry is None:
            if not _NO_HASH_OK.match(path):
                self._problems.append(
                    RecordProblem("unlisted", path, f"{path} is in the wheel but not in RECORD")
                )
            return
        if entry.digest is None:
            if not _NO_HASH_OK.match(path):
                self._problems.append(RecordProblem("unhashed", path, f"{path} has no hash in RECORD"))
            return
        if entry.algorithm != algorithm:
            self._problems.append(
                RecordProblem(
                    "hash", path, f"{path}: RECORD uses {entry.algorithm}, verified with {algorithm}"
                )
            )
        elif entry.digest != digest:
            self._problems.append(
                RecordProblem("hash", path, f"{path}: {algorithm} is {digest}, RECORD says {entry.digest}")
            )
        if entry.size is not None and entry.size != size:
            self._problems.append(
                RecordProblem("size", path, f"{path}: size is {size} bytes, RECORD says {entry.size}")
            )

    def unverified(self, path: str) -> None:
        """``path`` is in the wheel but could not be read (reported elsewhere): not "missing"."""
        self._named(path)

    def not_read(self, path: str) -> None:
        """``path`` is in the wheel (its archive's directory says) but was not read (a survey reads only some
        members): its name and its listing in RECORD are checked, its hash and size cannot be."""
        self._named(path)
        if path not in self._by_path and not _NO_HASH_OK.match(path):
            self._problems.append(
                RecordProblem("unlisted", path, f"{path} is in the wheel but not in RECORD")
            )

    def problems(self) -> tuple[RecordProblem, ...]:
        missing = [
            RecordProblem("missing", path, f"{path} is listed in RECORD but not in the wheel")
            for path in self._by_path
            if path not in self._seen
        ]
        return (*self._problems, *missing)


# --- locating .dist-info in a member list
# ----------------------------------------------------------------------


def find_dist_info(names: Iterable[str], wheel_filename: str | None = None) -> str:
    """The one ``*.dist-info`` directory at the wheel's root (matched to the file name when there are
    several)."""
    dirs = sorted(
        {n.split("/", 1)[0] for n in names if "/" in n and n.split("/", 1)[0].endswith(".dist-info")}
    )
    if not dirs:
        raise WheelError("no .dist-info directory in the wheel")
    if len(dirs) == 1:
        return dirs[0]
    if wheel_filename:
        parts = wheel_filename.split("-")
        if len(parts) >= 2:
            want = canonicalize_name(parts[0])
            matching = [d for d in dirs if canonicalize_name(d[: -len(".dist-info")].split("-")[0]) == want]
            if len(matching) == 1:
                return matching[0]
    raise WheelError(f"several .dist-info directories in the wheel: {', '.join(dirs)}")


#: wheel-axle-runtime's list of links to make at install time, in the ``.dist-info`` directory (the
#: convention: knowledge/data/install_conventions.toml, ``[[links]]``, with its source).
SYMLINKS_FILE = "symlinks.txt"
#: Largest ``symlinks.txt`` read (a line per link; real ones list tens).
MAX_SYMLINKS_BYTES = 4 << 20


def parse_symlinks(data: bytes) -> tuple[InstallLink, ...]:
    """wheel-axle-runtime's ``symlinks.txt``: CSV rows ``link path, target, is-directory (0/1)``, paths
    ``/``-separated, the link path relative to site-packages (or ``<name>.data/<scheme>/<path>``), the target
    as given to ``os.symlink`` (``write_symlinks_file`` / ``read_symlinks_file`` in
    ``wheel_axle/runtime/_symlinks.py`` of github.com/karellen/wheel-axle-runtime). A row that is not three
    fields, an empty path, an absolute one or a flag other than 0/1 raises :class:`WheelError`."""
    if len(data) > MAX_SYMLINKS_BYTES:
        raise WheelError(f"{SYMLINKS_FILE} is {len(data)} bytes, over the {MAX_SYMLINKS_BYTES} byte limit")
    try:
        text = data.decode("utf-8")
    except UnicodeDecodeError as e:
        raise WheelError(f"{SYMLINKS_FILE} is not UTF-8 text: {e}") from None
    links: list[InstallLink] = []
    for lineno, row in enumerate(csv.reader(io.StringIO(text)), 1):
        if not row:
            continue
        if len(row) != 3 or row[2] not in ("0", "1") or not row[0] or not row[1]:
            raise WheelError(f"{SYMLINKS_FILE} line {lineno}: not 'link path,target,0|1'")
        if row[0].startswith("/") or ".." in row[0].split("/"):
            raise WheelError(f"{SYMLINKS_FILE} line {lineno}: link path {row[0]!r} leaves the install root")
        links.append(InstallLink(row[0], row[1], row[2] == "1"))
    return tuple(links)


def read_dist_info(directory: str, read: Mapping[str, bytes], filename: str | None = None) -> DistInfo:
    """Parse the dist-info files given as ``{member path: bytes}`` (METADATA, WHEEL, RECORD must be
    present; ``symlinks.txt`` is read when given). With the wheel's ``filename``, its variant too: the label
    there and ``variant.json`` (in ``read`` when the wheel has one;
    :func:`cudaship.wheel.variant.wheel_variant`)."""

    def get(name: str) -> bytes:
        path = f"{directory}/{name}"
        if path not in read:
            raise WheelError(f"{path} is missing")
        return read[path]

    try:
        metadata = parse_metadata(get("METADATA"))
        wheel = parse_wheel_file(get("WHEEL"))
        record = parse_record(get("RECORD"))
        links_data = read.get(f"{directory}/{SYMLINKS_FILE}")
        links = parse_symlinks(links_data) if links_data is not None else ()
    except WheelError as e:
        raise WheelError(f"{directory}: {e.message}") from None
    variant = None
    if filename is not None:
        variant = wheel_variant(filename, directory, read.get(f"{directory}/{VARIANT_JSON}"))
    return DistInfo(directory, metadata, wheel, record, f"{directory}/RECORD", variant, links)


def install_path(member: str, dist_info: str) -> str | None:
    """Where a member lands relative to site-packages: ``.data/purelib|platlib/x`` → ``x``; None for other
    ``.data`` schemes (scripts, headers, data), which install outside site-packages."""
    data_dir = dist_info[: -len(".dist-info")] + ".data/"
    if member.startswith(data_dir):
        rest = member[len(data_dir) :]
        scheme, _, tail = rest.partition("/")
        if scheme in ("purelib", "platlib"):
            return tail
        return None
    return member
