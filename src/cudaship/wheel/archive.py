"""Reading a wheel's members as buffers without unpacking the wheel.

A wheel is a zip file. :class:`WheelArchive` lists its members and hands one member at a time to a reader as a
buffer:

- a STORED member is a window (``memoryview``) on one read-only ``mmap`` of the wheel file, starting at the
  member's data offset, which is found by reading the member's local file header (the central directory's
  offset points at that header, whose name and extra field lengths may differ from the central directory's);
- a DEFLATED (or other) member is streamed into an anonymous temporary file, checked against the size the
  archive declares and against a compression-ratio limit (so a zip bomb is a clean :class:`WheelError`, not a
  full disk), then mapped.

Nothing here loads a whole member into memory. The wheel's own facts (:class:`WheelInfo`) come from its file
name, ``WHEEL`` and ``METADATA``.
"""

from __future__ import annotations

import lzma
import mmap
import os
import re
import struct
import zipfile
import zlib
from collections.abc import Iterator
from contextlib import contextmanager, suppress
from dataclasses import dataclass
from pathlib import Path
from types import TracebackType
from typing import IO

from cudaship.binary.magic import binary_format
from cudaship.binary.records import Buffer
from cudaship.errors import WheelError
from cudaship.inspection.records import WheelInfo

#: Largest member cudaship unpacks to a temporary file (bytes, as the archive declares it).
MAX_MEMBER_SIZE = 8 << 30
#: A member whose declared size is more than this many times its compressed size, and larger than
#: :data:`RATIO_FLOOR`, is treated as a zip bomb. Real CUDA libraries compress 2-10x.
MAX_RATIO = 200
RATIO_FLOOR = 32 << 20
#: What ``zipfile.ZipFile(...)`` raises on a file that is not a readable zip archive.
ZIP_OPEN_ERRORS: tuple[type[BaseException], ...] = (
    zipfile.BadZipFile,
    zipfile.LargeZipFile,
    OSError,
    ValueError,
    EOFError,
    NotImplementedError,
)
#: What reading a member raises on a corrupt or unsupported one (bad data, unknown method, encryption, ...).
ZIP_READ_ERRORS: tuple[type[BaseException], ...] = (
    zipfile.BadZipFile,
    OSError,
    EOFError,
    ValueError,
    NotImplementedError,
    RuntimeError,
    zlib.error,
    lzma.LZMAError,
)
#: Bytes read at the start of a member to recognise it.
MAGIC_BYTES = 16

_CHUNK = 1 << 20
_LOCAL_HEADER = struct.Struct("<4sHHHHHIIIHH")
_LOCAL_MAGIC = b"PK\x03\x04"

#: Member names worth opening whatever their first bytes say.
_NATIVE_NAME = re.compile(
    r"(?:\.so(?:\.[0-9][0-9A-Za-z.]*)?|\.dll|\.pyd|\.exe|\.dylib|\.cubin|\.fatbin|\.ptx|\.lib)$",
    re.IGNORECASE,
)
#: Member names never worth a look (text, sources, metadata): saves opening thousands of members.
_TEXT_NAME = re.compile(
    r"(?:\.py|\.pyi|\.pyc|\.txt|\.md|\.rst|\.json|\.toml|\.cfg|\.ini|\.yaml|\.yml|\.h|\.hpp|\.hh|\.cuh|\.inl"
    r"|\.c|\.cc|\.cpp|\.cu|\.cmake|\.html|\.css|\.js|\.typed|/RECORD|/METADATA|/WHEEL|/LICENSE[^/]*)$",
    re.IGNORECASE,
)


def looks_native(name: str, head: bytes) -> bool:
    """Whether a member named ``name`` starting with ``head`` is a file inspect should read: a binary by
    name, or by its first bytes (:func:`cudaship.binary.magic.binary_format`; PTX only by name)."""
    return bool(_NATIVE_NAME.search(name)) or binary_format(head) is not None


