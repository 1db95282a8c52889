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
from cudaship.errors import BinaryFormatError
from cudaship.records.binary import Compression, DeviceCode, DeviceCodeKind, FatbinContainer
from cudaship.records.buffer import Buffer

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

#: The first 8 bytes of every container that can pass :func:`container_extent`: the magic, version 1 and the
#: one header size. A hit of the magic not followed by these is rejected before anything else is read, so
#: a scan that needs no reasons for such rejections can search for this longer needle (faster per byte).
(_HEADER_SIZE,) = CONTAINER_HEADER_SIZES
CONTAINER_HEADER_PREFIX = struct.pack("<IHH", CONTAINER_MAGIC, CONTAINER_VERSION, _HEADER_SIZE)


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
_COMPRESSED = _LZ4 | _ZSTD

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


def standalone_code(
    kind: DeviceCodeKind,
    sm: int,
    variant: str,
    size: int,
    kernels: int,
    *,
    relocatable: bool = False,
    version: str | None = None,
    toolkit_version: str | None = None,
) -> DeviceCode:
    """The record of a device code file on its own (a ``.cubin`` or ``.ptx`` of ``size`` bytes): no host
    section, stored as it is, the whole file from offset 0."""
    return DeviceCode(
        kind=kind,
        arch=arch_name(kind, sm, variant),
        sm=sm,
        variant=variant,
        section=None,
        relocatable=relocatable,
        compression=Compression.NONE,
        stored_size=size,
        uncompressed_size=None,
        offset=0,
        version=version,
        toolkit_version=toolkit_version,
        kernels=kernels,
    )


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
    """Read and validate the entry header at ``offset``; the entry must end at or before ``end``.

    (Runs for every entry of every candidate: the fields are checked as locals and the record is built last.)
    """
    if offset < 0 or offset + MIN_ENTRY_HEADER > end:
        raise BinaryFormatError(
            f"fatbin entry at {offset:#x} is truncated (needs 64 bytes, {end - offset} left)"
        )
    fields = _ENTRY.unpack_from(buf, offset)
    kind, version, hs, payload, compressed, options, minor, major, sm, name_off, name_len, flags = fields[:12]
    size = fields[13]
    if kind == 0:
        raise BinaryFormatError(f"fatbin entry at {offset:#x} has kind 0")
    if version != ENTRY_VERSION:
        raise BinaryFormatError(
            f"fatbin entry at {offset:#x} has version {version:#x}, expected {ENTRY_VERSION:#x}"
        )
    if hs < MIN_ENTRY_HEADER or hs > MAX_ENTRY_HEADER or hs % 8:
        raise BinaryFormatError(f"fatbin entry at {offset:#x} has an implausible header size {hs}")
    if payload > end - offset - hs:
        raise BinaryFormatError(
            f"fatbin entry at {offset:#x} claims {payload} payload bytes "
            f"but only {max(end - offset - hs, 0)} remain"
        )
    if payload % 8:
        raise BinaryFormatError(
            f"fatbin entry at {offset:#x} has a payload size {payload} that is not a multiple of 8"
        )
    if not 0 < sm <= MAX_SM:
        raise BinaryFormatError(f"fatbin entry at {offset:#x} names an implausible SM {sm}")
    if compressed > payload:
        raise BinaryFormatError(
            f"fatbin entry at {offset:#x} claims {compressed} compressed bytes in a {payload}-byte payload"
        )
    if flags & _COMPRESSED:
        if flags & _COMPRESSED == _COMPRESSED:
            raise BinaryFormatError(f"fatbin entry at {offset:#x} is flagged both LZ4 and ZSTD")
        if compressed == 0 or size == 0:
            raise BinaryFormatError(
                f"fatbin entry at {offset:#x} is flagged compressed "
                "but records no compressed/uncompressed size"
            )
    if name_len and (name_off < MIN_ENTRY_HEADER or name_off + name_len > hs):
        raise BinaryFormatError(f"fatbin entry at {offset:#x} has a name outside its header")
    if options:
        if options + _OPTIONS.size > hs:
            raise BinaryFormatError(
                f"fatbin entry at {offset:#x} has an options descriptor outside its header"
            )
        opt_off, opt_len = _OPTIONS.unpack_from(buf, offset + options)
        if opt_len and (opt_off < MIN_ENTRY_HEADER or opt_off + opt_len > hs):
            raise BinaryFormatError(f"fatbin entry at {offset:#x} has an options string outside its header")
    return EntryHeader(
        offset, kind, hs, payload, compressed, options, minor, major, sm, name_off, name_len, flags, size
    )


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


#: :class:`DeviceCode`'s fields in order: :func:`device_code` fills a record's ``__dict__`` with these.
_DEVICE_CODE_FIELDS = (
    "kind",
    "arch",
    "sm",
    "variant",
    "section",
    "relocatable",
    "compression",
    "stored_size",
    "uncompressed_size",
    "offset",
    "container_offset",
    "version",
    "flags",
    "name",
    "host",
    "debug",
    "toolkit_version",
    "ptxas_options",
    "kernels",
)
if DeviceCode.__match_args__ != _DEVICE_CODE_FIELDS:  # pragma: no cover - a field was added to DeviceCode
    raise ImportError("fatbin.device_code does not fill every DeviceCode field")
