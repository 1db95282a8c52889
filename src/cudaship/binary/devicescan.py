"""Find every fatbin container in a file, and read standalone device-code files.

:func:`find_containers` does not trust section names or the ``__fatBinC_Wrapper_t`` pointers: it searches the
whole buffer outside executable sections for the container magic (``memmem`` through ctypes where the C
library has it, else the buffer's own ``find``; see :mod:`cudaship.binary._search`), validates each
candidate's header and entry headers against the bytes really present (and against the section holding it),
and jumps over each valid container, so payload bytes are never searched and nothing is decompressed.
Containers that overlap one found earlier are not re-read and the search position only ever moves forward, so
it always ends. Large buffers are cut into chunks searched by worker threads (``memmem`` releases the GIL) and
the chunks' results merged so that they are exactly the sequential scan's (:meth:`_Scanner.parallel` says
why). libcublasLt.so.13 (546 MB) is scanned in 0.15 s of CPU (numbers in docs/performance.md).

Containers are 8-aligned in libraries, executables and object files, but an object file inside a static
archive (``.a``, ``.lib``) starts at any even offset, so candidates at any offset are tried; only the
failures of 8-aligned candidates are reported as rejected (unaligned hits are mostly the magic used as an
immediate operand in host code).

:func:`read_device_file` reads a standalone ``.fatbin`` (containers back to back from offset 0), ``.cubin``
(an EM_CUDA ELF) or ``.ptx`` (text).
"""

from __future__ import annotations

import bisect
import contextlib
import itertools
import mmap
import os
import threading
from collections.abc import Sequence
from dataclasses import dataclass
from typing import NamedTuple

from cudaship.binary._search import Finder, open_finder
from cudaship.binary.fatbin import (
    CONTAINER_HEADER_PREFIX,
    CONTAINER_MAGIC_BYTES,
    EntryBudget,
    ScanBudgetError,
    read_container,
    standalone_code,
)
from cudaship.errors import BinaryFormatError
from cudaship.pages import read_only_map
from cudaship.records.binary import (
    DeviceCode,
    DeviceCodeKind,
    FatbinContainer,
    FileFormat,
    Section,
)
from cudaship.records.buffer import Buffer

#: Sections that hold relocatable (``-rdc``) fatbins: the ELF / Mach-O name, and the PE name cut to 8
#: characters by MSVC's linker. (mingw-w64's ld keeps the long name through the COFF string table.)
RELOCATABLE_SECTIONS = frozenset({"__nv_relfatbin", "__nv_rel"})
#: Sections that hold whole-program fatbins, for reference: ELF, PE (cut), Mach-O (``__NV_CUDA,__nv_fatbin``).
FATBIN_SECTIONS = frozenset({".nv_fatbin", ".nv_fatb", "__nv_fatbin"})
#: Either kind: sections that hold nothing but fatbins.
DEVICE_SECTIONS = FATBIN_SECTIONS | RELOCATABLE_SECTIONS


def is_device_section(name: str | None) -> bool:
    """A section made to hold fatbins: ELF and PE names, and Mach-O ``__NV_CUDA,__nv_fatbin`` style ones."""
    return name is not None and name.rsplit(",", 1)[-1] in DEVICE_SECTIONS


ALIGNMENT = 8


@dataclass(frozen=True)
class RejectedCandidate:
    """A place where the magic appeared but no valid container followed, and why."""

    offset: int
    section: str | None
    reason: str


@dataclass(frozen=True)
class ScanResult:
    containers: tuple[FatbinContainer, ...]
    rejected: tuple[RejectedCandidate, ...]

    @property
    def entries(self) -> tuple[DeviceCode, ...]:
        return tuple(entry for container in self.containers for entry in container.entries)


@dataclass(frozen=True)
class DeviceFile:
    """A standalone device-code file: its format, its containers (fatbin only) and all its device code."""

    format: FileFormat
    containers: tuple[FatbinContainer, ...]
    entries: tuple[DeviceCode, ...]


def is_relocatable_section(name: str | None) -> bool:
    """``__nv_relfatbin`` (ELF), ``__nv_rel`` (PE, cut by MSVC), ``__NV_CUDA,__nv_relfatbin`` (Mach-O)."""
    if name is None:
        return False
    return name.rsplit(",", 1)[-1] in RELOCATABLE_SECTIONS


