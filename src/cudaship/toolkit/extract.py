"""Strict extraction of .tar.xz / .zip archives and wheels into a staging directory.

Every member is checked before anything is written for it: no absolute paths (``/x``, ``\\x``, ``C:x``, UNC),
no ``..``, no NUL, links only to places inside the destination, no device files or FIFOs, no writing through a
link, no two paths that differ only by case, and a cap on the number of members and the bytes they expand to
(counted as they are written, not as the headers claim). ``tarfile.data_filter`` is applied too where the
Python version has it, as a second line of defence. Files are written by this module, never by ``extractall``.
"""

from __future__ import annotations

import lzma
import os
import posixpath
import re
import shutil
import stat
import tarfile
import zipfile
import zlib
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import IO

from cudaship.errors import ToolkitError

_CHUNK = 1 << 20
_DRIVE = re.compile(r"^[A-Za-z]:")
_MAX_LINK_TARGET = 4096
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


@dataclass
class ExtractResult:
    files: dict[str, int] = field(default_factory=dict)  #: toolkit-relative path -> bytes written
    links: dict[str, str] = field(default_factory=dict)  #: toolkit-relative path -> link target
    total_bytes: int = 0


def _size(archive: Path) -> int:
    try:
        return archive.stat().st_size
    except OSError:
        return 0  # opening it fails next, with the message that says why


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


def _check_link_target(rel: str, target: str, archive_name: str) -> str:
    """``target`` of a symlink at toolkit path ``rel``, if it stays inside the toolkit."""
    if not target or "\x00" in target:
        raise ToolkitError(f"unsafe link {archive_name!r}: empty target")
    if target.startswith(("/", "\\")) or _DRIVE.match(target):
        raise ToolkitError(f"unsafe link {archive_name!r} -> {target!r}: absolute target")
    resolved = posixpath.normpath(posixpath.join(posixpath.dirname(rel), target.replace("\\", "/")))
    if resolved == ".." or resolved.startswith("../") or resolved.startswith("/"):
        raise ToolkitError(f"unsafe link {archive_name!r} -> {target!r}: points outside the toolkit")
    return target.replace("\\", "/")


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

    def file(self, rel: str, source: IO[bytes], executable: bool) -> None:
        target = self._target(rel)
        written = 0
        with target.open("wb") as out:
            while chunk := source.read(_CHUNK):
                written += len(chunk)
                if (
                    written > self.limits.max_member_bytes
                    or self.result.total_bytes + written > self.total_cap
                ):
                    raise ToolkitError(f"archive expands past the size limit while writing {rel!r}")
                out.write(chunk)
        target.chmod(0o755 if executable else 0o644)
        self.result.total_bytes += written
        self.result.files[rel] = written

    def symlink(self, rel: str, target: str) -> None:
        path = self._target(rel)
        try:
            os.symlink(target, path)
        except OSError as e:  # pragma: no cover - hosts without symlink support
            raise ToolkitError(f"cannot create the link {rel!r} on this host: {e.strerror}") from e
        self.result.links[rel] = target

    def hardlink(self, rel: str, target_rel: str, archive_name: str) -> None:
        if target_rel not in self.result.files:
            raise ToolkitError(f"hard link {archive_name!r} points outside the files it extracted")
        source = self.dest / target_rel
        path = self._target(rel)
        shutil.copyfile(source, path)
        path.chmod(stat.S_IMODE(source.stat().st_mode))
        size = self.result.files[target_rel]
        self.check_size(size, rel)
        self.result.total_bytes += size
        self.result.files[rel] = size


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
    tf: tarfile.TarFile, member: tarfile.TarInfo, writer: _Writer, strip: _Stripper, remap: Remap | None
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
    link_target = _check_link_target(rel, member.linkname, member.name) if member.issym() else None
    hard_target = _map(member.linkname, strip, remap) if member.islnk() else None
    if member.islnk() and hard_target is None:
        raise ToolkitError(f"hard link {member.name!r} points to a skipped member")
    _second_line(member, writer.dest)  # our checks passed; the stdlib's must agree before anything is written
    if member.isdir():
        writer.directory(rel)
    elif link_target is not None:
        writer.symlink(rel, link_target)
    elif hard_target is not None:
        writer.hardlink(rel, hard_target, member.name)
    else:
        writer.check_size(member.size, member.name)
        source = tf.extractfile(member)
        if source is None:
            raise ToolkitError(f"member {member.name!r} has no data")
        with source:
            writer.file(rel, source, bool(member.mode & 0o111))


