"""Reading the host-side facts of a PE file (``.dll``, ``.pyd``, ``.exe``): machine, kind, the import table
and the delay-load import table (symbols by name or ordinal), the export table, sections, and library names
stored in ``.rdata`` (ASCII and UTF-16LE, since ``LoadLibraryW`` takes wide strings).

Hand-written ``struct`` code: the headers, the section table, the three data directories and the read-only
data are the only bytes read (pefile parses every directory eagerly unless told not to, and its
``fast_load`` + ``parse_data_directories`` path was slower on big DLLs; docs/formats-host.md has the numbers).
Long section names (``/4``, which GNU ld writes for names over 8 characters) are resolved through the COFF
string table when the file has one; MSVC cuts names to 8 characters (``.nv_fatb``).
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

_MACHINES = {
    0x8664: Machine.X86_64,
    0xAA64: Machine.AARCH64,
    0xA641: Machine.AARCH64,  # ARM64EC objects
    0x014C: Machine.X86,
    0x01C0: Machine.ARM,
    0x01C4: Machine.ARM,
}
IMAGE_FILE_EXECUTABLE_IMAGE = 0x0002
IMAGE_FILE_DLL = 0x2000
DIR_EXPORT, DIR_IMPORT, DIR_DELAY_IMPORT = 0, 1, 13
#: Sections whose bytes are scanned for library names stored as strings.
_RODATA = (".rdata", ".rodata", "_RDATA")

#: Most entries any import or export table can hold (ordinals are 16-bit).
_MAX_ENTRIES = 65536

_U16 = struct.Struct("<H")
_U32 = struct.Struct("<I")
_U64 = struct.Struct("<Q")
_DIRECTORY = struct.Struct("<II")
_COFF = struct.Struct("<HHIIIHH")
_SECTION = struct.Struct("<8sIIII")
#: IMAGE_SCN_CNT_CODE | IMAGE_SCN_MEM_EXECUTE
_SCN_CODE = 0x00000020 | 0x20000000
_IMPORT_DESC = struct.Struct("<IIIII")
_DELAY_DESC = struct.Struct("<IIIIIIII")
_EXPORT_DIR = struct.Struct("<IIHHIIIIIII")


def read_pe(buf: Buffer) -> HostBinary:
    """Read a PE image's host-side facts. Raises BinaryFormatError on anything truncated or inconsistent."""
    return _PeReader(buf).read()


def import_name_offsets(buf: Buffer) -> tuple[tuple[str, int], ...]:
    """(DLL name, file offset of its NUL-terminated name) of every import and delay-load import descriptor, in
    table order: where an editor renames an imported DLL in place (``cudaship repair``)."""
    return _PeReader(buf).import_name_offsets()


