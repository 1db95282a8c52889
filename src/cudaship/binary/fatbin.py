"""Fatbin containers (magic ``0xBA55ED50``) and their entries.

A container is a 16-byte header (``u32 magic, u16 version, u16 header_size, u64 fat_size``) followed by
``fat_size`` bytes of entries. Each entry is a header of at least 64 bytes (its own ``header_size``), then
``payload_size`` stored bytes: a cubin (ELF), PTX text or LTO-IR, raw or compressed (LZ4 raw block / ZSTD).
Every field is checked against the bytes that are really there before it is used, so random bytes that happen
to start with the magic are rejected and a size of 2**63 is a clean :class:`BinaryFormatError`, never an
allocation. Nothing here decompresses; :func:`entry_payload` does, on demand, for one entry.

Layout details (verified on nvcc 13.0 output) are in docs/formats.md.
"""

from __future__ import annotations

import struct
import threading
from enum import IntEnum, IntFlag
from typing import NamedTuple

from cudaship.binary.decompress import decompress
from cudaship.binary.magic import FATBIN_MAGIC
from cudaship.binary.records import Buffer, Compression, DeviceCode, DeviceCodeKind, FatbinContainer
from cudaship.errors import BinaryFormatError

CONTAINER_MAGIC = 0xBA55ED50
CONTAINER_MAGIC_BYTES = FATBIN_MAGIC  #: as it appears in a file (the first-bytes table keeps it)
#: Container magic of pre-2010 toolkits; recognised to say so, not parsed.
LEGACY_CONTAINER_MAGIC = 0x1EE55A01
#: Magic of the 24-byte ``__fatBinC_Wrapper_t`` in ``.nvFatBinSegment``: a pointer holder, not a container.
WRAPPER_MAGIC = 0x466243B1

CONTAINER_VERSION = 1
#: Container header sizes seen in every toolkit to date.
CONTAINER_HEADER_SIZES = frozenset({16})
ENTRY_VERSION = 0x0101
MIN_ENTRY_HEADER = 64
#: Entry headers seen: 64, 72, 80, 96, 104, 112, 128 bytes. The extra bytes hold a name and an options
#: string; anything beyond a page is not a header.
MAX_ENTRY_HEADER = 4096
#: Largest SM number we accept in an entry header (sm_10 ... sm_121 exist today).
MAX_SM = 999

_CONTAINER = struct.Struct("<IHHQ")
#: kind, version, header_size, payload_size, compressed_size, options_descriptor, minor, major, sm,
#: name_offset, name_length, flags, reserved, uncompressed_size
_ENTRY = struct.Struct("<HHIQIIHHIIIQQQ")
_OPTIONS = struct.Struct("<II")

assert _CONTAINER.size == 16 and _ENTRY.size == MIN_ENTRY_HEADER
assert struct.pack("<I", CONTAINER_MAGIC) == CONTAINER_MAGIC_BYTES


class EntryKind(IntEnum):
    PTX = 1
    ELF = 2
    OLD_CUBIN = 4
    NVVM = 8


class EntryFlag(IntFlag):
    BITS64 = 0x1
    DEBUG = 0x2
    HOST_LINUX = 0x10
    HOST_MAC = 0x20
    HOST_WINDOWS = 0x40
    LZ4 = 0x2000
    ZSTD = 0x8000
    ARCH_SPECIFIC = 0x100000  #: an 'a' target (sm_90a, compute_120a)
    FAMILY_SPECIFIC = 0x200000  #: an 'f' target (sm_100f)


# Plain ints for the hot path (IntFlag arithmetic costs microseconds per operation).
_DEBUG, _LINUX, _MAC, _WINDOWS = 0x2, 0x10, 0x20, 0x40
_LZ4, _ZSTD, _ARCH_SPECIFIC, _FAMILY_SPECIFIC = 0x2000, 0x8000, 0x100000, 0x200000

_KINDS = {
    EntryKind.PTX: DeviceCodeKind.PTX,
    EntryKind.ELF: DeviceCodeKind.SASS,
    EntryKind.OLD_CUBIN: DeviceCodeKind.SASS,
    EntryKind.NVVM: DeviceCodeKind.LTOIR,
}


