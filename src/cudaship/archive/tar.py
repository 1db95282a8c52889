"""Tar archives (redist ``.tar.xz``, also ``.tar.gz``, ``.tar.bz2``, ``.tar``) read as one bounded stream.

:mod:`tarfile` reads the headers; everything under it is bounded here. The compressed stream is inflated by
:class:`~cudaship.archive.inflate.StreamReader` (one chunk per call, the archive's total capped at
:meth:`~cudaship.archive.limits.ArchiveLimits.total_cap`), and an extended header (a GNU long name or link, a
PAX or Solaris record block), which :mod:`tarfile` reads whole into memory, is refused above
:attr:`~cudaship.archive.limits.ArchiveLimits.max_extended_header` bytes before it is read.
The archive is read in stream mode (``r|``): members come in order, each readable while it is current.
"""

from __future__ import annotations

import os
import tarfile
from collections.abc import Iterator
from typing import IO

from cudaship.archive.inflate import StreamReader
from cudaship.archive.limits import DEFAULT_LIMITS, ArchiveLimits
from cudaship.errors import ArchiveError
from cudaship.safe_read import open_regular

_EXTENDED = frozenset(
    {
        tarfile.GNUTYPE_LONGNAME,
        tarfile.GNUTYPE_LONGLINK,
        tarfile.XHDTYPE,
        tarfile.XGLTYPE,
        tarfile.SOLARIS_XHDTYPE,
    }
)
#: What reading a tar stream may raise besides ArchiveError.
TAR_ERRORS: tuple[type[BaseException], ...] = (tarfile.TarError, EOFError, OSError, ValueError, UnicodeError)


def compression_of(name: str) -> str:
    """``xz``, ``gz``, ``bz2`` or ``""`` from an archive's file name."""
    lower = name.lower()
    if lower.endswith((".xz", ".txz")):
        return "xz"
    if lower.endswith((".gz", ".tgz")):
        return "gz"
    if lower.endswith((".bz2", ".tbz", ".tbz2")):
        return "bz2"
    return ""


def _bounded_info(limit: int) -> type[tarfile.TarInfo]:
    class BoundedTarInfo(tarfile.TarInfo):
        def _proc_member(self, tf: tarfile.TarFile) -> tarfile.TarInfo:
            if self.type in _EXTENDED and self.size > limit:
                raise ArchiveError(f"extended tar header of {self.size} bytes, over the {limit} byte limit")
            result: tarfile.TarInfo = super()._proc_member(tf)  # type: ignore[misc]
            return result

    return BoundedTarInfo


class TarStream:
    """An open tar archive (a context manager): iterate for members, :meth:`data` for the current one's
    bytes."""

    def __init__(
        self, path: str | os.PathLike[str], *, kind: str, limits: ArchiveLimits = DEFAULT_LIMITS
    ) -> None:

        self.limits = limits
        self._file = open_regular(path, error=ArchiveError)
        size = os.fstat(self._file.fileno()).st_size
        self.reader = StreamReader(self._file, kind, limits.total_cap(size))
        try:
            self._tar = tarfile.TarFile.open(  # type: ignore[call-overload]
                None,
                "r|",
                self.reader,
                tarinfo=_bounded_info(limits.max_extended_header),
            )
        except ArchiveError:
            self._file.close()
            raise
        except TAR_ERRORS as e:
            self._file.close()
            raise ArchiveError(f"not a readable tar archive: {_first(e)}") from None

    def __iter__(self) -> Iterator[tarfile.TarInfo]:
        members = iter(self._tar)
        count = 0
        while True:
            try:
                member = next(members)
            except StopIteration:
                return
            except TAR_ERRORS as e:
                raise ArchiveError(f"corrupt tar archive: {_first(e)}") from None
            count += 1
            if count > self.limits.max_members:
                raise ArchiveError(f"more than {self.limits.max_members} members")
            yield member

    def data(self, member: tarfile.TarInfo) -> _MemberData:
        """The current member's bytes as a file whose errors are :class:`ArchiveError`."""
        try:
            source: IO[bytes] | None = self._tar.extractfile(member)
        except TAR_ERRORS as e:
            raise ArchiveError(f"member {member.name!r}: {_first(e)}") from None
        if source is None:
            raise ArchiveError(f"member {member.name!r} has no data")
        return _MemberData(source, member.name)

    def close(self) -> None:
        try:
            self._tar.close()
        finally:
            self._file.close()

    def __enter__(self) -> TarStream:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()


class _MemberData:
    """A member's data file whose read errors are :class:`ArchiveError` (a context manager)."""

    def __init__(self, source: IO[bytes], name: str) -> None:
        self._source = source
        self._name = name

    def read(self, n: int = -1) -> bytes:
        try:
            return self._source.read(n)
        except TAR_ERRORS as e:
            raise ArchiveError(f"member {self._name!r}: {_first(e)}") from None

    def close(self) -> None:
        self._source.close()

    def __enter__(self) -> _MemberData:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()


def _first(error: BaseException) -> str:
    lines = str(error).strip().splitlines()
    return lines[0] if lines else type(error).__name__
