"""The binary formats cudaship reads, recognised by their first bytes (never by file name).

One table for everyone who has to decide "is this a binary, and which": ``inspect``'s dispatcher, the
directory walk and the wheel member filter. PTX is text and has no magic
(:func:`cudaship.binary.ptx.looks_like_ptx` recognises it).
"""

from __future__ import annotations

import struct

from cudaship.records.binary import FileFormat

ELF_MAGIC = b"\x7fELF"
PE_MAGIC = b"MZ"
#: 32- and 64-bit thin Mach-O, both byte orders.
MACHO_THIN_MAGICS = (b"\xfe\xed\xfa\xce", b"\xce\xfa\xed\xfe", b"\xfe\xed\xfa\xcf", b"\xcf\xfa\xed\xfe")
#: Fat (universal) Mach-O, 32- and 64-bit offsets. Java class files also start with ``0xCAFEBABE``.
MACHO_FAT_MAGICS = (b"\xca\xfe\xba\xbe", b"\xca\xfe\xba\xbf")
#: A fatbin container's magic 0xBA55ED50, little-endian.
FATBIN_MAGIC = b"\x50\xed\x55\xba"
#: ``ar`` archives: COFF import libraries and static libraries.
AR_MAGIC = b"!<arch>\n"
#: ELF ``e_machine`` of a cubin.
EM_CUDA = 190


def binary_format(head: bytes) -> FileFormat | None:
    """ELF (CUBIN when its ``e_machine`` is EM_CUDA), PE, Mach-O, fatbin or ``ar`` archive, from the first
    bytes of a file (20 are enough); None for anything else, PTX text included."""
    if head.startswith(ELF_MAGIC):
        if len(head) >= 20:
            order = ">" if head[5] == 2 else "<"
            (machine,) = struct.unpack_from(order + "H", head, 18)
            if machine == EM_CUDA:
                return FileFormat.CUBIN
        return FileFormat.ELF
    if head.startswith(PE_MAGIC):
        return FileFormat.PE
    if head[:4] in MACHO_THIN_MAGICS:
        return FileFormat.MACHO
    if head[:4] in MACHO_FAT_MAGICS:
        # Java class files share 0xCAFEBABE; there the next word is a version >= 45, here a small count.
        if len(head) < 8 or not 0 < struct.unpack_from(">I", head, 4)[0] < 45:
            return None
        return FileFormat.MACHO
    if head.startswith(FATBIN_MAGIC):
        return FileFormat.FATBIN
    if head.startswith(AR_MAGIC):
        return FileFormat.COFF_IMPORT_LIBRARY
    return None