class _SectionIndex:
    def __init__(self, sections: Sequence[Section]) -> None:
        present = sorted((s for s in sections if s.size > 0), key=lambda s: (s.offset, -s.size))
        self._sections = present
        self._starts = [s.offset for s in present]

    def locate(self, offset: int) -> Section | None:
        i = bisect.bisect_right(self._starts, offset) - 1
        # Sections may overlap in a malformed file; look back a little for one that covers the offset.
        for j in range(i, max(i - 4, -1), -1):
            section = self._sections[j]
            if section.offset <= offset < section.offset + section.size:
                return section
        return None


def _searched_ranges(size: int, sections: Sequence[Section]) -> list[tuple[int, int]]:
    """The parts of the file to search for the magic: all of it but the executable sections.

    Linkers put fatbins in data sections (``.nv_fatbin``, ``.nv_fatb``, ``.cask_resource``, ...); machine code
    (a 100 MB ``.text`` in cuBLASLt) never holds one, and skipping it saves a fifth of the search on large
    libraries. A section named as a fatbin section is always searched, whatever its flags say.
    """
    skipped = sorted(
        (s.offset, s.offset + s.size)
        for s in sections
        if s.executable and s.size > 0 and not is_device_section(s.name)
    )
    ranges: list[tuple[int, int]] = []
    pos = 0
    for start, end in skipped:
        start, end = max(0, min(start, size)), max(0, min(end, size))
        if start > pos:
            ranges.append((pos, start))
        pos = max(pos, end)
    if pos < size:
        ranges.append((pos, size))
    return ranges


def _split_at_device_sections(
    ranges: list[tuple[int, int]], size: int, sections: Sequence[Section]
) -> tuple[list[tuple[int, int]], list[bool]]:
    """``ranges`` cut where device sections (:func:`is_device_section`) begin and end, and for each piece
    whether it lies inside one. Every offset that :class:`_SectionIndex` attributes to a device section is
    inside one's extent, so inside a piece marked True."""
    bounds: list[tuple[int, int]] = []
    for start, end in sorted(
        (max(0, min(s.offset, size)), max(0, min(s.offset + s.size, size)))
        for s in sections
        if s.size > 0 and is_device_section(s.name)
    ):
        if start >= end:
            continue
        if bounds and start <= bounds[-1][1]:
            bounds[-1] = (bounds[-1][0], max(bounds[-1][1], end))
        else:
            bounds.append((start, end))
    pieces: list[tuple[int, int]] = []
    inside: list[bool] = []
    for start, stop in ranges:
        at = start
        for lo, hi in bounds:
            if hi <= at or lo >= stop:
                continue
            if lo > at:
                pieces.append((at, lo))
                inside.append(False)
            at = max(at, lo)
            end = min(hi, stop)
            pieces.append((at, end))
            inside.append(True)
            at = end
        if at < stop:
            pieces.append((at, stop))
            inside.append(False)
    return pieces, inside


class _PageReleaser:
    """Drops the pages of an ``mmap`` that the search has passed, so a 500 MB library searched end to end does
    not stay resident. For other buffers it does nothing. ``start``: where this searcher began (a worker
    searching one chunk releases only its own chunk's pages)."""

    WINDOW = 32 << 20

    def __init__(self, buf: Buffer, start: int = 0) -> None:
        self._map = read_only_map(buf)
        self._released = start - start % mmap.PAGESIZE

    def passed(self, pos: int, *, window: int = WINDOW) -> None:
        if self._map is None or pos - self._released < window:
            return
        end = pos - pos % mmap.PAGESIZE
        if end <= self._released:
            return
        try:
            self._map.madvise(mmap.MADV_DONTNEED, self._released, end - self._released)
        except (OSError, ValueError):  # pragma: no cover - advice only; never fail a scan over it
            self._map = None
            return
        self._released = end


class _Event(NamedTuple):
    """What the scan did at one hit of the magic: the container read there, or why there is none."""

    hit: int
    next: int  #: where the search goes on: past the container, or the next byte
    container: FatbinContainer | None
    rejected: RejectedCandidate | None  #: only for 8-aligned hits
    error: Exception | None = None  #: an unexpected exception (a bug), raised where a sequential scan would


