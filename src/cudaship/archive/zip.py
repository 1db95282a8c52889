"""Zip archives (wheels, ``.pt2`` packages, redist ``.zip`` files) read in place.

:class:`ZipArchive` takes the whole archive as a buffer (an ``mmap`` of the file, or the bytes of a package)
and never copies it. The central directory is parsed by :mod:`zipfile` (zip64 included); everything after that
is done here, once for every caller:

- every member's local header is read and checked (signature, the name it repeats, where the data starts);
- members whose bytes overlap another member's (many central-directory entries pointing at one local header,
  the "overlapping zip bomb") or the central directory are refused, as :mod:`zipfile` refuses them since 3.12;
- a member's bytes stream through :func:`~cudaship.archive.inflate.member_chunks`: never more than one chunk
  per step, never more than the size the archive declares, and never more than
  :meth:`~cudaship.archive.limits.ArchiveLimits.member_cap` of the compressed bytes actually stored for it;
- all members together produce at most :meth:`~cudaship.archive.limits.ArchiveLimits.total_cap` bytes.
"""

from __future__ import annotations

import io
import itertools
import mmap
import os
import stat
import struct
import threading
import zipfile
from collections.abc import Callable, Iterator
from contextlib import contextmanager, suppress
from types import TracebackType
from typing import IO, NamedTuple, cast

from cudaship.archive.inflate import (
    BZIP2,
    DEFLATED,
    LZMA,
    METHOD_NAMES,
    STORED,
    crc32,
    inflate_whole,
    member_chunks,
)
from cudaship.archive.limits import CHUNK, DEFAULT_LIMITS, ArchiveLimits
from cudaship.archive.spill import spill
from cudaship.errors import ArchiveError
from cudaship.pages import read_only_map
from cudaship.records.buffer import Buffer
from cudaship.safe_read import open_regular

#: What ``zipfile.ZipFile(...)`` raises on a file that is not a readable zip archive.
ZIP_OPEN_ERRORS: tuple[type[BaseException], ...] = (
    zipfile.BadZipFile,
    zipfile.LargeZipFile,
    OSError,
    ValueError,
    EOFError,
    NotImplementedError,
    KeyError,
    struct.error,
)
SUPPORTED_METHODS = frozenset({STORED, DEFLATED, BZIP2, LZMA})
#: Members up to this size may be read in one step (:meth:`ZipArchive.small`).
SMALL_MEMBER = 1 << 20

_LOCAL_HEADER = struct.Struct("<4sHHHHHIIIHH")
_LOCAL_MAGIC = b"PK\x03\x04"


class ZipMember(NamedTuple):
    """One entry of the central directory, with where its data starts (from its local header). A named tuple
    rather than a frozen dataclass: a wheel has tens of thousands of them, made while the command waits (a
    torch wheel's 13,000 took 33 ms as dataclasses, 8.6 ms as tuples), and they travel to worker processes."""

    name: str  #: path inside the archive as stored (``/`` or, from some Windows tools, ``\\``)
    size: int  #: uncompressed size the archive declares
    compressed_size: int
    method: int  #: zip compression method (0 stored, 8 deflate, 12 bzip2, 14 lzma)
    header_offset: int
    data_offset: int
    flags: int
    external_attr: int
    crc: int = 0  #: CRC-32 of the uncompressed bytes, as the central directory records it
    #: why the member cannot be read (its local header is bad), None when it can
    problem: str | None = None

    @property
    def is_dir(self) -> bool:
        return self.name.endswith("/")

    @property
    def stored(self) -> bool:
        return self.method == STORED

    @property
    def mode(self) -> int:
        """Unix mode bits from the external attributes (0 when the archive records none)."""
        return self.external_attr >> 16

    @property
    def is_symlink(self) -> bool:
        return stat.S_IFMT(self.mode) == stat.S_IFLNK

    @property
    def is_special(self) -> bool:
        """A device, FIFO or socket by its recorded mode."""
        kind = stat.S_IFMT(self.mode)
        return bool(kind) and kind not in (stat.S_IFREG, stat.S_IFDIR, stat.S_IFLNK)


