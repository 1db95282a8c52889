"""Reading the host-side facts of a Mach-O file: thin (32/64-bit, either byte order) or universal ("fat").

What is read: the header, the load commands (``LC_SEGMENT``/``LC_SEGMENT_64`` sections as ``__SEG,__sect``,
``LC_LOAD_DYLIB`` and its weak / re-export / lazy / upward variants, ``LC_ID_DYLIB``, ``LC_RPATH``,
``LC_SYMTAB``), the symbol table (exports: external symbols defined in a section; imports: undefined external
symbols, attached to the dylib their two-level-namespace library ordinal names), and the C string / const
sections for library names stored as strings. Symbol names are kept as stored, with the leading underscore
Mach-O adds to C names (``_cudaMalloc``).

:func:`read_macho` returns the first slice of a universal file; :func:`read_macho_slices` returns every slice.
Section offsets are file offsets (slice offset added).
"""

from __future__ import annotations

import struct

from cudaship.binary import strings
from cudaship.binary._bounded import Bounded
from cudaship.records.binary import (
    FileFormat,
    HostBinary,
    Import,
    ImportedSymbol,
    ImportKind,
    Machine,
    Section,
)
from cudaship.records.buffer import Buffer

MH_MAGIC, MH_MAGIC_64 = 0xFEEDFACE, 0xFEEDFACF
FAT_MAGIC, FAT_MAGIC_64 = 0xCAFEBABE, 0xCAFEBABF
CPU_ARCH_ABI64 = 0x01000000
CPU_TYPE_X86, CPU_TYPE_ARM, CPU_TYPE_POWERPC = 7, 12, 18
MH_OBJECT, MH_EXECUTE, MH_DYLIB, MH_BUNDLE = 1, 2, 6, 8
MH_TWOLEVEL = 0x80

LC_SEGMENT, LC_SYMTAB, LC_LOAD_DYLIB, LC_ID_DYLIB = 0x1, 0x2, 0xC, 0xD
LC_SEGMENT_64, LC_LAZY_LOAD_DYLIB = 0x19, 0x20
LC_LOAD_WEAK_DYLIB, LC_RPATH, LC_REEXPORT_DYLIB, LC_LOAD_UPWARD_DYLIB = (
    0x80000018,
    0x8000001C,
    0x8000001F,
    0x80000023,
)
_DYLIB_LOADS = (
    LC_LOAD_DYLIB,
    LC_LOAD_WEAK_DYLIB,
    LC_REEXPORT_DYLIB,
    LC_LAZY_LOAD_DYLIB,
    LC_LOAD_UPWARD_DYLIB,
)

N_STAB, N_TYPE, N_EXT = 0xE0, 0x0E, 0x01
#: N_INDR: "the symbol is defined to be the same as another symbol" (mach-o/nlist.h): how a dylib's symbol
#: table lists what it re-exports from another dylib (delocate's libc++.1.0.dylib re-exports libc++abi's
#: functions this way); dyld binds to it, llvm-nm --defined-only lists it
N_UNDF, N_SECT, N_INDR = 0x0, 0xE, 0xA
#: S_ATTR_PURE_INSTRUCTIONS | S_ATTR_SOME_INSTRUCTIONS (mach-o/loader.h)
_S_ATTR_INSTRUCTIONS = 0x80000000 | 0x400
_ZEROFILL = (0x1, 0xC, 0x12)  # S_ZEROFILL, S_GB_ZEROFILL, S_THREAD_LOCAL_ZEROFILL
#: Sections scanned for library names stored as strings (by section name; any segment).
_STRING_SECTIONS = ("__cstring", "__const")
_WIDE_SECTIONS = ("__ustring",)
#: Most slices a universal file may claim (real ones hold 2-4).
_MAX_SLICES = 64


def read_macho(buf: Buffer) -> HostBinary:
    """Read a Mach-O file; for a universal file, its first slice."""
    return read_macho_slices(buf)[0]