class EntryHeader(NamedTuple):
    """The raw fields of one entry header, validated against the container that holds it.

    (A named tuple, not a dataclass: a big library has hundreds of thousands of entries.)"""

    offset: int
    kind: int
    header_size: int
    payload_size: int
    compressed_size: int
    options_descriptor: int
    minor: int
    major: int
    sm: int
    name_offset: int
    name_length: int
    flags: int
    uncompressed_size: int

    @property
    def payload_offset(self) -> int:
        return self.offset + self.header_size

    @property
    def end(self) -> int:
        return self.offset + self.header_size + self.payload_size

    @property
    def compression(self) -> Compression:
        if self.flags & _ZSTD:
            return Compression.ZSTD
        if self.flags & _LZ4:
            return Compression.LZ4
        return Compression.NONE

    @property
    def variant(self) -> str:
        if self.flags & _ARCH_SPECIFIC:
            return "a"
        if self.flags & _FAMILY_SPECIFIC:
            return "f"
        return ""


def arch_name(kind: DeviceCodeKind, sm: int, variant: str) -> str:
    """``compute_XY`` for PTX, ``sm_XY`` otherwise, with the variant letter."""
    prefix = "compute" if kind is DeviceCodeKind.PTX else "sm"
    return f"{prefix}_{sm}{variant}"


def _host(flags: int) -> str | None:
    if flags & _LINUX:
        return "linux"
    if flags & _WINDOWS:
        return "windows"
    if flags & _MAC:
        return "mac"
    return None


def _text(raw: bytes) -> str | None:
    text = raw.split(b"\0", 1)[0].decode("utf-8", "replace").strip()
    return text or None


def read_entry_header(buf: Buffer, offset: int, end: int) -> EntryHeader:
    """Read and validate the entry header at ``offset``; the entry must end at or before ``end``."""
    if offset < 0 or offset + MIN_ENTRY_HEADER > end:
        raise BinaryFormatError(
            f"fatbin entry at {offset:#x} is truncated (needs 64 bytes, {end - offset} left)"
        )
    fields = _ENTRY.unpack_from(buf, offset)
    (kind, version, hs, payload, compressed, options, minor, major, sm, name_off, name_len, flags) = fields[
        :12
    ]
    header = EntryHeader(
        offset,
        kind,
        hs,
        payload,
        compressed,
        options,
        minor,
        major,
        sm,
        name_off,
        name_len,
        flags,
        fields[13],
    )
    where = f"fatbin entry at {offset:#x}"
    if header.kind == 0:
        raise BinaryFormatError(f"{where} has kind 0")
    if version != ENTRY_VERSION:
        raise BinaryFormatError(f"{where} has version {version:#x}, expected {ENTRY_VERSION:#x}")
    if hs < MIN_ENTRY_HEADER or hs > MAX_ENTRY_HEADER or hs % 8:
        raise BinaryFormatError(f"{where} has an implausible header size {hs}")
    if header.payload_size > end - offset - hs:
        raise BinaryFormatError(
            f"{where} claims {header.payload_size} payload bytes but only {max(end - offset - hs, 0)} remain"
        )
    if header.payload_size % 8:
        raise BinaryFormatError(
            f"{where} has a payload size {header.payload_size} that is not a multiple of 8"
        )
    if not 0 < header.sm <= MAX_SM:
        raise BinaryFormatError(f"{where} names an implausible SM {header.sm}")
    if header.compressed_size > header.payload_size:
        raise BinaryFormatError(
            f"{where} claims {header.compressed_size} compressed bytes "
            f"in a {header.payload_size}-byte payload"
        )
    if (header.flags & _LZ4) and (header.flags & _ZSTD):
        raise BinaryFormatError(f"{where} is flagged both LZ4 and ZSTD")
    if header.flags & (_LZ4 | _ZSTD) and (header.compressed_size == 0 or header.uncompressed_size == 0):
        raise BinaryFormatError(f"{where} is flagged compressed but records no compressed/uncompressed size")
    if header.name_length and (
        header.name_offset < MIN_ENTRY_HEADER or header.name_offset + header.name_length > hs
    ):
        raise BinaryFormatError(f"{where} has a name outside its header")
    if header.options_descriptor and header.options_descriptor + _OPTIONS.size > hs:
        raise BinaryFormatError(f"{where} has an options descriptor outside its header")
    if header.options_descriptor:
        opt_off, opt_len = _OPTIONS.unpack_from(buf, offset + header.options_descriptor)
        if opt_len and (opt_off < MIN_ENTRY_HEADER or opt_off + opt_len > hs):
            raise BinaryFormatError(f"{where} has an options string outside its header")
    return header