class SeekableReader(io.RawIOBase):
    """A read-only, seekable raw file at position ``_pos``; subclasses give ``seek`` and ``readinto``."""

    _pos = 0

    def readable(self) -> bool:
        return True

    def seekable(self) -> bool:
        return True

    def tell(self) -> int:
        return self._pos


class BufferFile(SeekableReader):
    """A read-only, seekable file over a buffer, so :mod:`zipfile` reads an mmap without copying it."""

    def __init__(self, buf: Buffer) -> None:
        super().__init__()
        self._view = memoryview(buf).cast("B")
        self._pos = 0

    def close(self) -> None:
        self._view.release()
        super().close()

    def seek(self, offset: int, whence: int = io.SEEK_SET) -> int:
        base = {io.SEEK_SET: 0, io.SEEK_CUR: self._pos, io.SEEK_END: len(self._view)}[whence]
        self._pos = max(0, base + offset)
        return self._pos

    def readinto(self, b: bytearray | memoryview) -> int:  # type: ignore[override]
        end = min(len(self._view), self._pos + len(b))
        n = max(0, end - self._pos)
        memoryview(b)[:n] = self._view[self._pos : end]
        self._pos += n
        return n


class ZipArchive:
    """A zip archive held in ``buf`` (not copied). Thread-safe for reading: members may stream on several
    threads at once."""

    def __init__(
        self,
        buf: Buffer,
        *,
        limits: ArchiveLimits = DEFAULT_LIMITS,
        members: tuple[ZipMember, ...] | None = None,
    ) -> None:
        """``members``: the entries as another process already read them from the central directory (and
        checked: local headers, overlaps), which is then not parsed again; every read still checks its member
        (:meth:`check`) and stays inside ``buf``."""
        self.buf = buf
        self.size = len(buf)
        self.limits = limits
        self._produced = 0
        self._total_cap = limits.total_cap(self.size)
        self._lock = threading.Lock()
        self._members = self._read_directory() if members is None else members
        self._by_name: dict[str, ZipMember] = {}
        for m in self._members:
            self._by_name.setdefault(m.name, m)

    # -- listing --------------------------------------------------------------------------------------------

    def _open_problem(self, error: BaseException) -> str:
        """What is wrong with an archive ``zipfile`` refused to open, in words a user acts on: an empty file,
        a zip cut short (it starts like one but its central directory, at the end, is missing), or no zip."""
        if not isinstance(error, zipfile.BadZipFile):
            return _reason(error)
        if self.size == 0:
            return "empty file (a wheel is a zip archive)"
        if bytes(self.buf[:4]) == b"PK\x03\x04":
            return (
                f"truncated or damaged: it starts as a zip archive but its central directory, at the end, is "
                f"missing or unreadable ({self.size:,} bytes: was the download or copy cut short?)"
            )
        return "the file is no zip at all (a wheel is one)"

    def _read_directory(self) -> tuple[ZipMember, ...]:
        source = BufferFile(self.buf)
        try:
            infos, directory_start = _directory(cast(IO[bytes], source), self.limits, self._open_problem)
        finally:
            source.close()
        members = tuple(_entry(info, *self._local_header(info)) for info in infos)
        self._refuse_overlaps(members, self.size if directory_start is None else int(directory_start))
        return members

    def _local_header(self, info: zipfile.ZipInfo) -> tuple[int, str | None]:
        """Where the member's data starts, and what is wrong with its local header (None: nothing). A bad
        header is that member's problem; the other members stay readable."""
        start = info.header_offset
        if start < 0 or start + _LOCAL_HEADER.size > self.size:
            return start, "local header past the end of the archive"
        fields = _LOCAL_HEADER.unpack_from(self.buf, start)
        if fields[0] != _LOCAL_MAGIC:
            return start, "bad local header signature"
        name_len, extra_len = int(fields[9]), int(fields[10])
        name_at = start + _LOCAL_HEADER.size
        if name_at + name_len > self.size:
            return start, "local header past the end of the archive"
        local_name = bytes(self.buf[name_at : name_at + name_len])
        # ASCII reads the same in both of zip's encodings, and its decoder is the fast one
        encoding = "ascii" if local_name.isascii() else "utf-8" if info.flag_bits & 0x800 else "cp437"
        if local_name.decode(encoding, errors="replace") != info.orig_filename:
            return start, "the local header names another file"
        data = name_at + name_len + extra_len
        if data + info.compress_size > self.size:
            return start, "data runs past the end of the archive (truncated?)"
        return data, None

    @staticmethod
    def _refuse_overlaps(members: tuple[ZipMember, ...], directory_start: int) -> None:
        ordered = sorted((m for m in members if m.problem is None), key=lambda m: m.header_offset)
        for here, after in itertools.pairwise(ordered):
            if here.data_offset + here.compressed_size > after.header_offset:
                raise ArchiveError(
                    f"members {here.name} and {after.name} overlap (overlapped entries: a zip bomb?)"
                )
        if ordered and ordered[-1].data_offset + ordered[-1].compressed_size > directory_start:
            raise ArchiveError(f"member {ordered[-1].name} overlaps the central directory")

    def members(self) -> tuple[ZipMember, ...]:
        """Every entry, directories included, in archive order."""
        return self._members

    def files(self) -> tuple[ZipMember, ...]:
        """Every entry but directories, in archive order."""
        return tuple(m for m in self._members if not m.is_dir)

    def get(self, name: str) -> ZipMember | None:
        return self._by_name.get(name)

    @property
    def produced(self) -> int:
        """Bytes produced by all reads so far."""
        return self._produced

    # -- reading --------------------------------------------------------------------------------------------

    def check(self, member: ZipMember) -> None:
        """Raise when ``member`` cannot be read at all (a bad local header, encrypted, an unknown method, a
        size no cap allows)."""
        self._check_readable(member)
        if member.size > self.limits.max_member_size:
            raise ArchiveError(
                f"member {member.name}: declares {member.size} bytes, over the "
                f"{self.limits.max_member_size} byte limit (zip bomb?)"
            )
        cap = self.limits.member_cap(member.compressed_size)
        if member.size > cap:
            ratio = member.size // max(member.compressed_size, 1)
            raise ArchiveError(
                f"member {member.name}: compression ratio {ratio}:1 over the {self.limits.max_ratio}:1 "
                "limit (zip bomb?)"
            )

    def _check_readable(self, member: ZipMember) -> None:
        if member.problem is not None:
            raise ArchiveError(f"member {member.name}: {member.problem}")
        if member.flags & 0x1:
            raise ArchiveError(f"member {member.name}: encrypted")
        if member.method not in SUPPORTED_METHODS:
            name = METHOD_NAMES.get(member.method, f"method {member.method}")
            raise ArchiveError(f"member {member.name}: unsupported compression ({name})")
        if member.stored and member.compressed_size != member.size:
            raise ArchiveError(
                f"member {member.name}: stored member with different sizes "
                f"({member.compressed_size} vs {member.size})"
            )

    def chunks(
        self, member: ZipMember, *, chunk: int = CHUNK, stop: int | None = None, verify_crc: bool = True
    ) -> Iterator[bytes]:
        """The member's bytes, at most ``chunk`` per step. Raises :class:`ArchiveError` when it produces more
        than it declares, more than its cap or the archive's, or (read to the end) less than it declares or
        bytes whose CRC-32 differs from the recorded one (``verify_crc``; a caller that checks a stronger
        hash, as the audit does with RECORD, may skip it). ``stop``: give up quietly after that many bytes
        (to read a member's head)."""
        if stop is None:
            self.check(member)
        else:  # a head: the member's size caps still hold for every chunk produced
            self._check_readable(member)
        raw = memoryview(self.buf)[member.data_offset : member.data_offset + member.compressed_size]
        produced = 0
        crc = 0
        released = [member.data_offset]

        def consumed(n: int) -> None:  # drop the pages already inflated, 32 MiB at a time
            if member.data_offset + n - released[0] >= 32 << 20:
                self._release(released[0], member.data_offset + n)
                released[0] = member.data_offset + n

        try:
            for piece in member_chunks(member.method, raw, chunk, consumed):
                produced += len(piece)
                if verify_crc:
                    crc = crc32(piece, crc)
                if produced > member.size:
                    raise ArchiveError(
                        f"member {member.name}: more data than the declared {member.size} bytes"
                    )
                self._spend(len(piece))
                yield piece
                if stop is not None and produced >= stop:
                    return
        except ArchiveError as e:
            if not e.message.startswith(f"member {member.name}:"):
                e.message = f"member {member.name}: {e.message}"
                e.args = (e.message,)
            raise
        finally:
            raw.release()
        self._release(member.data_offset, member.data_offset + member.compressed_size)
        if produced != member.size:
            raise ArchiveError(
                f"member {member.name}: {produced} bytes unpacked, the archive declares {member.size}"
            )
        if verify_crc and crc != member.crc:
            raise ArchiveError(f"member {member.name}: corrupt member (CRC-32 does not match)")

    def _release(self, start: int, end: int) -> None:
        """Drop the pages of a read-only map of the archive between ``start`` and ``end`` once a member is
        read: they come back from the file if needed, and a 600 MB wheel streamed end to end does not stay
        resident (file-backed pages count in RSS)."""
        pages = read_only_map(self.buf)
        if pages is None:
            return
        first = (start + mmap.PAGESIZE - 1) // mmap.PAGESIZE * mmap.PAGESIZE
        last = end // mmap.PAGESIZE * mmap.PAGESIZE
        if last - first >= 1 << 20:
            with suppress(OSError, ValueError):  # advice only
                pages.madvise(mmap.MADV_DONTNEED, first, last - first)

    def _spend(self, n: int) -> None:
        with self._lock:
            self._produced += n
            if self._produced > self._total_cap:
                raise ArchiveError(f"archive expands past {self._total_cap} bytes in all (zip bomb?)")

    def small(self, member: ZipMember) -> bytes | None:
        """A small stored or deflated member's bytes in one step (no chunking, no generator: the audit reads
        thousands of such members), or None when it is not such a member or anything is unusual about it
        (then :meth:`chunks` reads it and says what). The same checks and caps as :meth:`chunks`, CRC-32
        excepted (the audit checks the stronger RECORD hash)."""
        if member.size > SMALL_MEMBER or member.method not in (STORED, DEFLATED):
            return None
        try:
            self.check(member)
        except ArchiveError:
            return None
        raw = memoryview(self.buf)[member.data_offset : member.data_offset + member.compressed_size]
        try:
            data = bytes(raw) if member.method == STORED else inflate_whole(raw, member.size)
        finally:
            raw.release()
        if data is None or len(data) != member.size:
            return None
        with self._lock:
            if self._produced + len(data) > self._total_cap:
                return None  # over the archive's cap: chunks() says so
            self._produced += len(data)
        return data

    def head(self, member: ZipMember, n: int) -> bytes:
        """The first ``n`` bytes of a member (inflating only about that much)."""
        if member.size == 0 or n <= 0:
            return b""
        if member.stored:
            self._check_readable(member)
            return bytes(self.buf[member.data_offset : member.data_offset + min(n, member.size)])
        out = b""
        for piece in self.chunks(member, chunk=max(n, 64), stop=n):
            out += piece
            if len(out) >= n:
                break
        return out[:n]

    def read(self, member: ZipMember, limit: int) -> bytes:
        """The whole member in memory; refused when it declares more than ``limit`` bytes."""
        if member.size > limit:
            raise ArchiveError(f"member {member.name}: {member.size} bytes, over the {limit} byte limit")
        return b"".join(self.chunks(member))

    @contextmanager
    def buffer(
        self, member: ZipMember, *, memory_limit: int = 64 << 20, verify_crc: bool = True
    ) -> Iterator[Buffer]:
        """The member's bytes as a buffer valid inside the ``with`` block: a stored member is a window on the
        archive (its CRC-32 checked first, unless ``verify_crc`` is False); another is inflated into memory
        (up to ``memory_limit``) or an anonymous temporary file, mapped."""

        self.check(member)
        if member.size == 0:
            yield b""
            return
        if member.stored:
            view = memoryview(self.buf)[member.data_offset : member.data_offset + member.size]
            if verify_crc and crc32(view) != member.crc:
                view.release()
                raise ArchiveError(f"member {member.name}: corrupt member (CRC-32 does not match)")
            try:
                yield view
            finally:
                view.release()
            return
        with spill(self.chunks(member, verify_crc=verify_crc), member.size, memory_limit=memory_limit) as buf:
            yield buf