class _PeReader:
    def __init__(self, buf: Buffer) -> None:
        self.b = Bounded(buf, "PE")
        if len(buf) < 0x40 or self.b.read(0, 2, "DOS header") != b"MZ":
            raise self.b.fail("not a PE file (no MZ header)")
        (lfanew,) = self.b.unpack(_U32, 0x3C, "DOS header")
        if self.b.read(lfanew, 4, "PE signature") != b"PE\x00\x00":
            raise self.b.fail(f"no PE signature at offset {lfanew:#x} (an MS-DOS program or corrupt file)")
        (
            self.machine_id,
            self.nsections,
            _stamp,
            self.symtab_off,
            self.nsymbols,
            self.opt_size,
            self.characteristics,
        ) = self.b.unpack(_COFF, lfanew + 4, "COFF header")
        self.opt_off = lfanew + 24
        (magic,) = self.b.unpack(_U16, self.opt_off, "optional header")
        if magic == 0x20B:
            self.bits = 64
            dir_count_at, dirs_at = 108, 112
            (self.image_base,) = self.b.unpack(_U64, self.opt_off + 24, "optional header")
        elif magic == 0x10B:
            self.bits = 32
            dir_count_at, dirs_at = 92, 96
            (self.image_base,) = self.b.unpack(_U32, self.opt_off + 28, "optional header")
        else:
            raise self.b.fail(f"unknown optional header magic {magic:#x}")
        if self.opt_size < dirs_at:
            raise self.b.fail(f"optional header size {self.opt_size} is too small for its data directories")
        (self.headers_size,) = self.b.unpack(_U32, self.opt_off + 60, "optional header")
        (ndirs,) = self.b.unpack(_U32, self.opt_off + dir_count_at, "optional header")
        ndirs = min(ndirs, 16, (self.opt_size - dirs_at) // 8)
        self.dirs: list[tuple[int, int]] = []
        for index in range(ndirs):
            rva, size = self.b.unpack(_DIRECTORY, self.opt_off + dirs_at + 8 * index, "data directory")
            self.dirs.append((rva, size))
        self.sections = self._sections()
        #: File offsets of the strings the import/export tables name: not data, so not scanned as evidence.
        self.table_strings: list[int] = []

    def _sections(self) -> list[tuple[str, int, int, int, int]]:
        """(name, virtual address, virtual size, raw offset, raw size) for each section."""
        table = self.opt_off + self.opt_size
        self.b.check(table, self.nsections * 40, "section table")
        strtab = None
        if self.symtab_off and self.symtab_off + self.nsymbols * 18 + 4 <= self.b.size:
            strtab = self.symtab_off + self.nsymbols * 18
        out = []
        self.section_is_code: list[bool] = []
        for index in range(self.nsections):
            raw_name, vsize, vaddr, raw_size, raw_off = _SECTION.unpack_from(self.b.buf, table + 40 * index)
            (characteristics,) = _U32.unpack_from(self.b.buf, table + 40 * index + 36)
            self.section_is_code.append(bool(characteristics & _SCN_CODE))
            name = raw_name.split(b"\x00", 1)[0].decode("utf-8", errors="replace")
            if name.startswith("/") and name[1:].isascii() and name[1:].isdigit() and strtab is not None:
                (strsize,) = self.b.unpack(_U32, strtab, "COFF string table")
                offset = int(name[1:])
                if 4 <= offset < strsize:
                    name = self.b.cstring(strtab + offset, strtab + strsize, f"name of section {index + 1}")
            if raw_size:
                self.b.check(raw_off, raw_size, f"section {name}")
            out.append((name, vaddr, vsize, raw_off, raw_size))
        return out

    # -- addresses ----------------------------------------------------------------------------------------

    def offset(self, rva: int, what: str) -> int:
        """File offset of ``rva``; raise when no section holds it on disk."""
        if rva < self.headers_size and rva < self.b.size:
            return rva
        for _name, vaddr, vsize, raw_off, raw_size in self.sections:
            if vaddr <= rva < vaddr + max(vsize, raw_size):
                delta = rva - vaddr
                if delta >= raw_size:
                    break  # in the section's zero-filled tail: not in the file
                return raw_off + delta
        raise self.b.fail(f"{what}: address {rva:#x} lies in no section of the file")

    def rva_string(self, rva: int, what: str) -> str:
        at = self.offset(rva, what)
        self.table_strings.append(at)
        return self.b.cstring(at, self.b.size, what)

    def directory(self, index: int) -> tuple[int, int]:
        return self.dirs[index] if index < len(self.dirs) else (0, 0)

    # -- tables -------------------------------------------------------------------------------------------

    def _thunks(self, rva: int, what: str) -> list[ImportedSymbol]:
        """Walk an import lookup / name table: entries by ordinal (high bit) or by hint/name RVA."""
        if rva == 0:
            return []
        step = 8 if self.bits == 64 else 4
        st = _U64 if self.bits == 64 else _U32
        ordinal_flag = 1 << (self.bits - 1)
        at = self.offset(rva, what)
        out: list[ImportedSymbol] = []
        # Ordinals are 16-bit, so no DLL has more than 65536 entry points to import; the rest of the file
        # bounds the table too.
        limit = min((self.b.size - at) // step, _MAX_ENTRIES)
        for _ in range(limit + 1):
            self.b.spend(step, what)  # descriptors sharing one lookup table pay for each walk of it
            (value,) = self.b.unpack(st, at, what)
            if value == 0:
                return out
            if value & ordinal_flag:
                out.append(ImportedSymbol(None, ordinal=value & 0xFFFF))
            else:
                name_rva = value & 0x7FFFFFFF
                out.append(ImportedSymbol(self.rva_string(name_rva + 2, f"{what} name")))
            at += step
        raise self.b.fail(f"{what} is not terminated")

    def imports(self) -> list[Import]:
        rva, size = self.directory(DIR_IMPORT)
        if rva == 0 or size == 0:
            return []
        at = self.offset(rva, "import directory")
        out: list[Import] = []
        for _ in range(min((self.b.size - at) // _IMPORT_DESC.size, _MAX_ENTRIES) + 1):
            ilt, _stamp, _fwd, name_rva, iat = self.b.unpack(_IMPORT_DESC, at, "import directory")
            if name_rva == 0 and ilt == 0 and iat == 0:
                return out
            dll = self.rva_string(name_rva, "import directory DLL name")
            symbols = self._thunks(ilt or iat, f"import table of {dll}")
            out.append(Import(dll, ImportKind.IMPORT, tuple(symbols)))
            at += _IMPORT_DESC.size
        raise self.b.fail("import directory is not terminated")

    def import_name_offsets(self) -> tuple[tuple[str, int], ...]:
        out: list[tuple[str, int]] = []
        for index, desc, what in (
            (DIR_IMPORT, _IMPORT_DESC, "import"),
            (DIR_DELAY_IMPORT, _DELAY_DESC, "delay"),
        ):
            rva, size = self.directory(index)
            if rva == 0 or size == 0:
                continue
            at = self.offset(rva, f"{what} directory")
            for _ in range(min((self.b.size - at) // desc.size, _MAX_ENTRIES) + 1):
                fields = self.b.unpack(desc, at, f"{what} directory")
                if desc is _IMPORT_DESC:
                    name_rva, ends = fields[3], fields[0] == 0 and fields[3] == 0 and fields[4] == 0
                else:
                    name_rva, ends = fields[1], fields[1] == 0 and fields[4] == 0 and fields[3] == 0
                    if not ends and not fields[0] & 1 and name_rva >= self.image_base:
                        name_rva -= self.image_base
                if ends:
                    break
                offset = self.offset(name_rva, f"{what} DLL name")
                out.append((self.b.cstring(offset, self.b.size, f"{what} DLL name"), offset))
                at += desc.size
        return tuple(out)

    def delay_imports(self) -> list[Import]:
        rva, size = self.directory(DIR_DELAY_IMPORT)
        if rva == 0 or size == 0:
            return []
        at = self.offset(rva, "delay-load import directory")
        out: list[Import] = []
        for _ in range(min((self.b.size - at) // _DELAY_DESC.size, _MAX_ENTRIES) + 1):
            attrs, name_rva, _module, iat, int_rva, _bound, _unload, _stamp = self.b.unpack(
                _DELAY_DESC, at, "delay-load import directory"
            )
            if name_rva == 0 and int_rva == 0 and iat == 0:
                return out
            if not attrs & 1:  # Visual C++ 6 descriptors hold virtual addresses, not RVAs
                name_rva = name_rva - self.image_base if name_rva >= self.image_base else name_rva
                int_rva = int_rva - self.image_base if int_rva >= self.image_base else int_rva
            dll = self.rva_string(name_rva, "delay-load import DLL name")
            symbols = self._thunks(int_rva, f"delay-load import table of {dll}")
            out.append(Import(dll, ImportKind.DELAY, tuple(symbols)))
            at += _DELAY_DESC.size
        raise self.b.fail("delay-load import directory is not terminated")

    def exports(self) -> tuple[str | None, tuple[str, ...]]:
        rva, size = self.directory(DIR_EXPORT)
        if rva == 0 or size == 0:
            return None, ()
        at = self.offset(rva, "export directory")
        (_chars, _stamp, _major, _minor, name_rva, _base, _nfuncs, nnames, _funcs, names_rva, _ords) = (
            self.b.unpack(_EXPORT_DIR, at, "export directory")
        )
        dll = self.rva_string(name_rva, "export directory DLL name") if name_rva else None
        if nnames == 0:
            return dll, ()
        if nnames > _MAX_ENTRIES:
            raise self.b.fail(f"export directory claims {nnames} names (more than 16-bit ordinals allow)")
        names_at = self.offset(names_rva, "export name table")
        self.b.check(names_at, nnames * 4, "export name table")
        out = []
        for index in range(nnames):
            (name_rva,) = _U32.unpack_from(self.b.buf, names_at + 4 * index)
            out.append(self.rva_string(name_rva, "export name"))
        return dll, tuple(sorted(set(out)))

    # -- main ---------------------------------------------------------------------------------------------

    def read(self) -> HostBinary:
        if self.characteristics & IMAGE_FILE_DLL:
            kind = "shared-library"
        elif self.characteristics & IMAGE_FILE_EXECUTABLE_IMAGE:
            kind = "executable"
        else:
            kind = "other"
        soname, exports = self.exports()
        imports = (*self.imports(), *self.delay_imports())
        ranges = [
            (raw_off, raw_off + raw_size)
            for name, _va, _vs, raw_off, raw_size in self.sections
            if name in _RODATA
        ]
        return HostBinary(
            format=FileFormat.PE,
            machine=_MACHINES.get(self.machine_id, Machine.OTHER),
            bits=self.bits,
            kind=kind,
            soname=soname,
            imports=imports,
            exports=exports,
            sections=tuple(
                Section(name, raw_off, raw_size, vaddr, executable=code)
                for (name, vaddr, _vsize, raw_off, raw_size), code in zip(
                    self.sections, self.section_is_code, strict=True
                )
            ),
            embedded_library_names=strings.library_names(
                self.b.buf, ranges, wide=True, skip=self.table_strings
            ),
            cuda_markers=strings.runtime_markers(self.b.buf, ranges, skip=self.table_strings),
        )