def entry_options(buf: Buffer, header: EntryHeader) -> bytes:
    """The bytes the options descriptor points at: ptxas options (PTX) or a copy of ``.nv.compat`` (ELF)."""
    if not header.options_descriptor:
        return b""
    opt_off, opt_len = _OPTIONS.unpack_from(buf, header.offset + header.options_descriptor)
    return bytes(buf[header.offset + opt_off : header.offset + opt_off + opt_len])


_Traits = tuple[DeviceCodeKind, str, str, Compression, "str | None", bool, str]
#: Per-(kind, sm, flags, version) facts, shared by the many entries of a library that agree on them. Scan
#: threads share it: a hit is one atomic dict read; a miss fills it under the lock.
_TRAITS: dict[tuple[int, int, int, int, int], _Traits] = {}
_TRAITS_LOCK = threading.Lock()


def _traits(header: EntryHeader) -> _Traits:
    key = (header.kind, header.sm, header.flags, header.major, header.minor)
    found = _TRAITS.get(key)
    if found is not None:
        return found
    with _TRAITS_LOCK:
        return _fill_traits(key, header)


def _fill_traits(key: tuple[int, int, int, int, int], header: EntryHeader) -> _Traits:
    found = _TRAITS.get(key)
    if found is None:
        kind = _KINDS.get(header.kind, DeviceCodeKind.UNKNOWN)  # type: ignore[call-overload]
        variant = header.variant
        found = (
            kind,
            arch_name(kind, header.sm, variant),
            variant,
            header.compression,
            _host(header.flags),
            bool(header.flags & _DEBUG),
            f"{header.major}.{header.minor}",
        )
        if len(_TRAITS) > 4096:
            _TRAITS.clear()
        _TRAITS[key] = found
    return found


def device_code(
    buf: Buffer,
    header: EntryHeader,
    *,
    container_offset: int | None,
    section: str | None,
    relocatable: bool,
) -> DeviceCode:
    """Turn a validated entry header into a :class:`DeviceCode` record (reads only the header bytes)."""
    kind, arch, variant, compression, host, debug, version = _traits(header)
    name = None
    if header.name_length:
        start = header.offset + header.name_offset
        name = _text(bytes(buf[start : start + header.name_length]))
    options = None
    if kind is DeviceCodeKind.PTX:
        options = _text(entry_options(buf, header))
    return DeviceCode(
        kind=kind,
        arch=arch,
        sm=header.sm,
        variant=variant,
        section=section,
        relocatable=relocatable,
        compression=compression,
        stored_size=header.payload_size,
        uncompressed_size=header.uncompressed_size if compression is not Compression.NONE else None,
        offset=header.offset,
        container_offset=container_offset,
        version=version,
        flags=header.flags,
        name=name,
        host=host,
        debug=debug,
        ptxas_options=options,
    )


def _all_zero(buf: Buffer, start: int, end: int) -> bool:
    chunk = bytes(buf[start:end])
    return not chunk.strip(b"\0")


def container_extent(buf: Buffer, offset: int, end: int | None = None) -> int:
    """Validate the 16-byte container header at ``offset`` and return the container's total size.

    ``end`` bounds the container (the end of the section holding it, else the end of the buffer).
    """
    header_size, fat_size = _container_header(buf, offset, end)
    return header_size + fat_size


