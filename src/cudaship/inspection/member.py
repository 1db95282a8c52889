"""What a worker process does with one member of a wheel: the scan's per-member readers.

:func:`scan_member` (``audit``, ``repair``) hashes a member and reads it into a report when native, or its
library loads when a Python file; :func:`inspect_member` (``inspect``, ``gpus``) reads only the members that
may be native. Both are :data:`~cudaship.archive.pool.MemberReader` functions, run by
:meth:`~cudaship.archive.pool.Workers.dispatch` in each worker process, so this module imports only what a
worker needs (the archive layer, the binary readers, the Python-loads scanner): a worker that imported the
scan's METADATA, platform and requirement machinery as well started measurably slower (docs/performance.md).
"""

from __future__ import annotations

import hashlib
import itertools
from collections.abc import Callable
from contextlib import suppress
from dataclasses import dataclass

from cudaship.archive.pool import SPILL_SIZE, CompressedPages
from cudaship.archive.select import MAGIC_BYTES, is_native_member
from cudaship.archive.spill import Budget, Hasher, Sink, released
from cudaship.archive.zip import ZipArchive, ZipMember
from cudaship.errors import ArchiveError, CudashipError
from cudaship.inspection.wheel import failed_member, member_report
from cudaship.records.files import FileReport
from cudaship.wheel import pyloads
from cudaship.wheel.archive import WheelArchive
from cudaship.wheel.records import LibraryList, PythonLoads

__all__ = ["MemberResult", "inspect_member", "scan_member"]

#: Members from this size on are hashed on a helper thread while the next chunks are inflated.
_THREADED_HASH = 8 << 20


@dataclass
class MemberResult:
    name: str
    size: int
    digest: bytes | None  # the raw digest: RECORD's encoding is the parent's
    algorithm: str
    report: FileReport | None
    error: str | None
    loads: PythonLoads | LibraryList | None = None


def scan_member(
    archive: ZipArchive,
    member: ZipMember,
    budget: Budget,
    _announce: object,
    path: str,
    algorithm: str,
    details: bool,
) -> MemberResult:
    """One member: hashed with ``algorithm``, read into a report when native, its library loads when a
    Python file or a list of library names (a :data:`~cudaship.archive.pool.MemberReader`)."""
    name = member.name
    report: FileReport | None = None
    whole = archive.small(member)
    if whole is not None:  # thousands of small members: one step each (a bad one goes the long way below)
        if is_native_member(name, whole[:MAGIC_BYTES]):
            with released(memoryview(whole)) as view:
                report = member_report(view, name, container=path, toolkit_sample=details)
        digest = hashlib.new(algorithm, whole).digest()
        loads: PythonLoads | LibraryList | None = None
        if report is None:
            if pyloads.is_python_source(name):
                loads = pyloads.python_loads(name, whole)
            elif pyloads.is_library_list(name):
                loads = pyloads.library_list(name, whole)
        return MemberResult(name, len(whole), digest, algorithm, report, None, loads)
    hasher: Hasher | None = None
    size = 0
    sink: Sink | None = None
    try:
        archive.check(member)
        hasher = Hasher(algorithm, threaded=member.size >= _THREADED_HASH)
        chunks = archive.chunks(member, verify_crc=False)  # the RECORD hash is the stronger check
        first = next(chunks, b"")
        if is_native_member(name, first[:MAGIC_BYTES]):
            sink = Sink(member.size, budget, spill_size=SPILL_SIZE)
        pages = CompressedPages(archive.buf, member.data_offset, member.compressed_size, member.size)
        for chunk in itertools.chain((first,), chunks):
            size += len(chunk)
            hasher.update(chunk)
            if sink is not None:
                sink.write(chunk)
            pages.produced(len(chunk))
        pages.finished()
        digest = hasher.digest()
        if sink is not None:
            buf = sink.buffer()
            report = member_report(buf, name, container=path, toolkit_sample=details)
            if isinstance(buf, memoryview):
                # a view still exported (a search's ctypes buffer awaiting garbage collection) keeps the
                # memory alive until it goes; never an error (it was an intermittent exit 70)
                with suppress(BufferError):
                    buf.release()
    except ArchiveError as e:
        return MemberResult(name, size, None, algorithm, None, e.message.removeprefix(f"member {name}: "))
    finally:
        if hasher is not None:
            hasher.finish()
        if sink is not None:
            sink.close()
    return MemberResult(name, size, digest, algorithm, report, None)


def inspect_member(
    zip_archive: ZipArchive,
    member: ZipMember,
    budget: Budget,
    announce: Callable[[ZipMember], None] | None,
    label: str,
    details: bool,
) -> FileReport | None:
    """The report of one member, or None when it is not native (then only its first bytes were inflated);
    a :data:`~cudaship.archive.pool.MemberReader`."""
    archive = WheelArchive(label, archive=zip_archive)
    try:
        if not is_native_member(member.name, archive.head(member)):
            return None
        if announce is not None:
            announce(member)
        with archive.member_buffer(member, budget=budget) as buf:
            return member_report(buf, member.name, container=label, details=details)
    except CudashipError as e:  # this member could not be unpacked; the others still are
        return failed_member(member.name, member.size, label, e.message)