def is_native_member(name: str, head: bytes) -> bool:
    """Whether a wheel member is worth reading as a binary: never text, sources or metadata by name; else
    a binary by name or by its first bytes (``head``, at least :data:`MAGIC_BYTES` of them when the member
    is that long)."""
    return not _TEXT_NAME.search(name) and looks_native(name, head)


@dataclass(frozen=True)
class Member:
    """One file in the archive, as its central directory describes it."""

    name: str  #: path inside the wheel, with ``/``
    size: int  #: uncompressed size declared by the archive
    compressed_size: int
    method: int  #: zip compression method (0 stored, 8 deflated, ...)
    header_offset: int  #: offset of the member's local file header

    @property
    def stored(self) -> bool:
        return self.method == zipfile.ZIP_STORED


class WheelArchive:
    """An open wheel (a context manager). A buffer is valid only inside its :meth:`member_buffer` block."""

    def __init__(self, path: str | os.PathLike[str]) -> None:
        self.path = Path(path)
        self._label = str(path)
        try:
            self._file: IO[bytes] = self.path.open("rb")
        except OSError as e:
            raise WheelError(f"cannot open: {e.strerror}", path=self._label) from e
        try:
            self._zip = zipfile.ZipFile(self._file)
            self._size = os.fstat(self._file.fileno()).st_size
            self._map: mmap.mmap | None = (
                mmap.mmap(self._file.fileno(), 0, access=mmap.ACCESS_READ) if self._size else None
            )
        except ZIP_OPEN_ERRORS as e:
            self._file.close()
            problem = zip_open_problem(e, self.path)
            raise WheelError(f"not a readable zip archive: {problem}", path=self._label) from e
        self._members: tuple[Member, ...] | None = None

    # -- lifetime -------------------------------------------------------------------------------------------

    def close(self) -> None:
        if self._map is not None:
            with suppress(BufferError):  # a caller still holds a view; the map goes when that view does
                self._map.close()
            self._map = None
        self._zip.close()
        self._file.close()

    def __enter__(self) -> WheelArchive:
        return self

    def __exit__(
        self, exc_type: type[BaseException] | None, exc: BaseException | None, tb: TracebackType | None
    ) -> None:
        self.close()

    # -- listing --------------------------------------------------------------------------------------------

    def members(self) -> tuple[Member, ...]:
        """Every regular file in the archive (directories left out), in archive order."""
        if self._members is None:
            found = []
            for info in self._zip.infolist():
                if info.filename.endswith("/"):  # is_dir() fails on an empty name
                    continue
                found.append(
                    Member(
                        info.filename,
                        info.file_size,
                        info.compress_size,
                        info.compress_type,
                        info.header_offset,
                    )
                )
            self._members = tuple(found)
        return self._members

    def head(self, member: Member, n: int = MAGIC_BYTES) -> bytes:
        """The first ``n`` bytes of a member (decompressing only that much)."""
        if member.size == 0:
            return b""
        try:
            if member.stored and self._map is not None:
                start = self._data_offset(member)
                return bytes(self._map[start : start + min(n, member.size)])
            with self._zip.open(member.name) as f:
                return f.read(n)
        except ZIP_READ_ERRORS as e:
            raise WheelError(f"member {member.name}: {_reason(e)}", path=self._label) from e

    def native_members(self) -> Iterator[Member]:
        """Members inspect should read: chosen by name (``.so``, ``.dll``, ...) or by their first bytes."""
        for member in self.members():
            if member.size == 0 or _TEXT_NAME.search(member.name):
                continue
            if is_native_member(member.name, self.head(member)):
                yield member

    # -- member access --------------------------------------------------------------------------------------

    @contextmanager
    def member_buffer(self, member: Member) -> Iterator[Buffer]:
        """The member's bytes as a buffer, valid inside the ``with`` block only."""
        if member.stored:
            yield from self._stored_view(member)
        else:
            yield from self._unpacked_view(member)

    def _data_offset(self, member: Member) -> int:
        assert self._map is not None
        start = member.header_offset
        if start < 0 or start + _LOCAL_HEADER.size > self._size:
            raise WheelError(
                f"member {member.name}: local header past the end of the archive", path=self._label
            )
        fields = _LOCAL_HEADER.unpack_from(self._map, start)
        if fields[0] != _LOCAL_MAGIC:
            raise WheelError(f"member {member.name}: bad local header signature", path=self._label)
        name_len, extra_len = int(fields[9]), int(fields[10])
        data = start + _LOCAL_HEADER.size + name_len + extra_len
        if data + member.compressed_size > self._size:
            raise WheelError(
                f"member {member.name}: data runs past the end of the archive (truncated wheel?)",
                path=self._label,
            )
        return data

    def _stored_view(self, member: Member) -> Iterator[Buffer]:
        if self._map is None or member.size == 0:
            yield b""
            return
        if member.compressed_size != member.size:
            raise WheelError(
                f"member {member.name}: stored member with different sizes "
                f"({member.compressed_size} vs {member.size})",
                path=self._label,
            )
        start = self._data_offset(member)
        view = memoryview(self._map)[start : start + member.size]
        try:
            yield view
        finally:
            view.release()

    def _unpacked_view(self, member: Member) -> Iterator[Buffer]:
        self._check_bomb(member)
        if member.size == 0:
            yield b""
            return
        import shutil
        import tempfile

        free = shutil.disk_usage(tempfile.gettempdir()).free
        if member.size > free:
            raise WheelError(
                f"member {member.name}: {member.size} bytes to unpack but only {free} free in "
                f"{tempfile.gettempdir()} (set TMPDIR)",
                path=self._label,
            )
        with tempfile.TemporaryFile(prefix="cudaship-member-") as tmp:
            written = 0
            try:
                with self._zip.open(member.name) as src:
                    while True:
                        chunk = src.read(_CHUNK)
                        if not chunk:
                            break
                        written += len(chunk)
                        if written > member.size:  # zipfile stops at the declared size; belt and braces
                            raise WheelError(
                                f"member {member.name}: more data than the declared {member.size} bytes",
                                path=self._label,
                            )
                        tmp.write(chunk)
            except WheelError:
                raise
            except OSError as e:
                raise WheelError(
                    f"member {member.name}: cannot unpack: {_reason(e)}", path=self._label
                ) from e
            except ZIP_READ_ERRORS as e:  # OSError is taken by the clause above
                raise WheelError(f"member {member.name}: {_reason(e)}", path=self._label) from e
            if written != member.size:
                raise WheelError(
                    f"member {member.name}: {written} bytes unpacked, archive declares {member.size}",
                    path=self._label,
                )
            tmp.flush()
            mapped = mmap.mmap(tmp.fileno(), 0, access=mmap.ACCESS_READ)
            try:
                yield mapped
            finally:
                with suppress(BufferError):
                    mapped.close()

    def _check_bomb(self, member: Member) -> None:
        if member.size > MAX_MEMBER_SIZE:
            raise WheelError(
                f"member {member.name}: declares {member.size} bytes, over the {MAX_MEMBER_SIZE} byte limit "
                "(zip bomb?)",
                path=self._label,
            )
        if member.size > RATIO_FLOOR and member.size > MAX_RATIO * max(member.compressed_size, 1):
            raise WheelError(
                f"member {member.name}: compression ratio {member.size // max(member.compressed_size, 1)}:1 "
                f"over the {MAX_RATIO}:1 limit (zip bomb?)",
                path=self._label,
            )

    # -- the wheel's own facts ------------------------------------------------------------------------------

    def text_member(self, name: str, limit: int = 4 << 20) -> str | None:
        """A small text member (METADATA, WHEEL) decoded as UTF-8, or None when absent."""
        try:
            info = self._zip.getinfo(name)
        except KeyError:
            return None
        if info.file_size > limit:
            raise WheelError(
                f"member {name}: {info.file_size} bytes, too large for a metadata file", path=self._label
            )
        try:
            with self._zip.open(info) as f:
                return f.read(limit + 1).decode("utf-8", errors="replace")
        except ZIP_READ_ERRORS as e:
            raise WheelError(f"member {name}: {_reason(e)}", path=self._label) from e

    def dist_info(self) -> str | None:
        """The ``*.dist-info`` directory name, when the archive has exactly one at top level."""
        names = {m.name.split("/", 1)[0] for m in self.members() if "/" in m.name}
        found = sorted(n for n in names if n.endswith(".dist-info"))
        return found[0] if len(found) == 1 else None

    def info(self) -> WheelInfo:
        """Name, version (with local tag) and tags, from the file name, cross-read with WHEEL and METADATA."""
        return wheel_info(self.path.name, self)