class ZipFile:
    """A zip archive on disk, mapped read-only (a context manager); :attr:`archive` reads it."""

    def __init__(
        self,
        path: str | os.PathLike[str],
        *,
        limits: ArchiveLimits = DEFAULT_LIMITS,
        members: tuple[ZipMember, ...] | None = None,
    ) -> None:

        self._file = open_regular(path)
        self._map: mmap.mmap | None = None
        try:
            size = os.fstat(self._file.fileno()).st_size
            if size:
                self._map = mmap.mmap(self._file.fileno(), 0, access=mmap.ACCESS_READ)
            self.archive = ZipArchive(
                self._map if self._map is not None else b"", limits=limits, members=members
            )
        except (OSError, ValueError) as e:
            self.close()
            raise ArchiveError(f"cannot map: {_reason(e)}") from None
        except ArchiveError:
            self.close()
            raise

    def close(self) -> None:
        if self._map is not None:
            with suppress(BufferError):  # a caller still holds a view; the map goes when that view does
                self._map.close()
            self._map = None
        self._file.close()

    def fileno(self) -> int:
        """The open file's descriptor (for the identity of the file: see ``archive.pool.ArchiveRef``)."""
        return self._file.fileno()

    def __enter__(self) -> ZipArchive:
        return self.archive

    def __exit__(
        self, exc_type: type[BaseException] | None, exc: BaseException | None, tb: TracebackType | None
    ) -> None:
        self.close()


