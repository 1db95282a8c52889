"""Reading a wheel's members as buffers without unpacking the wheel.

A wheel is a zip file; :class:`WheelArchive` is a wheel-shaped view of
:class:`cudaship.archive.zip.ZipArchive` (the one archive layer: local headers, overlap refusal, bounded
inflation for every method, budgets, spill to a temporary file). A STORED member is a window on the mapped
wheel; any other is inflated into memory or an anonymous temporary file, mapped. The wheel's own facts
(:class:`WheelInfo`) come from its file name, ``WHEEL`` and ``METADATA``.
"""

from __future__ import annotations

import os
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from types import TracebackType

from cudaship.archive.limits import DEFAULT_LIMITS
from cudaship.archive.pool import SPILL_SIZE, ArchiveRef, CompressedPages
from cudaship.archive.select import MAGIC_BYTES, is_native_member, is_text_name, looks_native
from cudaship.archive.spill import Budget, Hasher, Sink, released
from cudaship.archive.zip import ZipArchive, ZipFile, ZipMember
from cudaship.errors import ArchiveError, WheelError
from cudaship.records.buffer import Buffer
from cudaship.records.files import WheelInfo
from cudaship.wheel.records import DistInfo, RecordProblem, WheelVariant
from cudaship.wheel.variant import MAX_VARIANT_JSON, VARIANT_JSON, split_label, wheel_variant

__all__ = [
    "MAGIC_BYTES",
    "MAX_MEMBER_SIZE",
    "MAX_RATIO",
    "RATIO_FLOOR",
    "Member",
    "WheelArchive",
    "is_native_member",
    "is_wheel",
    "looks_native",
    "wheel_info",
]

#: Largest member cudaship unpacks (bytes).
MAX_MEMBER_SIZE = DEFAULT_LIMITS.max_member_size
#: A member may produce at most this many bytes per stored byte, plus :data:`RATIO_FLOOR`.
MAX_RATIO = DEFAULT_LIMITS.max_ratio
RATIO_FLOOR = DEFAULT_LIMITS.ratio_floor
#: Largest METADATA or WHEEL file read (inspect and audit alike), as
#: :data:`cudaship.wheel.metadata.MAX_METADATA_BYTES`
MAX_METADATA_SIZE = 4 << 20

Member = ZipMember