def _container_header(buf: Buffer, offset: int, end: int | None) -> tuple[int, int]:
    """The validated ``(header_size, fat_size)`` of the container at ``offset`` (:func:`container_extent`)."""
    limit = len(buf) if end is None else min(end, len(buf))
    where = f"fatbin container at {offset:#x}"
    if offset < 0 or offset + _CONTAINER.size > limit:
        raise BinaryFormatError(f"{where} is truncated (header needs 16 bytes)")
    magic, version, header_size, fat_size = _CONTAINER.unpack_from(buf, offset)
    if magic != CONTAINER_MAGIC:
        if magic == LEGACY_CONTAINER_MAGIC:
            raise BinaryFormatError(f"{where} is a pre-2010 fatbin (magic {magic:#010x}), not supported")
        raise BinaryFormatError(f"{where} has magic {magic:#010x}, expected {CONTAINER_MAGIC:#010x}")
    if version != CONTAINER_VERSION:
        raise BinaryFormatError(f"{where} has version {version}, expected {CONTAINER_VERSION}")
    if header_size not in CONTAINER_HEADER_SIZES:
        raise BinaryFormatError(f"{where} has an unknown header size {header_size}")
    if fat_size > limit - offset - header_size:
        raise BinaryFormatError(
            f"{where} claims {fat_size} bytes but only {max(limit - offset - header_size, 0)} remain"
        )
    return int(header_size), int(fat_size)


def read_entry_headers(buf: Buffer, offset: int, end: int | None = None) -> tuple[EntryHeader, ...]:
    """Validate the container at ``offset`` and every entry header in it.

    A container with ``fat_size == 0`` is valid and empty: nvcc's device-link step writes one into a library
    built with PTX only. One whose bytes are all padding is not."""
    return _read_entry_headers(buf, offset, end)[1]


def _read_entry_headers(buf: Buffer, offset: int, end: int | None) -> tuple[int, tuple[EntryHeader, ...]]:
    """:func:`read_entry_headers`, with the container's total size (its header is read once, here)."""
    header_size, fat_size = _container_header(buf, offset, end)
    size = header_size + fat_size
    stop = offset + size
    pos = offset + header_size
    headers: list[EntryHeader] = []
    while pos < stop:
        if stop - pos < MIN_ENTRY_HEADER or (buf[pos] == 0 and _all_zero(buf, pos, pos + MIN_ENTRY_HEADER)):
            # Tail padding inside the container is allowed, garbage is not.
            if not _all_zero(buf, pos, stop):
                raise BinaryFormatError(f"fatbin container at {offset:#x} has stray bytes at {pos:#x}")
            break
        header = read_entry_header(buf, pos, stop)
        headers.append(header)
        pos = header.end
    if not headers and size > header_size:
        raise BinaryFormatError(f"fatbin container at {offset:#x} holds no entries")
    return size, tuple(headers)


def read_container(
    buf: Buffer,
    offset: int = 0,
    *,
    end: int | None = None,
    section: str | None = None,
    relocatable: bool = False,
) -> FatbinContainer:
    """Read the fatbin container at ``offset`` (header and entry headers only; nothing is decompressed)."""
    size, headers = _read_entry_headers(buf, offset, end)
    entries = tuple(
        device_code(buf, h, container_offset=offset, section=section, relocatable=relocatable)
        for h in headers
    )
    return FatbinContainer(
        offset=offset, size=size, section=section, relocatable=relocatable, entries=entries
    )


def entry_payload(buf: Buffer, entry: DeviceCode) -> bytes:
    """The payload of one fatbin entry, decompressed (bounded by its recorded size).

    ``entry`` must come from :func:`read_container` (or the scanner) on this same buffer; its header is read
    and validated again, so a stale or forged record gives :class:`BinaryFormatError`, not garbage.
    """
    end = len(buf)
    if entry.container_offset is not None:
        end = entry.container_offset + container_extent(buf, entry.container_offset)
    header = read_entry_header(buf, entry.offset, end)
    if header.compression is Compression.NONE:
        return bytes(buf[header.payload_offset : header.end])
    stored = bytes(buf[header.payload_offset : header.payload_offset + header.compressed_size])
    try:
        return decompress(stored, header.compression, header.uncompressed_size)
    except BinaryFormatError as e:
        raise BinaryFormatError(f"fatbin entry at {entry.offset:#x}: {e.message}") from e