def file_directory(source: IO[bytes], *, limits: ArchiveLimits = DEFAULT_LIMITS) -> tuple[ZipMember, ...]:
    """The central directory of the zip archive readable from ``source``: any seekable file, such as a remote
    wheel fetched in ranges, of which only the directory is read. Its entries' local headers are not read
    (``data_offset`` is -1): :func:`file_member` reads one member's."""
    return file_directory_at(source, limits=limits)[0]


def file_directory_at(
    source: IO[bytes], *, limits: ArchiveLimits = DEFAULT_LIMITS
) -> tuple[tuple[ZipMember, ...], int | None]:
    """:func:`file_directory`, and where the central directory starts (None when :mod:`zipfile` does not say):
    the end of the last member's bytes, for a reader that fetches members by their own ranges."""
    infos, start = _directory(source, limits, _reason)
    return tuple(_entry(info, -1, None) for info in infos), None if start is None else int(start)


def local_member(buf: Buffer, member: ZipMember, base: int) -> ZipMember:
    """``member`` of :func:`file_directory` as held in ``buf``, which holds the archive's bytes from offset
    ``base`` on (a range fetched on its own): its local header read and checked as :class:`ZipArchive` checks
    a local archive's, its offsets made relative to ``buf``. What is wrong with the header is the member's
    :attr:`~ZipMember.problem`; data running past ``buf`` is not (a head read needs only the first bytes:
    the caller that needs the whole member checks ``data_offset + compressed_size <= len(buf)``)."""
    start = member.header_offset - base
    if start < 0 or start + _LOCAL_HEADER.size > len(buf):
        return member._replace(header_offset=max(start, 0), data_offset=0, problem="local header not fetched")
    fields = _LOCAL_HEADER.unpack_from(buf, start)
    if fields[0] != _LOCAL_MAGIC:
        return member._replace(header_offset=start, data_offset=0, problem="bad local header signature")
    name_len, extra_len = int(fields[9]), int(fields[10])
    name_at = start + _LOCAL_HEADER.size
    local_name = bytes(buf[name_at : name_at + name_len])
    encoding = "ascii" if local_name.isascii() else "utf-8" if member.flags & 0x800 else "cp437"
    if len(local_name) != name_len or local_name.decode(encoding, errors="replace") != member.name:
        return member._replace(
            header_offset=start, data_offset=0, problem="the local header names another file"
        )
    return member._replace(header_offset=start, data_offset=name_at + name_len + extra_len, problem=None)