def wheel_info(filename: str, archive: WheelArchive | None = None) -> WheelInfo:
    """A wheel's facts from its file name, completed by its METADATA and WHEEL when ``archive`` is given."""
    from email.parser import HeaderParser  # imported here: only wheels need them, and they cost startup time

    from packaging.utils import InvalidWheelFilename, parse_wheel_filename
    from packaging.version import InvalidVersion, Version

    name = ""
    version = ""
    tags: list[str] = []
    try:
        dist, ver, _build, tagset = parse_wheel_filename(filename)
        name, version = str(dist), str(ver)
        tags = sorted(str(t) for t in tagset)
    except (InvalidWheelFilename, InvalidVersion):
        stem = filename[:-4] if filename.endswith(".whl") else filename
        parts = stem.split("-")
        if len(parts) >= 2:
            name, version = parts[0], parts[1]
    if archive is not None:
        dist_info = archive.dist_info()
        if dist_info is not None:
            metadata = archive.text_member(f"{dist_info}/METADATA")
            if metadata:
                headers = HeaderParser().parsestr(metadata, headersonly=True)
                name = headers.get("Name", name) or name
                version = headers.get("Version", version) or version
            wheel = archive.text_member(f"{dist_info}/WHEEL")
            if wheel:
                declared = [v.strip() for v in HeaderParser().parsestr(wheel).get_all("Tag", []) if v.strip()]
                if declared:
                    tags = sorted(set(declared))
    local: str | None
    try:
        local = Version(version).local if version else None
    except InvalidVersion:
        local = version.split("+", 1)[1] if "+" in version else None
    return WheelInfo(filename=filename, name=name, version=version, local=local, tags=tuple(tags))


def is_wheel(path: Path) -> bool:
    """A ``.whl`` name (the zip check happens when it is opened)."""
    return path.suffix.lower() == ".whl"


def zip_open_problem(error: BaseException, path: str | os.PathLike[str]) -> str:
    """What is wrong with a file ``zipfile`` refused to open, in words a user acts on: an empty file, a zip
    cut short (it starts like one but its central directory, at the end, is missing), or no zip at all."""
    if not isinstance(error, zipfile.BadZipFile):
        return _reason(error)
    try:
        with open(path, "rb") as f:
            head = f.read(4)
            size = os.fstat(f.fileno()).st_size
    except OSError:
        return _reason(error)
    if size == 0:
        return "empty file (a wheel is a zip archive)"
    if head == _LOCAL_MAGIC:
        return (
            f"truncated or damaged: it starts as a zip archive but its central directory, at the end, is "
            f"missing or unreadable ({size:,} bytes: was the download or copy cut short?)"
        )
    return "the file is no zip at all (a wheel is one)"


def _reason(error: BaseException) -> str:
    text = str(error).strip().splitlines()
    first = text[0] if text else ""
    return f"{type(error).__name__}: {first}" if first else type(error).__name__