class WheelArchive:
    """An open wheel (a context manager). A buffer is valid only inside its :meth:`member_buffer` block."""

    def __init__(self, path: str | os.PathLike[str], *, archive: ZipArchive | None = None) -> None:
        self.path = Path(path)
        self._label = str(path)
        self._file: ZipFile | None = None
        if archive is not None:  # already open (a worker process's shared archive): not closed here
            self.zip = archive
            return
        try:
            self._file = ZipFile(path)
        except ArchiveError as e:
            raise self._error(e) from None
        self.zip = self._file.archive

    def ref(self) -> ArchiveRef:
        """How a worker process opens this very file (see :class:`cudaship.archive.pool.ArchiveRef`)."""
        assert self._file is not None
        return ArchiveRef.of(self.path, self._file.fileno())

    def _error(self, e: ArchiveError) -> WheelError:
        return WheelError(e.message, path=self._label)

    # -- lifetime -------------------------------------------------------------------------------------------

    def close(self) -> None:
        if self._file is not None:
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
        return self.zip.files()

    def head(self, member: Member, n: int = MAGIC_BYTES) -> bytes:
        """The first ``n`` bytes of a member (decompressing only that much)."""
        try:
            return self.zip.head(member, n)
        except ArchiveError as e:
            raise self._error(e) from None

    def native_members(self) -> Iterator[Member]:
        """Members inspect should read: chosen by name (``.so``, ``.dll``, ...) or by their first bytes."""
        for member in self.members():
            if member.size == 0 or is_text_name(member.name):
                continue
            if is_native_member(member.name, self.head(member)):
                yield member

    # -- member access --------------------------------------------------------------------------------------

    @contextmanager
    def member_buffer(self, member: Member, *, budget: Budget | None = None) -> Iterator[Buffer]:
        """The member's bytes as a buffer, valid inside the ``with`` block only. With a ``budget`` (shared by
        the workers reading members at once), an inflated member is held in memory when the budget has room
        and in an anonymous temporary file, mapped, when not; without, in memory up to 64 MiB."""
        try:
            if budget is None or member.stored or member.size == 0:
                with self.zip.buffer(member) as buf:
                    yield buf
            else:
                with self._inflated(member, budget) as buf:
                    yield buf
        except ArchiveError as e:
            raise self._error(e) from None

    @contextmanager
    def _inflated(self, member: Member, budget: Budget) -> Iterator[Buffer]:
        self.zip.check(member)
        sink = Sink(member.size, budget, spill_size=SPILL_SIZE)
        pages = CompressedPages(self.zip.buf, member.data_offset, member.compressed_size, member.size)
        try:
            for chunk in self.zip.chunks(member):
                sink.write(chunk)
                pages.produced(len(chunk))
            pages.finished()
            with released(sink.buffer()) as buf:
                yield buf
        finally:
            sink.close()

    # -- the wheel's own facts ------------------------------------------------------------------------------

    def data_member(self, name: str, limit: int = MAX_METADATA_SIZE) -> bytes | None:
        """The bytes of a small member (METADATA, WHEEL, RECORD), or None when absent."""
        member = self.zip.get(name)
        if member is None:
            return None
        if member.size > limit:
            raise WheelError(
                f"member {name}: {member.size} bytes, too large for a metadata file", path=self._label
            )
        try:
            return self.zip.read(member, limit)
        except ArchiveError as e:
            raise self._error(e) from None

    def text_member(self, name: str, limit: int = MAX_METADATA_SIZE) -> str | None:
        """A small text member (METADATA, WHEEL) decoded as UTF-8, or None when absent."""
        data = self.data_member(name, limit)
        return None if data is None else data.decode("utf-8", errors="replace")

    def dist_info(self) -> str | None:
        """The ``*.dist-info`` directory name, when the archive has exactly one at top level."""
        # cudaship.wheel.metadata imports packaging (60 ms): here, not at the top, for the CLI's start-up time
        from cudaship.wheel.metadata import find_dist_info

        try:
            return find_dist_info(m.name for m in self.members())
        except WheelError:
            return None

    def variant(self) -> WheelVariant | None:
        """The wheel's variant (its file name's label and ``.dist-info/variant.json``), read alone: None for a
        non-variant wheel; a malformed one raises :class:`WheelError` naming the wheel and the problem."""
        from cudaship.wheel.metadata import find_dist_info  # start-up time

        try:
            _base, label = split_label(self.path.name)
            try:
                directory = find_dist_info((m.name for m in self.members()), self.path.name)
            except WheelError:
                if label is None:
                    return None  # not a variant; the dist-info's problem is not this reader's
                raise
            data = self.data_member(f"{directory}/{VARIANT_JSON}", MAX_VARIANT_JSON)
            return wheel_variant(self.path.name, directory, data)
        except WheelError as e:
            raise WheelError(e.message, path=self._label) from None

    def read_dist_info(self) -> DistInfo:
        """The wheel's ``.dist-info`` (METADATA, WHEEL, RECORD, a variant's ``variant.json``,
        wheel-axle-runtime's ``symlinks.txt``) parsed by :mod:`cudaship.wheel.metadata`, the directory matched
        to the file name when there are several; a missing or malformed one raises :class:`WheelError`."""
        from cudaship.wheel.metadata import (  # start-up time
            MAX_RECORD_BYTES,
            MAX_SYMLINKS_BYTES,
            SYMLINKS_FILE,
            find_dist_info,
            read_dist_info,
        )

        directory = find_dist_info((m.name for m in self.members()), self.path.name)
        read: dict[str, bytes] = {}
        for name, limit in (
            ("METADATA", MAX_METADATA_SIZE),
            ("WHEEL", MAX_METADATA_SIZE),
            ("RECORD", MAX_RECORD_BYTES),
            (VARIANT_JSON, MAX_VARIANT_JSON),
            (SYMLINKS_FILE, MAX_SYMLINKS_BYTES),
        ):
            data = self.data_member(f"{directory}/{name}", limit)
            if data is not None:
                read[f"{directory}/{name}"] = data
        return read_dist_info(directory, read, self.path.name)

    def record_problems(self, dist: DistInfo) -> tuple[RecordProblem, ...]:
        """Every member streamed once against ``dist``'s RECORD
        (:class:`~cudaship.wheel.metadata.RecordVerifier`): hashes, sizes, files listed but missing and files
        not listed."""
        from cudaship.wheel.metadata import RecordVerifier, b64_digest  # start-up time

        verifier = RecordVerifier(dist.record)
        for member in self.members():
            algorithm = verifier.algorithm_for(member.name)
            hasher = Hasher(algorithm)
            size = 0
            try:
                for chunk in self.zip.chunks(member):
                    hasher.update(chunk)
                    size += len(chunk)
            except ArchiveError as e:
                raise self._error(e) from None
            verifier.observe(member.name, algorithm, b64_digest(hasher.digest()), size)
        return verifier.problems()

    def info(self) -> WheelInfo:
        """Name, version (with local tag) and tags, from the file name, cross-read with WHEEL and METADATA."""
        return wheel_info(self.path.name, self)


def wheel_info(filename: str, archive: WheelArchive | None = None) -> WheelInfo:
    """A wheel's facts from its file name, completed by its METADATA and WHEEL when ``archive`` is given."""
    # imported here: only wheels need them, and they cost start-up time (packaging: 60 ms)
    from packaging.utils import InvalidWheelFilename, parse_wheel_filename
    from packaging.version import InvalidVersion

    from cudaship.wheel.metadata import MAX_FIELD, declared_fields, lenient_local_tag

    name = ""
    version = ""
    tags: list[str] = []
    try:
        dist, ver, _build, tagset = parse_wheel_filename(_without_label(filename))
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
            metadata = archive.data_member(f"{dist_info}/METADATA")
            wheel = archive.data_member(f"{dist_info}/WHEEL")
            declared_name, declared_version, declared_tags = declared_fields(metadata, wheel)
            if metadata:
                name = (declared_name or name)[:MAX_FIELD]
                version = (declared_version or version)[:MAX_FIELD]
            if declared_tags:
                tags = sorted(set(declared_tags))
    local = lenient_local_tag(version) if version else None
    return WheelInfo(filename=filename, name=name, version=version, local=local, tags=tuple(tags))


def _without_label(filename: str) -> str:
    """``filename`` without a variant label (a malformed one is left for the file-name parser to refuse)."""
    try:
        return split_label(filename)[0]
    except WheelError:
        return filename


def is_wheel(path: Path) -> bool:
    """A ``.whl`` name (the zip check happens when it is opened)."""
    return path.suffix.lower() == ".whl"