def read_macho_slices(buf: Buffer) -> tuple[HostBinary, ...]:
    """Every architecture slice of a universal file (one element for a thin file)."""
    b = Bounded(buf, "Mach-O")
    if len(buf) < 8:
        raise b.fail("file too short")
    (magic,) = b.unpack(struct.Struct(">I"), 0, "header")
    if magic in (FAT_MAGIC, FAT_MAGIC_64):
        (count,) = b.unpack(struct.Struct(">I"), 4, "universal header")
        if not 0 < count <= _MAX_SLICES:
            raise b.fail(f"universal header claims {count} slices")
        entry = struct.Struct(">iiQQII") if magic == FAT_MAGIC_64 else struct.Struct(">iiIII")
        out = []
        for index in range(count):
            fields = b.unpack(entry, 8 + index * entry.size, "universal slice table")
            offset, size = fields[2], fields[3]
            b.check(offset, size, f"slice {index}")
            out.append(_read_thin(b, offset, offset + size))
        return tuple(out)
    return (_read_thin(b, 0, len(buf)),)


def _machine(cputype: int) -> Machine:
    if cputype == CPU_TYPE_X86 | CPU_ARCH_ABI64:
        return Machine.X86_64
    if cputype == CPU_TYPE_ARM | CPU_ARCH_ABI64:
        return Machine.AARCH64
    if cputype == CPU_TYPE_X86:
        return Machine.X86
    if cputype == CPU_TYPE_ARM:
        return Machine.ARM
    return Machine.OTHER