_CONTAINER_FIELDS = ("offset", "size", "section", "relocatable", "entries")
if FatbinContainer.__match_args__ != _CONTAINER_FIELDS:  # pragma: no cover - a field was added
    raise ImportError("fatbin.read_container does not fill every FatbinContainer field")
_new_record = object.__new__
_set_attribute = object.__setattr__


def device_code(
    buf: Buffer,
    header: EntryHeader,
    *,
    container_offset: int | None,
    section: str | None,
    relocatable: bool,
) -> DeviceCode:
    """Turn a validated entry header into a :class:`DeviceCode` record (reads only the header bytes).

    The record is the one ``DeviceCode(...)`` makes (same fields, equal, same hash), built without the
    frozen dataclass's ``__init__``, which sets its 18 fields one ``object.__setattr__`` call at a time: a
    third of the scan's Python time on a library with thousands of entries.
    """
    kind, arch, variant, compression, host, debug, version = _traits(header)
    name = None
    if header.name_length:
        start = header.offset + header.name_offset
        name = _text(bytes(buf[start : start + header.name_length]))
    options = None
    if kind is DeviceCodeKind.PTX:
        options = _text(entry_options(buf, header))
    code: DeviceCode = _new_record(DeviceCode)
    _set_attribute(
        code,
        "__dict__",
        {
            "kind": kind,
            "arch": arch,
            "sm": header.sm,
            "variant": variant,
            "section": section,
            "relocatable": relocatable,
            "compression": compression,
            "stored_size": header.payload_size,
            "uncompressed_size": header.uncompressed_size if compression is not Compression.NONE else None,
            "offset": header.offset,
            "container_offset": container_offset,
            "version": version,
            "flags": header.flags,
            "name": name,
            "host": host,
            "debug": debug,
            "toolkit_version": None,
            "ptxas_options": options,
            "kernels": None,
        },
    )
    return code


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
    if offset < 0 or offset + _CONTAINER.size > limit:
        raise BinaryFormatError(f"fatbin container at {offset:#x} is truncated (header needs 16 bytes)")
    magic, version, header_size, fat_size = _CONTAINER.unpack_from(buf, offset)
    if (
        magic == CONTAINER_MAGIC
        and version == CONTAINER_VERSION
        and header_size in CONTAINER_HEADER_SIZES
        and fat_size <= limit - offset - header_size
    ):
        return int(header_size), int(fat_size)
    where = f"fatbin container at {offset:#x}"  # only for the error below: this runs for every candidate
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


class ScanBudgetError(BinaryFormatError):
    """A scan read more entry headers than its input can hold: candidates sharing one chain of entries."""


class EntryBudget:
    """Entry headers one scan may read, rejected candidates included. Each valid container's entries are read
    once (at most ``size / 64`` of them); candidates whose entries are one shared chain (containers nested at
    each entry of a long chain that ends in garbage, each walked to the end and rejected) would read the chain
    once per candidate: quadratic. Past the budget the scan stops with :class:`ScanBudgetError`."""

    __slots__ = ("left", "limit")

    def __init__(self, size: int) -> None:
        self.limit = 4 * (size // MIN_ENTRY_HEADER) + 65536
        self.left = self.limit

    def take(self) -> None:
        self.left -= 1
        if self.left < 0:
            raise ScanBudgetError(
                f"fatbin scan read more than {self.limit} entry headers (containers sharing one chain of "
                "entries?)"
            )


def read_entry_headers(buf: Buffer, offset: int, end: int | None = None) -> tuple[EntryHeader, ...]:
    """Validate the container at ``offset`` and every entry header in it.

    A container with ``fat_size == 0`` is valid and empty: nvcc's device-link step writes one into a library
    built with PTX only. One whose bytes are all padding is not."""
    return _read_entry_headers(buf, offset, end)[1]


def _read_entry_headers(
    buf: Buffer, offset: int, end: int | None, budget: EntryBudget | None = None
) -> tuple[int, tuple[EntryHeader, ...]]:
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
        if budget is not None:
            budget.take()
        header = read_entry_header(buf, pos, stop)
        headers.append(header)
        pos += header.header_size + header.payload_size
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
    budget: EntryBudget | None = None,
) -> FatbinContainer:
    """Read the fatbin container at ``offset`` (header and entry headers only; nothing is decompressed).
    ``budget``: the scan's count of entry headers read (see :class:`EntryBudget`)."""
    size, headers = _read_entry_headers(buf, offset, end, budget)
    entries = tuple(
        [
            device_code(buf, h, container_offset=offset, section=section, relocatable=relocatable)
            for h in headers
        ]
    )
    container: FatbinContainer = _new_record(FatbinContainer)  # as device_code() builds its records
    _set_attribute(
        container,
        "__dict__",
        {"offset": offset, "size": size, "section": section, "relocatable": relocatable, "entries": entries},
    )
    return container


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
