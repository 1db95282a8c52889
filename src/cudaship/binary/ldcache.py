"""Reading the dynamic loader's cache, ``/etc/ld.so.cache``, in glibc's current format
(``glibc-ld.so.cache1.1``, written by ``ldconfig`` since glibc 2.32, and appended after the old
``ld.so-1.7.0`` table by older ones).

Layout (glibc ``sysdeps/generic/dl-cache.h``): a 48-byte header (magic and version, ``nlibs``,
``len_strings``, flags, extension offset), then ``nlibs`` 24-byte entries (``flags``, ``key``, ``value``,
``osversion``, ``hwcap``) whose ``key`` (the name) and ``value`` (the path) are offsets of NUL-terminated
strings, counted from the start of the new header. Entries are in the loader's lookup order. Every offset
is checked.
"""

from __future__ import annotations

import struct

from cudaship.binary._bounded import Bounded
from cudaship.records.binary import LdCacheEntry, Machine
from cudaship.records.buffer import Buffer

OLD_MAGIC = b"ld.so-1.7.0"
NEW_MAGIC = b"glibc-ld.so.cache1.1"
_HEADER = struct.Struct("<20sIIB3xI12x")
_ENTRY = struct.Struct("<iIIIQ")
_OLD_ENTRY_SIZE = 12  # flags, key, value (int32 each)

# entry flags: the low byte says ELF libc6; the second byte the ABI (dl-cache.h FLAG_*)
FLAG_ELF_LIBC6 = 0x0003
_REQUIRED = {
    0x0000: Machine.X86,  # no ABI flag: the native 32-bit (or only) kind
    0x0300: Machine.X86_64,  # FLAG_X8664_LIB64
    0x0500: Machine.PPC64LE,  # FLAG_POWERPC_LIB64
    0x0A00: Machine.AARCH64,  # FLAG_AARCH64_LIB64
    0x0900: Machine.ARM,  # FLAG_ARM_LIBHF
}


def read_ld_cache(buf: Buffer) -> tuple[LdCacheEntry, ...]:
    """The entries of an ld.so.cache, in the loader's order. Raises BinaryFormatError when it is not one."""
    b = Bounded(buf, "ld.so.cache")
    base = 0
    if bytes(buf[: len(OLD_MAGIC)]) == OLD_MAGIC:
        (nlibs,) = b.unpack(struct.Struct("<I"), len(OLD_MAGIC) + 1, "old header")
        base = len(OLD_MAGIC) + 1 + 4 + nlibs * _OLD_ENTRY_SIZE
        base = (base + 7) & ~7  # the new header is aligned like its 64-bit fields
    if b.size < base + _HEADER.size or bytes(buf[base : base + len(NEW_MAGIC)]) != NEW_MAGIC:
        raise b.fail("not an ld.so.cache in glibc's format 1.1 (no glibc-ld.so.cache1.1 header)")
    _magic, nlibs, _len_strings, _flags, _extension = b.unpack(_HEADER, base, "header")
    table = base + _HEADER.size
    b.check(table, nlibs * _ENTRY.size, "entry table")
    out: list[LdCacheEntry] = []
    for i in range(nlibs):
        flags, key, value, _osversion, _hwcap = _ENTRY.unpack_from(buf, table + i * _ENTRY.size)
        if flags & 0xFF != FLAG_ELF_LIBC6:
            continue
        name = b.cstring(base + key, b.size, f"entry {i} name")
        path = b.cstring(base + value, b.size, f"entry {i} path")
        out.append(LdCacheEntry(name, path, _REQUIRED.get(flags & 0xFF00, Machine.OTHER)))
    return tuple(out)