def _directory(
    source: IO[bytes], limits: ArchiveLimits, problem: Callable[[BaseException], str]
) -> tuple[list[zipfile.ZipInfo], int | None]:
    """The central directory's entries (at most ``limits.max_members``) and where it starts; an archive
    :mod:`zipfile` cannot open is an :class:`ArchiveError` worded by ``problem``."""
    try:
        zf = zipfile.ZipFile(source)
    except ZIP_OPEN_ERRORS as e:
        raise ArchiveError(f"not a readable zip archive: {problem(e)}") from None
    with zf:
        infos = zf.infolist()
        start = getattr(zf, "start_dir", None)
    if len(infos) > limits.max_members:
        raise ArchiveError(f"more than {limits.max_members} members ({len(infos)})")
    return infos, start


def _entry(info: zipfile.ZipInfo, data_offset: int, problem: str | None) -> ZipMember:
    return ZipMember(
        # as stored: zipfile's ``filename`` ends at a NUL and turns os.sep into "/", which hides the very
        # names cudaship.wheel.names refuses
        name=info.orig_filename,
        size=info.file_size,
        compressed_size=info.compress_size,
        method=info.compress_type,
        header_offset=info.header_offset,
        data_offset=data_offset,
        flags=info.flag_bits,
        external_attr=info.external_attr,
        crc=info.CRC,
        problem=problem,
    )


