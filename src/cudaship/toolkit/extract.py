"""Strict extraction of .tar.xz / .zip archives and wheels into a staging directory.

Archives are read through the archive layer (:mod:`cudaship.archive`: bounded inflation for every method,
overlap refusal, total budgets). Every member is checked before anything is written for it: no absolute paths
(``/x``, ``\\x``, ``C:x``, UNC), no ``..``, no NUL, no device files or FIFOs, no two paths that differ only by
case, and a cap on the number of members and the bytes they expand to (counted as they are written, not as
the headers claim). Links are resolved against what has actually been extracted, the way the operating
system will resolve them (every link met on the way followed, ``..`` after a link taken from where the link
leads): a symbolic link that would lead outside the destination is refused, and when the archive is done
every link under the destination is resolved again (a later link can change where an earlier one leads). A
file is never written through a link, and a hard link is a copy of a regular file this extraction wrote,
opened without following links. ``tarfile.data_filter`` is applied too where the Python version has it, as a
second line of defence. Files are written by this module, never by ``extractall``.
"""

from __future__ import annotations

import os
import posixpath
import re
import stat
import tarfile
from collections.abc import Callable, Iterable
from dataclasses import dataclass, field
from pathlib import Path

from cudaship.archive.limits import ArchiveLimits
from cudaship.archive.tar import TAR_ERRORS, TarStream, compression_of
from cudaship.archive.zip import ZipArchive, ZipFile, ZipMember
from cudaship.errors import ArchiveError, ToolkitError
from cudaship.safe_read import file_size
from cudaship.tree import walk

_CHUNK = 1 << 20
_DRIVE = re.compile(r"^[A-Za-z]:")
_MAX_LINK_TARGET = 4096
#: Links followed while resolving one path (Linux gives up at 40 too: ELOOP).
MAX_LINK_HOPS = 40
#: Bytes any archive may expand to whatever its compression ratio.
RATIO_FLOOR = 32 << 20

#: Maps an archive path (top directory stripped) to a toolkit path, or None to skip the member.
Remap = Callable[[str], "str | None"]


@dataclass(frozen=True)
class ExtractLimits:
    max_total_bytes: int = 32 << 30  #: all members together, as written
    max_member_bytes: int = 16 << 30
    max_members: int = 200_000
    #: all members together may expand to at most this many times the archive's size (plus
    #: :data:`RATIO_FLOOR`): CUDA's .tar.xz and .zip archives expand 3-10x; a zip bomb expands 1000x
    max_ratio: int = 200

    def archive_limits(self) -> ArchiveLimits:
        """The archive layer's limits for these."""
        return ArchiveLimits(
            max_member_size=self.max_member_bytes,
            max_ratio=self.max_ratio,
            ratio_floor=RATIO_FLOOR,
            total_floor=RATIO_FLOOR,
            max_members=self.max_members,
        )


@dataclass
class ExtractResult:
    files: dict[str, int] = field(default_factory=dict)  #: toolkit-relative path -> bytes written
    links: dict[str, str] = field(default_factory=dict)  #: toolkit-relative path -> link target
    total_bytes: int = 0


def error_line(error: BaseException) -> str:
    """The first line of an exception's message (its type name when it has none), for one-line errors."""
    lines = str(error).strip().splitlines()
    return lines[0] if lines else type(error).__name__


def _extract_error(label: str, error: BaseException) -> ToolkitError:
    """A failure while extracting: a write error names the file; anything else means a corrupt archive."""
    if isinstance(error, OSError) and error.filename is not None:
        return ToolkitError(f"cannot write {error.filename}: {error.strerror}")
    return ToolkitError(f"{label}: corrupt archive: {error_line(error)}")


def check_member_name(name: str) -> str:
    """The normalized, relative POSIX form of an archive member name, or ToolkitError if it is unsafe."""
    if not name or "\x00" in name:
        raise ToolkitError(f"unsafe member name {name!r}: empty or contains NUL")
    if name.startswith(("\\\\", "//")):
        raise ToolkitError(f"unsafe member {name!r}: UNC path")
    if _DRIVE.match(name):
        raise ToolkitError(f"unsafe member {name!r}: Windows drive path")
    if name.startswith(("/", "\\")):
        raise ToolkitError(f"unsafe member {name!r}: absolute path")
    parts = [p for p in name.replace("\\", "/").split("/") if p not in ("", ".")]
    if any(p == ".." for p in parts):
        raise ToolkitError(f"unsafe member {name!r}: '..' in path")
    if any(_DRIVE.match(p) for p in parts) or any(p.endswith(":") for p in parts):
        raise ToolkitError(f"unsafe member {name!r}: drive or stream name in path")
    return "/".join(parts)