def _open_tar(archive: Path, lower: str) -> tarfile.TarFile:
    """Open with the compression the name says (so a corrupt file gets one error, not four)."""
    if lower.endswith((".xz", ".txz")):
        return tarfile.open(archive, "r:xz")
    if lower.endswith((".gz", ".tgz")):
        return tarfile.open(archive, "r:gz")
    if lower.endswith(".bz2"):
        return tarfile.open(archive, "r:bz2")
    return tarfile.open(archive, "r:")


def extract_tar(
    archive: Path,
    dest: Path,
    *,
    strip_top: bool = True,
    remap: Remap | None = None,
    limits: ExtractLimits | None = None,
    label: str | None = None,
) -> ExtractResult:
    label = label or archive.name
    writer = _Writer(dest, limits or ExtractLimits(), _size(archive))
    strip = _Stripper(strip_top)
    try:
        tf = _open_tar(archive, label.lower())
    except (tarfile.TarError, EOFError, OSError, lzma.LZMAError, zlib.error, ValueError) as e:
        raise ToolkitError(f"{label}: not a readable tar archive: {error_line(e)}") from e
    try:
        for member in tf:
            writer.count_member()
            _tar_member(tf, member, writer, strip, remap)
    except ToolkitError as e:
        raise ToolkitError(f"{label}: {e.message}") from e
    except (tarfile.TarError, EOFError, lzma.LZMAError, zlib.error, OSError, ValueError) as e:
        raise _extract_error(label, e) from e
    finally:
        tf.close()
    return writer.result


def _zip_member(
    zf: zipfile.ZipFile, info: zipfile.ZipInfo, writer: _Writer, strip: _Stripper, remap: Remap | None
) -> None:
    mode = info.external_attr >> 16
    kind = stat.S_IFMT(mode)
    if kind and kind not in (stat.S_IFREG, stat.S_IFDIR, stat.S_IFLNK):
        raise ToolkitError(f"unsafe member {info.filename!r}: device file, FIFO or special file")
    rel = _map(info.filename, strip, remap)
    if rel is None:
        return
    if info.is_dir():
        writer.directory(rel)
    elif kind == stat.S_IFLNK:
        if info.file_size > _MAX_LINK_TARGET:
            raise ToolkitError(f"unsafe link {info.filename!r}: target too long")
        target = zf.read(info).decode("utf-8", "surrogateescape")
        writer.symlink(rel, _check_link_target(rel, target, info.filename))
    else:
        writer.check_size(info.file_size, info.filename)
        with zf.open(info) as source:
            writer.file(rel, source, bool(mode & 0o111))


def extract_zip(
    archive: Path,
    dest: Path,
    *,
    strip_top: bool = True,
    remap: Remap | None = None,
    limits: ExtractLimits | None = None,
    label: str | None = None,
    only: Callable[[str], bool] | None = None,
) -> ExtractResult:
    """Extract a zip (or a wheel); ``only`` filters raw member names before any other step."""
    label = label or archive.name
    writer = _Writer(dest, limits or ExtractLimits(), _size(archive))
    strip = _Stripper(strip_top)
    try:
        zf = zipfile.ZipFile(archive)
    except (
        zipfile.BadZipFile,
        zipfile.LargeZipFile,
        OSError,
        EOFError,
        ValueError,
        NotImplementedError,
    ) as e:
        # ValueError: a member name that is not valid UTF-8 although its header says it is
        raise ToolkitError(f"{label}: not a readable zip archive: {error_line(e)}") from e
    try:
        for info in zf.infolist():
            if only is not None and not only(info.filename):
                continue
            writer.count_member()
            _zip_member(zf, info, writer, strip, remap)
    except ToolkitError as e:
        raise ToolkitError(f"{label}: {e.message}") from e
    except (
        zipfile.BadZipFile,
        zipfile.LargeZipFile,
        EOFError,
        zlib.error,
        lzma.LZMAError,
        OSError,
        ValueError,  # bad member names or headers
        NotImplementedError,  # a compression method zipfile lacks
        RuntimeError,  # an encrypted member
    ) as e:
        raise _extract_error(label, e) from e
    finally:
        zf.close()
    return writer.result


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
    if lower.endswith((".zip", ".whl")):
        return extract_zip(archive, dest, strip_top=strip_top, remap=remap, limits=limits, label=filename)
    if lower.endswith((".tar.xz", ".txz", ".tar.gz", ".tgz", ".tar.bz2", ".tar")):
        return extract_tar(archive, dest, strip_top=strip_top, remap=remap, limits=limits, label=filename)
    raise ToolkitError(f"{filename}: unknown archive type (expected .tar.xz or .zip)")