def _read_thin(b: Bounded, base: int, end: int) -> HostBinary:
    (raw_magic,) = b.unpack(struct.Struct("<I"), base, "header")
    if raw_magic in (MH_MAGIC, MH_MAGIC_64):
        order = "<"
    elif raw_magic in (0xCEFAEDFE, 0xCFFAEDFE):
        order = ">"
    else:
        raise b.fail(f"not a Mach-O file (magic {raw_magic:#010x} at offset {base:#x})")
    bits = 64 if raw_magic in (MH_MAGIC_64, 0xCFFAEDFE) else 32
    (_magic, cputype, _sub, filetype, ncmds, sizeofcmds, flags) = b.unpack(
        struct.Struct(order + "IiiIIII"), base, "header"
    )
    header_size = 32 if bits == 64 else 28
    cmd_at = base + header_size
    if sizeofcmds > end - cmd_at:
        raise b.fail(f"load commands ({sizeofcmds} bytes) run past the end of the file")
    if ncmds > sizeofcmds // 8:
        raise b.fail(f"{ncmds} load commands cannot fit in {sizeofcmds} bytes")
    u32 = struct.Struct(order + "I")
    cmd_head = struct.Struct(order + "II")
    seg = struct.Struct(order + ("16sQQQQiiII" if bits == 64 else "16sIIIIiiII"))
    sect = struct.Struct(order + ("16s16sQQIIIIIIII" if bits == 64 else "16s16sIIIIIIIII"))
    symtab_cmd = struct.Struct(order + "IIII")
    nlist = struct.Struct(order + ("IBBHQ" if bits == 64 else "IBBHI"))

    sections: list[Section] = []
    imports: list[tuple[str, list[ImportedSymbol]]] = []
    soname: str | None = None
    rpath: list[str] = []
    symtab: tuple[int, ...] | None = None

    def lc_str(at: int, size: int, what: str) -> str:
        (offset,) = b.unpack(u32, at + 8, what)
        if not 8 <= offset < size:
            raise b.fail(f"{what}: name offset {offset} lies outside the command")
        return b.cstring(at + offset, at + size, what)

    limit = cmd_at + sizeofcmds
    for index in range(ncmds):
        cmd, size = b.unpack(cmd_head, cmd_at, f"load command {index}")
        if size < 8 or cmd_at + size > limit:
            raise b.fail(f"load command {index} has size {size}, outside the load command area")
        if cmd in (LC_SEGMENT, LC_SEGMENT_64) and cmd == (LC_SEGMENT_64 if bits == 64 else LC_SEGMENT):
            fields = b.unpack(seg, cmd_at + 8, f"segment command {index}")
            nsects = fields[7]
            if seg.size + 8 + nsects * sect.size > size:
                raise b.fail(f"segment command {index} claims {nsects} sections, more than it holds")
            for k in range(nsects):
                s = sect.unpack_from(b.buf, cmd_at + 8 + seg.size + k * sect.size)
                sectname = s[0].split(b"\x00", 1)[0].decode("utf-8", errors="replace")
                segname = s[1].split(b"\x00", 1)[0].decode("utf-8", errors="replace")
                addr, length, offset, sflags = s[2], s[3], s[4], s[8]
                in_file = 0 if (sflags & 0xFF) in _ZEROFILL or offset == 0 else length
                if in_file and offset + in_file > end - base:
                    raise b.fail(f"section {segname},{sectname} runs past the end of the file")
                executable = bool(sflags & _S_ATTR_INSTRUCTIONS)
                sections.append(
                    Section(f"{segname},{sectname}", base + offset, in_file, addr, executable=executable)
                )
        elif cmd in _DYLIB_LOADS:
            imports.append((lc_str(cmd_at, size, f"load command {index} (dylib)"), []))
        elif cmd == LC_ID_DYLIB:
            soname = lc_str(cmd_at, size, f"load command {index} (LC_ID_DYLIB)")
        elif cmd == LC_RPATH:
            rpath.append(lc_str(cmd_at, size, f"load command {index} (LC_RPATH)"))
        elif cmd == LC_SYMTAB:
            symtab = b.unpack(symtab_cmd, cmd_at + 8, "LC_SYMTAB")
        cmd_at += size

    two_level = bool(flags & MH_TWOLEVEL)
    exports: set[str] = set()
    undefined: list[ImportedSymbol] = []
    if symtab is not None:
        symoff, nsyms, stroff, strsize = symtab
        b.check(base + stroff, strsize, "string table")
        if nsyms * nlist.size > end - base - symoff or symoff > end - base:
            raise b.fail(
                f"symbol table ({nsyms} entries at offset {symoff:#x}) runs past the end of the file"
            )
        str_at, str_end = base + stroff, base + stroff + strsize
        for k in range(nsyms):
            strx, ntype, _nsect, desc, _value = nlist.unpack_from(b.buf, base + symoff + k * nlist.size)
            if ntype & N_STAB or not ntype & N_EXT or strx == 0:
                continue
            if strx >= strsize:
                raise b.fail(f"symbol {k}: name offset {strx:#x} outside the string table")
            name = b.cstring(str_at + strx, str_end, "symbol name")
            if ntype & N_TYPE in (N_SECT, N_INDR):
                exports.add(name)
            elif ntype & N_TYPE == N_UNDF:
                symbol = ImportedSymbol(name)
                undefined.append(symbol)
                ordinal = (desc >> 8) & 0xFF  # two-level namespace: 1-based index of the dylib
                if two_level and 1 <= ordinal <= len(imports):
                    imports[ordinal - 1][1].append(symbol)

    ranges = [
        (s.offset, s.offset + s.size)
        for s in sections
        if s.size and s.name.split(",", 1)[1] in _STRING_SECTIONS
    ]
    wide_ranges = [
        (s.offset, s.offset + s.size)
        for s in sections
        if s.size and s.name.split(",", 1)[1] in _WIDE_SECTIONS
    ]
    names = set(strings.library_names(b.buf, ranges)) | set(
        strings.library_names(b.buf, wide_ranges, wide=True)
    )
    kind = {
        MH_DYLIB: "shared-library",
        MH_BUNDLE: "shared-library",
        MH_EXECUTE: "executable",
        MH_OBJECT: "object",
    }.get(filetype, "other")
    return HostBinary(
        format=FileFormat.MACHO,
        machine=_machine(cputype),
        bits=bits,
        kind=kind,
        soname=soname,
        rpath=tuple(rpath),
        imports=tuple(Import(name, ImportKind.DYLIB, tuple(symbols)) for name, symbols in imports),
        exports=tuple(sorted(exports)),
        undefined_symbols=tuple(undefined),
        sections=tuple(sections),
        embedded_library_names=tuple(sorted(names)),
        cuda_markers=strings.runtime_markers(b.buf, ranges),
    )