def _check_link_target(target: str, archive_name: str) -> str:
    """``target`` of a symlink, in POSIX form, unless it is plainly unsafe (empty, absolute, too long)."""
    if not target or "\x00" in target:
        raise ToolkitError(f"unsafe link {archive_name!r}: empty target")
    if len(target) > _MAX_LINK_TARGET:
        raise ToolkitError(f"unsafe link {archive_name!r}: target too long")
    if target.startswith(("/", "\\")) or _DRIVE.match(target):
        raise ToolkitError(f"unsafe link {archive_name!r} -> {target!r}: absolute target")
    return target.replace("\\", "/")


class Resolver:
    """Resolves paths under ``dest`` the way the operating system will, following the links that are
    actually there (read with ``readlink``), and says when one leads outside ``dest``."""

    def __init__(self, dest: Path) -> None:
        self.dest = dest

    def resolve(self, rel: str) -> str | None:
        """Where ``rel`` (relative to ``dest``, may hold ``..``) leads, relative to ``dest``; None when it
        leaves ``dest``. :class:`ToolkitError` for a loop (more than :data:`MAX_LINK_HOPS` links)."""
        pending = [p for p in reversed(rel.split("/")) if p not in ("", ".")]
        current: list[str] = []
        hops = 0
        while pending:
            part = pending.pop()
            if part == "..":
                if not current:
                    return None
                current.pop()
                continue
            candidate = self.dest.joinpath(*current, part)
            try:
                is_link = stat.S_ISLNK(os.lstat(candidate).st_mode)
            except OSError:  # not there (yet): the rest resolves by name
                is_link = False
            if not is_link:
                current.append(part)
                continue
            hops += 1
            if hops > MAX_LINK_HOPS:
                raise ToolkitError(f"{rel!r}: more than {MAX_LINK_HOPS} links to follow (a loop?)")
            target = os.readlink(candidate)
            if target.startswith(("/", "\\")) or _DRIVE.match(target):
                return None
            pending.extend(p for p in reversed(target.replace("\\", "/").split("/")) if p not in ("", "."))
        return "/".join(current)

    def link_stays_inside(self, rel: str, target: str) -> bool:
        """Whether a link at ``rel`` pointing at ``target`` leads somewhere inside ``dest``."""
        parent = self.resolve(posixpath.dirname(rel))
        if parent is None:
            return False
        return self.resolve(posixpath.join(parent, target) if parent else target) is not None


def check_links(dest: Path) -> None:
    """Resolve every symbolic link under ``dest`` again; :class:`ToolkitError` for one that leaves it."""

    resolver = Resolver(dest)
    for _directory, entries in walk(dest):
        for entry in entries:
            if entry.is_symlink():
                rel = Path(entry.path).relative_to(dest).as_posix()
                if not resolver.link_stays_inside(rel, os.readlink(entry.path)):
                    raise ToolkitError(
                        f"link {rel!r} -> {os.readlink(entry.path)!r} leads outside the toolkit"
                    )