def file_member(source: IO[bytes], member: ZipMember, limit: int) -> bytes:
    """The bytes of one member of :func:`file_directory`, reading from ``source`` only its local header and
    data, then checked and inflated as :meth:`ZipArchive.read` does (every cap and refusal of a local
    archive's member); a member declaring more than ``limit`` bytes is refused before anything is read."""
    if member.size > limit:
        raise ArchiveError(f"member {member.name}: {member.size} bytes, over the {limit} byte limit")
    if member.compressed_size > limit + (1 << 16):
        raise ArchiveError(
            f"member {member.name}: {member.compressed_size} bytes stored, over the {limit} limit"
        )
    source.seek(member.header_offset)
    header = source.read(_LOCAL_HEADER.size)
    if len(header) != _LOCAL_HEADER.size or header[:4] != _LOCAL_MAGIC:
        raise ArchiveError(f"member {member.name}: bad local header")
    fields = _LOCAL_HEADER.unpack(header)
    data_offset = _LOCAL_HEADER.size + int(fields[9]) + int(fields[10])
    source.seek(member.header_offset)
    blob = source.read(data_offset + member.compressed_size)
    local = member._replace(
        header_offset=0,
        data_offset=data_offset,
        problem=None if len(blob) == data_offset + member.compressed_size else "truncated",
    )
    return ZipArchive(blob, members=(local,)).read(local, limit)


def _reason(error: BaseException) -> str:
    text = str(error).strip().splitlines()
    first = text[0] if text else ""
    return f"{type(error).__name__}: {first}" if first else type(error).__name__
