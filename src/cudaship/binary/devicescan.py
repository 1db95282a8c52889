"""Find every fatbin container in a file, and read standalone device-code files.

:func:`find_containers` does not trust section names or the ``__fatBinC_Wrapper_t`` pointers: it searches the
whole buffer for the container magic (a C-speed ``find``), validates each candidate's
header and entry headers against the bytes really present (and against the section holding it), and jumps
over each valid container, so payload bytes are never searched and nothing is decompressed. Containers that
overlap one found earlier are not re-read and the search position only ever moves forward, so it always
ends. A 600 MB library is scanned in about a second (numbers in docs/formats.md).

Containers are 8-aligned in libraries, executables and object files, but an object file inside a static
archive (``.a``, ``.lib``) starts at any even offset, so candidates at any offset are tried; only the
failures of 8-aligned candidates are reported as rejected (unaligned hits are mostly the magic used as an
immediate operand in host code).

:func:`read_device_file` reads a standalone ``.fatbin`` (containers back to back from offset 0), ``.cubin``
(an EM_CUDA ELF) or ``.ptx`` (text).
"""

from __future__ import annotations

import bisect
import mmap
import re
from collections.abc import Callable, Sequence
from dataclasses import dataclass

from cudaship.binary.cubin import cubin_is_relocatable, is_cubin, read_cubin
from cudaship.binary.fatbin import CONTAINER_MAGIC_BYTES, read_container
from cudaship.binary.ptx import looks_like_ptx, read_ptx, virtual_arch
from cudaship.binary.records import (
    Buffer,
    Compression,
    DeviceCode,
    DeviceCodeKind,
    FatbinContainer,
    FileFormat,
    Section,
)
from cudaship.errors import BinaryFormatError

#: Sections that hold relocatable (``-rdc``) fatbins: the ELF / Mach-O name, and the PE name cut to 8
#: characters by MSVC's linker. (mingw-w64's ld keeps the long name through the COFF string table.)
RELOCATABLE_SECTIONS = frozenset({"__nv_relfatbin", "__nv_rel"})
#: Sections that hold whole-program fatbins, for reference: ELF, PE (cut), Mach-O (``__NV_CUDA,__nv_fatbin``).
FATBIN_SECTIONS = frozenset({".nv_fatbin", ".nv_fatb", "__nv_fatbin"})
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


def _finder(buf: Buffer) -> Callable[[int], int]:
    """``find(pos)`` for the magic: the buffer's own ``find`` (bytes, bytearray, mmap) or a regex search."""
    find = getattr(buf, "find", None)
    if find is not None:
        return lambda pos: int(find(CONTAINER_MAGIC_BYTES, pos))
    pattern = re.compile(re.escape(CONTAINER_MAGIC_BYTES))

    def search(pos: int) -> int:
        match = pattern.search(buf, pos)
        return -1 if match is None else int(match.start())

    return search


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
    device_sections = FATBIN_SECTIONS | RELOCATABLE_SECTIONS
    skipped = sorted(
        (s.offset, s.offset + s.size)
        for s in sections
        if s.executable and s.size > 0 and s.name.rsplit(",", 1)[-1] not in device_sections
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


class _PageReleaser:
    """Drops the pages of an ``mmap`` that the search has passed, so a 500 MB library searched end to end does
    not stay resident. For other buffers it does nothing."""

    WINDOW = 32 << 20

    def __init__(self, buf: Buffer) -> None:
        self._map = buf if isinstance(buf, mmap.mmap) and hasattr(mmap, "MADV_DONTNEED") else None
        self._released = 0

    def passed(self, pos: int) -> None:
        if self._map is None or pos - self._released < self.WINDOW:
            return
        end = pos - pos % mmap.PAGESIZE
        try:
            self._map.madvise(mmap.MADV_DONTNEED, self._released, end - self._released)
        except (OSError, ValueError):  # pragma: no cover - advice only; never fail a scan over it
            self._map = None
            return
        self._released = end


def scan_containers(buf: Buffer, sections: Sequence[Section] = ()) -> ScanResult:
    """Every valid fatbin container in ``buf``, plus the candidates that were rejected and why.

    Searches every byte outside executable sections (see :func:`_searched_ranges`); jumps over each valid
    container, so payloads are never searched.
    """
    find = _finder(buf)
    index = _SectionIndex(sections)
    size = len(buf)
    releaser = _PageReleaser(buf)
    containers: list[FatbinContainer] = []
    rejected: list[RejectedCandidate] = []
    pos = 0
    for start, stop in _searched_ranges(size, sections):
        pos = max(pos, start)
        while pos < stop:
            hit = find(pos)
            if hit < 0 or hit >= stop:
                break
            releaser.passed(hit)
            aligned = hit % ALIGNMENT == 0
            section = index.locate(hit)
            name = section.name if section else None
            end = section.offset + section.size if section else size
            try:
                container = read_container(
                    buf, hit, end=end, section=name, relocatable=is_relocatable_section(name)
                )
            except BinaryFormatError as e:
                # Unaligned hits are mostly the magic used as an immediate in host code (the runtime compares
                # against it); they are tried, for object files inside archives, but their failures are noise.
                if aligned:
                    rejected.append(RejectedCandidate(hit, name, e.message))
                pos = hit + 1
                continue
            containers.append(container)
            pos = hit + container.size
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
    size = len(buf)
    find = _finder(buf)
    containers = [read_container(buf, 0)]
    pos = containers[0].size
    while pos < size:
        hit = find(pos)
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


def _cubin_code(buf: Buffer) -> DeviceCode:
    info = read_cubin(buf)
    return DeviceCode(
        kind=DeviceCodeKind.SASS,
        arch=f"sm_{info.sm}{info.variant}",
        sm=info.sm,
        variant=info.variant,
        section=None,
        relocatable=cubin_is_relocatable(buf),
        compression=Compression.NONE,
        stored_size=len(buf),
        uncompressed_size=None,
        offset=0,
        toolkit_version=info.toolkit_version,
    )


def _ptx_code(buf: Buffer) -> DeviceCode:
    info = read_ptx(buf)
    sm, variant = virtual_arch(info.target)
    return DeviceCode(
        kind=DeviceCodeKind.PTX,
        arch=f"compute_{sm}{variant}",
        sm=sm,
        variant=variant,
        section=None,
        relocatable=False,
        compression=Compression.NONE,
        stored_size=len(buf),
        uncompressed_size=None,
        offset=0,
        version=info.isa_version,
    )


def detect_device_format(buf: Buffer) -> FileFormat | None:
    """FATBIN, CUBIN or PTX from the first bytes of ``buf``; None when it is none of them."""
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