class _Writer:
    """Writes members under ``dest``; owns the checks that depend on what is already there."""

    def __init__(self, dest: Path, limits: ExtractLimits, archive_size: int) -> None:
        self.dest = dest
        self.limits = limits
        #: the total as written may not pass the limit, nor the archive's size times the ratio limit
        self.total_cap = min(limits.max_total_bytes, archive_size * limits.max_ratio + RATIO_FLOOR)
        self.result = ExtractResult()
        self.members = 0
        self.spellings: dict[str, str] = {}  #: case-folded path (and each parent) -> its first spelling
        self.resolver = Resolver(dest)

    def claim(self, rel: str) -> None:
        """Refuse a path that differs from an earlier one only by case: on Windows and macOS both name the
        same file, so which one survives would depend on the member order and the host."""
        parts = rel.split("/")
        for i in range(1, len(parts) + 1):
            spelled = "/".join(parts[:i])
            first = self.spellings.setdefault(spelled.casefold(), spelled)
            if first != spelled:
                raise ToolkitError(f"members {first!r} and {spelled!r} differ only by case")

    def count_member(self) -> None:
        self.members += 1
        if self.members > self.limits.max_members:
            raise ToolkitError(f"more than {self.limits.max_members} members")

    def check_size(self, declared: int, name: str) -> None:
        if declared > self.limits.max_member_bytes:
            raise ToolkitError(f"member {name!r} expands to {declared} bytes, over the limit")
        if self.result.total_bytes + declared > self.total_cap:
            raise ToolkitError(f"archive expands past {self.total_cap} bytes (zip bomb?)")

    def _target(self, rel: str) -> Path:
        self.claim(rel)
        path = self.dest
        for part in rel.split("/")[:-1]:
            path = path / part
            if path.is_symlink():
                raise ToolkitError(f"member {rel!r} would be written through a link")
            if path.exists() and not path.is_dir():
                raise ToolkitError(f"member {rel!r} is below a file")
        target = self.dest / rel
        if target.is_dir() and not target.is_symlink():
            raise ToolkitError(f"member {rel!r} would replace a directory")
        target.parent.mkdir(parents=True, exist_ok=True)
        if target.is_symlink() or target.exists():
            target.unlink()
        self.result.files.pop(rel, None)  # whatever was there is gone
        self.result.links.pop(rel, None)
        return target

    def directory(self, rel: str) -> None:
        if not rel:
            return
        self.claim(rel)
        path = self.dest
        for part in rel.split("/"):
            path = path / part
            if path.is_symlink() or (path.exists() and not path.is_dir()):
                raise ToolkitError(f"directory {rel!r} collides with a file or link")
        path.mkdir(parents=True, exist_ok=True)

    def file(self, rel: str, chunks: Iterable[bytes], executable: bool) -> None:
        target = self._target(rel)
        written = 0
        fd = os.open(target, os.O_WRONLY | os.O_CREAT | os.O_EXCL | getattr(os, "O_NOFOLLOW", 0), 0o600)
        with os.fdopen(fd, "wb") as out:
            for chunk in chunks:
                written += len(chunk)
                if (
                    written > self.limits.max_member_bytes
                    or self.result.total_bytes + written > self.total_cap
                ):
                    raise ToolkitError(f"archive expands past the size limit while writing {rel!r}")
                out.write(chunk)
            os.fchmod(out.fileno(), 0o755 if executable else 0o644)
        self.result.total_bytes += written
        self.result.files[rel] = written

    def symlink(self, rel: str, target: str, archive_name: str) -> None:
        if not self.resolver.link_stays_inside(rel, target):
            raise ToolkitError(f"unsafe link {archive_name!r} -> {target!r}: points outside the toolkit")
        path = self._target(rel)
        try:
            os.symlink(target, path)
        except OSError as e:  # pragma: no cover - hosts without symlink support
            raise ToolkitError(f"cannot create the link {rel!r} on this host: {e.strerror}") from e
        self.result.links[rel] = target

    def hardlink(self, rel: str, target_rel: str, archive_name: str) -> None:
        """A copy of ``target_rel``, which must be a regular file this extraction wrote and that is still
        there as written (not replaced by a link since), opened without following any link."""
        if target_rel not in self.result.files:
            raise ToolkitError(f"hard link {archive_name!r} points outside the files it extracted")
        size = self.result.files[target_rel]
        self.check_size(size, rel)
        source = self.dest / target_rel
        if self.resolver.resolve(target_rel) != target_rel:
            raise ToolkitError(f"hard link {archive_name!r} points through a link")
        try:
            fd = os.open(source, os.O_RDONLY | getattr(os, "O_NOFOLLOW", 0))
        except OSError as e:
            raise ToolkitError(f"hard link {archive_name!r}: cannot open its target: {e.strerror}") from e
        with os.fdopen(fd, "rb") as src:
            info = os.fstat(src.fileno())
            if not stat.S_ISREG(info.st_mode):
                raise ToolkitError(f"hard link {archive_name!r} points to no regular file")
            self.file(rel, iter(lambda: src.read(_CHUNK), b""), bool(info.st_mode & 0o111))


class _Stripper:
    """Removes the archive's single top directory (redist archives have exactly one)."""

    def __init__(self, enabled: bool) -> None:
        self.enabled = enabled
        self.top: str | None = None

    def __call__(self, name: str) -> str:
        if not self.enabled:
            return name
        head, _, rest = name.partition("/")
        if self.top is None:
            self.top = head
        elif head != self.top:
            raise ToolkitError(f"more than one top directory ({self.top!r}, {head!r})")
        return rest


def _map(name: str, strip: _Stripper, remap: Remap | None) -> str | None:
    rel = strip(check_member_name(name))
    if not rel:
        return None
    if remap is None:
        return rel
    mapped = remap(rel)
    return None if mapped is None else check_member_name(mapped)


def _second_line(member: tarfile.TarInfo, dest: Path) -> None:
    data_filter = getattr(tarfile, "data_filter", None)
    if data_filter is None:  # pragma: no cover - Python without PEP 706
        return
    try:
        data_filter(member, str(dest))
    except tarfile.FilterError as e:
        raise ToolkitError(f"unsafe member {member.name!r}: {e}") from e