class _Scanner:
    """The scan as a step function: ``next_hit(pos)`` is the first hit of the magic at or after ``pos`` in the
    searched ranges, and ``step(hit)`` reads what is there and says where to go on. Both depend only on their
    argument, which is what makes the parallel scan provably equal to the sequential one (see
    :meth:`parallel`).

    ``header_find``, a finder for :data:`~cudaship.binary.fatbin.CONTAINER_HEADER_PREFIX`, is used outside
    device sections: it skips the hits of the bare magic that the header check would reject at once (and
    that only add a rejected candidate), so the containers found are the same, and the rejected candidates
    the same inside device sections."""

    def __init__(
        self, buf: Buffer, sections: Sequence[Section], find: Finder, header_find: Finder | None = None
    ) -> None:
        self.buf = buf
        self.size = len(buf)
        self.index = _SectionIndex(sections)
        self.ranges = _searched_ranges(self.size, sections)
        self.find = find.find
        self._finds = [find.find] * len(self.ranges)
        if header_find is not None:
            self.ranges, inside = _split_at_device_sections(self.ranges, self.size, sections)
            self._finds = [find.find if device else header_find.find for device in inside]
        self._range_ends = [stop for _, stop in self.ranges]

    def next_hit(self, pos: int, limit: int) -> int:
        """First hit ``h`` with ``pos <= h < limit`` inside a searched range, or -1."""
        for i in range(bisect.bisect_right(self._range_ends, pos), len(self.ranges)):
            start, stop = self.ranges[i]
            if start >= limit:
                break
            hit = self._finds[i](max(pos, start), min(stop, limit))
            if hit >= 0:
                return hit
        return -1

    def step(self, hit: int, budget: EntryBudget) -> _Event:
        section = self.index.locate(hit)
        name = section.name if section else None
        end = section.offset + section.size if section else self.size
        try:
            container = read_container(
                self.buf, hit, end=end, section=name, relocatable=is_relocatable_section(name), budget=budget
            )
        except ScanBudgetError:
            raise
        except BinaryFormatError as e:
            # Unaligned hits are mostly the magic used as an immediate in host code (the runtime compares
            # against it); they are tried, for object files inside archives, but their failures are noise.
            rejected = RejectedCandidate(hit, name, e.message) if hit % ALIGNMENT == 0 else None
            return _Event(hit, hit + 1, None, rejected)
        except Exception as e:  # kept, and raised only if the sequential scan gets here
            return _Event(hit, hit + 1, None, None, e)
        return _Event(hit, hit + container.size, container, None)

    def walk(self, pos: int, limit: int, releaser: _PageReleaser) -> tuple[list[_Event], int]:
        """The scan from ``pos``, over hits before ``limit``: the events and the position it stopped at."""
        events: list[_Event] = []
        budget = EntryBudget(self.size)
        while pos < limit:
            hit = self.next_hit(pos, limit)
            if hit < 0:
                break
            releaser.passed(hit)
            event = self.step(hit, budget)
            events.append(event)
            pos = event.next
        return events, pos

    def chunks(self, count: int) -> list[tuple[int, int]]:
        """``[lo, hi)`` file intervals covering the whole file, each with about the same searched bytes."""
        total = sum(stop - start for start, stop in self.ranges)
        share = max(1, -(-total // count))
        bounds = [0]
        carried = 0
        for start, stop in self.ranges:
            at = start
            while stop - at + carried >= share:
                at += share - carried
                carried = 0
                if at < self.size:
                    bounds.append(at)
            carried += stop - at
        bounds.append(self.size)
        cuts = sorted(set(bounds))
        return list(itertools.pairwise(cuts))

    def parallel(self, workers: int, chunk_count: int) -> list[_Event]:
        """The same events as ``walk(0, size)``, with the file cut into chunks searched by worker threads.

        Worker ``k`` walks chunk ``[lo, hi)`` from ``lo``, independently. The merge replays the sequential
        scan: its position ``pos`` entering chunk ``k`` has no hit in ``[pos, lo)`` left. If ``pos <= lo``
        the sequential scan's next hit is the worker's first, and from there on both take the same steps:
        all of the worker's events are taken. If ``pos > lo`` (a container from an earlier chunk reaches into
        this one), the sequential scan is continued here, hit by hit, until it reaches a hit the worker also
        took a step from; from that hit on the two are the same (each step depends only on its hit), so the
        worker's remaining events are taken. Results (containers, rejected candidates, order, errors) are
        therefore exactly the sequential ones, nested and overlapping containers included.
        """
        chunks = self.chunks(chunk_count)
        results: list[tuple[list[_Event], int] | None] = [None] * len(chunks)
        failures: list[BaseException] = []
        order = itertools.count()  # next() on a count is atomic under the GIL: each chunk is taken once

        def work() -> None:
            try:
                while (k := next(order)) < len(chunks) and not failures:
                    lo, hi = chunks[k]
                    releaser = _PageReleaser(self.buf, lo)
                    events, end = self.walk(lo, hi, releaser)
                    releaser.passed(min(end, hi), window=0)
                    results[k] = (events, end)
            except BaseException as e:  # re-raised below, in the caller's thread
                failures.append(e)

        threads = [
            threading.Thread(target=work, name=f"cudaship-scan-{i}", daemon=True) for i in range(workers - 1)
        ]
        for thread in threads:
            thread.start()
        work()  # the calling thread is a worker too
        for thread in threads:
            thread.join()
        if failures:
            raise failures[0]
        merged: list[_Event] = []
        budget = EntryBudget(self.size)  # for the hits the merge replays itself
        pos = 0
        for (lo, hi), result in zip(chunks, results, strict=True):
            assert result is not None
            events, end = result
            if pos >= hi:
                continue
            if pos <= lo:
                merged.extend(events)
                pos = end
                continue
            taken = {event.hit: i for i, event in enumerate(events)}
            while pos < hi:
                hit = self.next_hit(pos, hi)
                if hit < 0:
                    break
                if hit in taken:
                    merged.extend(events[taken[hit] :])
                    pos = end
                    break
                event = self.step(hit, budget)
                merged.append(event)
                pos = event.next
        return merged


#: Below this many searched bytes one thread is quicker than starting workers.
PARALLEL_MIN_BYTES = 48 << 20
#: Chunks per worker: more chunks balance uneven work (dense containers, load) at a small cost per chunk.
CHUNKS_PER_WORKER = 4


def _worker_count() -> int:
    try:
        cpus = len(os.sched_getaffinity(0))
    except (AttributeError, OSError):  # pragma: no cover - not Linux
        cpus = os.cpu_count() or 1
    return max(1, min(cpus, 4))


def scan_containers(
    buf: Buffer, sections: Sequence[Section] = (), *, all_rejected: bool = True
) -> ScanResult:
    """Every valid fatbin container in ``buf``, plus the candidates that were rejected and why.

    Searches every byte outside executable sections (see :func:`_searched_ranges`); jumps over each valid
    container, so payloads are never searched. Large buffers are searched by several threads where the search
    releases the GIL (``memmem``, see :mod:`cudaship.binary._search`); the result is the sequential one.

    ``all_rejected=False`` reports rejected candidates only in device sections (:func:`is_device_section`,
    where a rejected candidate means corruption), and in exchange searches the rest of the file for the
    container header's first 8 bytes instead of the 4-byte magic: 1.6x faster per byte. The containers are
    the same.
    """
    return _scan(buf, sections, all_rejected=all_rejected)


def _scan(
    buf: Buffer,
    sections: Sequence[Section] = (),
    *,
    native: bool | None = None,
    workers: int | None = None,
    all_rejected: bool = True,
) -> ScanResult:
    """:func:`scan_containers` with the search primitive (``native``) and thread count (``workers``) chosen
    by the caller instead of by the defaults (tests compare every combination)."""
    with contextlib.ExitStack() as stack:
        finder = stack.enter_context(open_finder(buf, CONTAINER_MAGIC_BYTES, native=native))
        header_finder = None
        if not all_rejected:
            header_finder = stack.enter_context(open_finder(buf, CONTAINER_HEADER_PREFIX, native=native))
        scanner = _Scanner(buf, sections, finder, header_finder)
        if workers is None:
            searched = sum(stop - start for start, stop in scanner.ranges)
            parallel = finder.releases_gil and searched >= PARALLEL_MIN_BYTES
            workers = _worker_count() if parallel else 1
        if workers > 1:
            events = scanner.parallel(workers, workers * CHUNKS_PER_WORKER)
        else:
            events, _ = scanner.walk(0, scanner.size, _PageReleaser(buf))
    containers: list[FatbinContainer] = []
    rejected: list[RejectedCandidate] = []
    for event in events:
        if event.error is not None:
            raise event.error
        if event.container is not None:
            containers.append(event.container)
        elif event.rejected is not None and (all_rejected or is_device_section(event.rejected.section)):
            rejected.append(event.rejected)
    return ScanResult(tuple(containers), tuple(rejected))


def find_containers(buf: Buffer, sections: Sequence[Section] = ()) -> tuple[FatbinContainer, ...]:
    """Every valid fatbin container anywhere in ``buf``, in file order, each attributed to its section.

    ``sections`` are the host binary's sections (from the ELF / PE / Mach-O reader); a container inside one
    must end inside it. ``relocatable`` is set for containers in ``__nv_relfatbin`` (PE: ``__nv_rel``).
    Candidates that fail validation are skipped; :func:`scan_containers` also says why.
    """
    return scan_containers(buf, sections).containers


def read_fatbin_file(buf: Buffer) -> tuple[FatbinContainer, ...]:
    """A standalone ``.fatbin``: one container at offset 0, possibly more back to back (with zero padding
    between them). Anything else in the file is an error."""
    with open_finder(buf, CONTAINER_MAGIC_BYTES) as finder:
        return _read_fatbin_file(buf, finder)


def _read_fatbin_file(buf: Buffer, finder: Finder) -> tuple[FatbinContainer, ...]:
    size = len(buf)
    containers = [read_container(buf, 0)]
    pos = containers[0].size
    while pos < size:
        hit = finder.find(pos, size)
        gap_end = size if hit < 0 else hit
        gap = bytes(buf[pos:gap_end])
        stray = gap.lstrip(b"\0")
        if stray:
            where = pos + len(gap) - len(stray)
            raise BinaryFormatError(
                f"unexpected bytes at {where:#x} after fatbin container {len(containers)}"
            )
        if hit < 0:
            break
        containers.append(read_container(buf, hit))
        pos = hit + containers[-1].size
    return tuple(containers)


# cubin and PTX readers are imported where standalone device files are read: a library's scan needs neither
# (2 ms of every inspect's start-up).


def _cubin_code(buf: Buffer) -> DeviceCode:
    # standalone cubin/PTX readers when used: start-up time
    from cudaship.binary.cubin import cubin_device_code

    return cubin_device_code(buf)


def _ptx_code(buf: Buffer) -> DeviceCode:
    # standalone cubin/PTX readers when used: start-up time
    from cudaship.binary.ptx import read_ptx, virtual_arch

    info = read_ptx(buf)
    sm, variant = virtual_arch(info.target)
    return standalone_code(
        DeviceCodeKind.PTX, sm, variant, len(buf), len(info.entries), version=info.isa_version
    )


def detect_device_format(buf: Buffer) -> FileFormat | None:
    """FATBIN, CUBIN or PTX from the first bytes of ``buf``; None when it is none of them."""
    from cudaship.binary.cubin import is_cubin  # standalone cubin/PTX readers when used: start-up time
    from cudaship.binary.ptx import looks_like_ptx  # standalone cubin/PTX readers when used: start-up time

    if bytes(buf[:4]) == CONTAINER_MAGIC_BYTES:
        return FileFormat.FATBIN
    if is_cubin(buf):
        return FileFormat.CUBIN
    if looks_like_ptx(buf):
        return FileFormat.PTX
    return None


def read_device_file(buf: Buffer) -> DeviceFile:
    """Read a standalone ``.fatbin``, ``.cubin`` or ``.ptx``. Raises :class:`BinaryFormatError` otherwise."""
    fmt = detect_device_format(buf)
    if fmt is FileFormat.FATBIN:
        containers = read_fatbin_file(buf)
        return DeviceFile(fmt, containers, tuple(e for c in containers for e in c.entries))
    if fmt is FileFormat.CUBIN:
        return DeviceFile(fmt, (), (_cubin_code(buf),))
    if fmt is FileFormat.PTX:
        return DeviceFile(fmt, (), (_ptx_code(buf),))
    raise BinaryFormatError("not a fatbin, cubin or PTX file")