def _tar_member(
    tf: TarStream, member: tarfile.TarInfo, writer: _Writer, strip: _Stripper, remap: Remap | None
) -> None:
    if (
        member.ischr()
        or member.isblk()
        or member.isfifo()
        or not (member.isreg() or member.isdir() or member.issym() or member.islnk())
    ):
        raise ToolkitError(f"unsafe member {member.name!r}: device file, FIFO or special file")
    rel = _map(member.name, strip, remap)
    if rel is None:
        return
    link_target = _check_link_target(member.linkname, member.name) if member.issym() else None
    if link_target is not None and not writer.resolver.link_stays_inside(rel, link_target):
        raise ToolkitError(f"unsafe link {member.name!r} -> {link_target!r}: points outside the toolkit")
    hard_target = _map(member.linkname, strip, remap) if member.islnk() else None
    if member.islnk() and hard_target is None:
        raise ToolkitError(f"hard link {member.name!r} points to a skipped member")
    _second_line(member, writer.dest)  # our checks passed; the stdlib's must agree before anything is written
    if member.isdir():
        writer.directory(rel)
    elif link_target is not None:
        writer.symlink(rel, link_target, member.name)
    elif hard_target is not None:
        writer.hardlink(rel, hard_target, member.name)
    else:
        writer.check_size(member.size, member.name)
        with tf.data(member) as source:
            writer.file(rel, iter(lambda: source.read(_CHUNK), b""), bool(member.mode & 0o111))


def _tar_members(
    archive: Path, label: str, limits: ExtractLimits, writer: _Writer, strip: _Stripper, remap: Remap | None
) -> None:
    try:
        tf = TarStream(archive, kind=compression_of(label), limits=limits.archive_limits())
    except ArchiveError as e:
        raise ToolkitError(f"not a readable tar archive: {e.message}") from e
    with tf:
        for member in tf:
            writer.count_member()
            _tar_member(tf, member, writer, strip, remap)


def _zip_member(
    archive: ZipArchive, info: ZipMember, writer: _Writer, strip: _Stripper, remap: Remap | None
) -> None:
    if info.is_special:
        raise ToolkitError(f"unsafe member {info.name!r}: device file, FIFO or special file")
    rel = _map(info.name, strip, remap)
    if rel is None:
        return
    if info.is_dir:
        writer.directory(rel)
    elif info.is_symlink:
        if info.size > _MAX_LINK_TARGET:
            raise ToolkitError(f"unsafe link {info.name!r}: target too long")
        target = archive.read(info, _MAX_LINK_TARGET).decode("utf-8", "surrogateescape")
        writer.symlink(rel, _check_link_target(target, info.name), info.name)
    else:
        writer.check_size(info.size, info.name)
        writer.file(rel, archive.chunks(info), bool(info.mode & 0o111))


def _zip_members(
    archive: Path, label: str, limits: ExtractLimits, writer: _Writer, strip: _Stripper, remap: Remap | None
) -> None:
    try:
        opened = ZipFile(archive, limits=limits.archive_limits())
    except ArchiveError as e:
        raise ToolkitError(f"not a readable zip archive: {e.message}") from e
    try:
        with opened as zf:
            for info in zf.members():
                writer.count_member()
                _zip_member(zf, info, writer, strip, remap)
    except ArchiveError as e:
        raise ToolkitError(f"corrupt archive: {e.message}") from e


def extract_archive(
    archive: Path,
    dest: Path,
    *,
    filename: str,
    strip_top: bool = True,
    remap: Remap | None = None,
    limits: ExtractLimits | None = None,
) -> ExtractResult:
    """Extract by the name's extension: ``.zip``/``.whl`` or a tar (``.tar.xz``, ``.tar.gz``, ``.tar``)."""
    lower = filename.lower()
    errors: tuple[type[BaseException], ...]
    if lower.endswith((".zip", ".whl")):
        members, errors = _zip_members, (OSError,)
    elif lower.endswith((".tar.xz", ".txz", ".tar.gz", ".tgz", ".tar.bz2", ".tar")):
        members, errors = _tar_members, TAR_ERRORS
    else:
        raise ToolkitError(f"{filename}: unknown archive type (expected .tar.xz or .zip)")
    limits = limits or ExtractLimits()
    writer = _Writer(dest, limits, file_size(archive))
    try:
        members(archive, filename, limits, writer, _Stripper(strip_top), remap)
        check_links(dest)
    except (ToolkitError, ArchiveError) as e:
        raise ToolkitError(f"{filename}: {e.message}") from e
    except errors as e:
        raise _extract_error(filename, e) from e
    return writer.result
