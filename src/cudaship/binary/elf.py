"""Reading the host-side facts of an ELF file: machine, kind, SONAME, RPATH/RUNPATH, DT_NEEDED with the
symbols taken from each library (by symbol versioning), dynamic symbols, sections, and library names stored in
``.rodata``.

Hand-written ``struct`` code over the buffer: the ELF header, the section header table, ``.dynamic``,
``.dynsym``/``.dynstr``, ``.gnu.version``/``.gnu.version_r`` and the read-only data are the only bytes read
(docs/formats-host.md has the measurements against pyelftools and LIEF that decided this). Both classes
(32/64-bit) and both byte orders are handled. When the section header table is missing (stripped with
``sstrip``), the dynamic segment is found through the program headers instead.

Every offset and count from the file is checked against the file size first, so a corrupt table is a
one-line :class:`~cudaship.errors.BinaryFormatError`, never a huge allocation or a long loop.
"""

from __future__ import annotations

import struct
from collections.abc import Callable, Iterable
from dataclasses import dataclass
from itertools import accumulate

from cudaship.binary import strings as _strings
from cudaship.binary._bounded import MAX_NAME, Bounded, decode
from cudaship.binary.magic import ELF_MAGIC, EM_CUDA
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

# e_type
ET_REL, ET_EXEC, ET_DYN = 1, 2, 3
# e_machine
EM_386, EM_PPC64, EM_ARM, EM_X86_64, EM_AARCH64 = 3, 21, 40, 62, 183
_MACHINES = {
    EM_386: Machine.X86,
    EM_ARM: Machine.ARM,
    EM_X86_64: Machine.X86_64,
    EM_AARCH64: Machine.AARCH64,
    EM_CUDA: Machine.CUDA,
}
# sh_type
SHF_EXECINSTR = 0x4
SHT_NOBITS, SHT_DYNAMIC, SHT_DYNSYM = 8, 6, 11
SHT_GNU_VERDEF, SHT_GNU_VERNEED, SHT_GNU_VERSYM = 0x6FFFFFFD, 0x6FFFFFFE, 0x6FFFFFFF
VER_FLG_BASE = 0x1
# p_type
PT_LOAD, PT_DYNAMIC, PT_INTERP = 1, 2, 3
# d_tag
DT_NULL, DT_NEEDED, DT_STRTAB, DT_STRSZ, DT_SONAME, DT_RPATH, DT_RUNPATH = 0, 1, 5, 10, 14, 15, 29
DT_FLAGS_1 = 0x6FFFFFFB
#: Dynamic tags whose value is an offset into the dynamic string table (besides DT_NEEDED, DT_SONAME,
#: DT_RPATH, DT_RUNPATH): DT_AUXILIARY, DT_FILTER, DT_CONFIG, DT_DEPAUDIT, DT_AUDIT.
STRING_TAGS = frozenset(
    {DT_NEEDED, DT_SONAME, DT_RPATH, DT_RUNPATH, 0x7FFFFFFD, 0x7FFFFFFF, 0x6FFFFEFA, 0x6FFFFEFB, 0x6FFFFEFC}
)
DF_1_PIE = 0x08000000
# symbols
SHN_UNDEF, SHN_XINDEX = 0, 0xFFFF
STB_GLOBAL, STB_WEAK, STB_GNU_UNIQUE = 1, 2, 10
STT_SECTION, STT_FILE = 3, 4
STV_DEFAULT, STV_PROTECTED = 0, 3
VERSYM_HIDDEN = 0x8000

#: Sections whose bytes are scanned for library names stored as strings.
_RODATA_PREFIXES = (".rodata", ".lrodata")


@dataclass(frozen=True)
class _Layout:
    """Struct formats for one ELF class and byte order."""

    bits: int
    ehdr: struct.Struct  # from e_type on
    shdr: struct.Struct
    phdr: struct.Struct
    dyn: struct.Struct
    sym: struct.Struct
    verneed: struct.Struct
    vernaux: struct.Struct
    verdef: struct.Struct
    verdaux: struct.Struct
    u16: struct.Struct


def _layout(bits: int, order: str) -> _Layout:
    if bits == 64:
        return _Layout(
            64,
            struct.Struct(order + "HHIQQQIHHHHHH"),
            struct.Struct(order + "IIQQQQIIQQ"),
            struct.Struct(order + "IIQQQQQQ"),
            struct.Struct(order + "qQ"),
            struct.Struct(order + "IBBHQQ"),
            struct.Struct(order + "HHIII"),
            struct.Struct(order + "IHHII"),
            struct.Struct(order + "HHHHIII"),
            struct.Struct(order + "II"),
            struct.Struct(order + "H"),
        )
    return _Layout(
        32,
        struct.Struct(order + "HHIIIIIHHHHHH"),
        struct.Struct(order + "IIIIIIIIII"),
        struct.Struct(order + "IIIIIIII"),
        struct.Struct(order + "iI"),
        struct.Struct(order + "IIIBBH"),
        struct.Struct(order + "HHIII"),
        struct.Struct(order + "IHHII"),
        struct.Struct(order + "HHHHIII"),
        struct.Struct(order + "II"),
        struct.Struct(order + "H"),
    )


@dataclass(frozen=True)
class _Shdr:
    index: int
    name_offset: int
    type: int
    flags: int
    addr: int
    offset: int
    size: int
    link: int
    info: int
    entsize: int


#: One dynamic symbol: (name, bind, type, visibility, section index). A plain tuple: built 100,000s of times
#: per large library, where a named tuple's constructor (a Python function) cost 1 us more each.
_Symbol = tuple[str, int, int, int, int]


@dataclass(frozen=True)
class DynamicStrings:
    """Where the dynamic section and its string table lie in the file, and every reference into that table:
    what an editor needs to rewrite DT_NEEDED and DT_RPATH/DT_RUNPATH strings in place (``cudaship
    repair``), knowing which bytes anything else still names. Offsets are file offsets unless said."""

    bits: int
    order: str  #: struct byte order, ``<`` or ``>``
    dynamic_offset: int
    dynamic_slots: int  #: entries the dynamic section has room for (its size / the entry size)
    entries: tuple[tuple[int, int], ...]  #: (tag, value) of each entry before the first DT_NULL
    strtab_offset: int
    strtab_size: int  #: DT_STRSZ
    #: name offsets (into the table) of the dynamic symbols, sorted; empty when they use another table
    symbol_names: tuple[int, ...]
    #: (file offset of a ``vn_file`` field of .gnu.version_r, its value): the library a version need names
    version_files: tuple[tuple[int, int], ...]
    #: other offsets into the table: version names needed and defined
    version_names: tuple[int, ...]
    #: why an edit in place would be unsafe (the section headers and the loader's view disagree, a section
    #: this reader does not know uses the table, ...), or None
    unsafe: str | None = None


def dynamic_strings(buf: Buffer) -> DynamicStrings:
    """The layout of ``buf``'s dynamic strings (:class:`DynamicStrings`). Raises BinaryFormatError on
    anything truncated or inconsistent, as :func:`read_elf` does."""
    return _ElfReader(buf).dynamic_strings()


def read_elf(buf: Buffer, *, full: bool = True) -> HostBinary:
    """Read an ELF file's host-side facts. Raises BinaryFormatError on anything truncated or inconsistent.

    ``full=False`` reads what a loader question needs: imports (with their symbols and versions), search
    paths, SONAME, version definitions and versioned exports. ``exports``, ``embedded_library_names`` and
    ``cuda_markers`` stay empty (no scan of read-only data, no name of an unversioned defined symbol read):
    a big C++ library has 100,000 of those."""
    return _ElfReader(buf).read(full=full)


class _ElfReader:
    def __init__(self, buf: Buffer) -> None:
        self.b = Bounded(buf, "ELF")
        ident = self.b.read(0, 16, "ELF identification") if len(buf) >= 16 else b""
        if ident[:4] != ELF_MAGIC:
            raise self.b.fail("not an ELF file (no \\x7fELF magic)" if len(buf) >= 4 else "file too short")
        if ident[4] not in (1, 2):
            raise self.b.fail(f"unknown ELF class {ident[4]}")
        if ident[5] not in (1, 2):
            raise self.b.fail(f"unknown ELF data encoding {ident[5]}")
        self.order = "<" if ident[5] == 1 else ">"
        self.L = _layout(64 if ident[4] == 2 else 32, self.order)
        self.shstrndx_resolved = 0
        (
            self.e_type,
            self.e_machine,
            _version,
            _entry,
            self.phoff,
            self.shoff,
            self.e_flags,
            _ehsize,
            self.phentsize,
            self.phnum,
            self.shentsize,
            self.shnum,
            self.shstrndx,
        ) = self.b.unpack(self.L.ehdr, 16, "ELF header")

    # -- tables -------------------------------------------------------------------------------------------

    def section_headers(self) -> list[_Shdr]:
        if self.shoff == 0:
            return []
        if self.shentsize < self.L.shdr.size:
            raise self.b.fail(
                f"section header entry size {self.shentsize} is smaller than {self.L.shdr.size}"
            )
        count = self.shnum
        first = self.b.unpack(self.L.shdr, self.shoff, "section header table")
        if count == 0:  # extended numbering: the real count is in section 0's sh_size
            count = first[5]
        if count * self.shentsize > self.b.size - self.shoff:
            raise self.b.fail(
                f"section header table ({count} entries at offset {self.shoff:#x}) runs past the end of the "
                f"file ({self.b.size} bytes): truncated or corrupt"
            )
        headers = []
        for index in range(count):
            v = self.L.shdr.unpack_from(self.b.buf, self.shoff + index * self.shentsize)
            headers.append(_Shdr(index, v[0], v[1], v[2], v[3], v[4], v[5], v[6], v[7], v[9]))
        self.shstrndx_resolved = first[6] if self.shstrndx == SHN_XINDEX else self.shstrndx
        return headers

    def section_names(self, headers: list[_Shdr]) -> list[str]:
        if not headers:
            return []
        index = self.shstrndx_resolved
        if index == 0:
            return ["" for _ in headers]
        if index >= len(headers):
            raise self.b.fail(f"section name table index {index} is out of range ({len(headers)} sections)")
        table = headers[index]
        self._check_section(table, "section name table")
        end = table.offset + table.size
        return [
            self.b.cstring(table.offset + h.name_offset, end, f"name of section {h.index}")
            if h.name_offset < table.size
            else self._bad(f"section {h.index} name offset out of range")
            for h in headers
        ]

    def _bad(self, message: str) -> str:
        raise self.b.fail(message)

    def _check_section(self, h: _Shdr, what: str) -> None:
        if h.type != SHT_NOBITS:
            self.b.check(h.offset, h.size, what)

    def program_headers(self) -> list[tuple[int, ...]]:
        if self.phoff == 0 or self.phnum == 0:
            return []
        if self.phentsize < self.L.phdr.size:
            raise self.b.fail(
                f"program header entry size {self.phentsize} is smaller than {self.L.phdr.size}"
            )
        self.b.check(self.phoff, self.phnum * self.phentsize, "program header table")
        out: list[tuple[int, ...]] = []
        for index in range(self.phnum):
            v = self.L.phdr.unpack_from(self.b.buf, self.phoff + index * self.phentsize)
            if self.L.bits == 64:  # p_type, p_flags, p_offset, p_vaddr, p_paddr, p_filesz, p_memsz, p_align
                out.append((v[0], v[2], v[3], v[5]))
            else:  # p_type, p_offset, p_vaddr, p_paddr, p_filesz, p_memsz, p_flags, p_align
                out.append((v[0], v[1], v[2], v[4]))
        return out  # (type, offset, vaddr, filesz)

    # -- main ---------------------------------------------------------------------------------------------

    def read(self, *, full: bool = True) -> HostBinary:
        headers = self.section_headers()
        names = self.section_names(headers)
        phdrs = self.program_headers()
        sections = tuple(
            Section(
                name,
                h.offset,
                0 if h.type == SHT_NOBITS else h.size,
                h.addr,
                executable=bool(h.flags & SHF_EXECINSTR),
            )
            for name, h in zip(names, headers, strict=True)
            if h.index != 0
        )
        for h, name in zip(headers, names, strict=True):
            if h.index and h.type != SHT_NOBITS and h.size:
                self._check_section(h, f"section {name or h.index}")

        dynamic, dynstr = self._dynamic(headers, phdrs)
        needed: list[str] = []
        soname: str | None = None
        rpath: list[str] = []
        runpath: list[str] = []
        flags_1 = 0
        if dynamic is not None and dynstr is not None:
            str_off, str_end = dynstr
            for tag, value in dynamic:
                if tag in (DT_NEEDED, DT_SONAME, DT_RPATH, DT_RUNPATH):
                    text = (
                        self.b.cstring(str_off + value, str_end, f"dynamic entry {tag} string")
                        if value < str_end - str_off
                        else self._bad(f"dynamic entry {tag} string out of range")
                    )
                    if tag == DT_NEEDED:
                        needed.append(text)
                    elif tag == DT_SONAME:
                        soname = text
                    elif tag == DT_RPATH:
                        rpath.extend(p for p in text.split(":") if p)
                    else:
                        runpath.extend(p for p in text.split(":") if p)
                elif tag == DT_FLAGS_1:
                    flags_1 = value

        imports, exports, undefined, definitions, versioned = self._symbols(headers, needed, exports=full)
        has_interp = any(p[0] == PT_INTERP for p in phdrs)
        ranges = [
            (h.offset, h.offset + h.size)
            for h, name in zip(headers, names, strict=True)
            if name.startswith(_RODATA_PREFIXES) and h.type != SHT_NOBITS
        ]
        return HostBinary(
            format=FileFormat.ELF,
            machine=self._machine(),
            bits=self.L.bits,
            kind=self._kind(flags_1, has_interp, soname),
            soname=soname,
            rpath=tuple(rpath),
            runpath=tuple(runpath),
            imports=imports,
            exports=exports,
            undefined_symbols=undefined,
            version_definitions=definitions,
            versioned_exports=versioned,
            sections=sections,
            embedded_library_names=_strings.library_names(self.b.buf, ranges) if full else (),
            cuda_markers=_strings.runtime_markers(self.b.buf, ranges) if full else (),
        )

    def _machine(self) -> Machine:
        if self.e_machine == EM_PPC64:
            return Machine.PPC64LE if self.order == "<" else Machine.OTHER
        return _MACHINES.get(self.e_machine, Machine.OTHER)

    def _kind(self, flags_1: int, has_interp: bool, soname: str | None) -> str:
        if self.e_type == ET_REL:
            return "object"
        if self.e_type == ET_EXEC:
            return "executable"
        if self.e_type == ET_DYN:
            # A position-independent executable is ET_DYN too: DF_1_PIE says so (binutils >= 2.33), else an
            # interpreter without a SONAME. (libc.so.6 has an interpreter and a SONAME: a library.)
            if flags_1 & DF_1_PIE or (has_interp and soname is None):
                return "executable"
            return "shared-library"
        return "other"

    def dynamic_strings(self) -> DynamicStrings:
        headers = self.section_headers()
        phdrs = self.program_headers()
        entries, strtab = self._dynamic(headers, phdrs)
        unsafe: str | None = None
        if entries is None or strtab is None:
            raise self.b.fail("no dynamic section with a string table")
        by_type = {h.type: h for h in reversed(headers)}
        dynamic = by_type.get(SHT_DYNAMIC)
        segment = next((p for p in phdrs if p[0] == PT_DYNAMIC), None)
        if dynamic is None or segment is None:
            raise self.b.fail("no section headers or no PT_DYNAMIC: the dynamic strings cannot be located")
        step = self.L.dyn.size
        slots = min(dynamic.size, segment[3]) // step
        tags = dict(entries)
        str_offset = (
            self._vaddr_to_offset(phdrs, tags[DT_STRTAB]) if DT_STRTAB in tags and DT_STRSZ in tags else None
        )
        if str_offset is None:
            raise self.b.fail("DT_STRTAB or DT_STRSZ missing, or the table lies in no loaded segment")
        strsz = tags[DT_STRSZ]
        self.b.check(str_offset, strsz, "dynamic string table")
        load = next(
            (p for p in phdrs if p[0] == PT_LOAD and p[1] <= str_offset <= str_offset + strsz <= p[1] + p[3]),
            None,
        )
        if load is None:
            unsafe = "the dynamic string table is not inside one loaded segment"
        if segment[1] != dynamic.offset:
            unsafe = "PT_DYNAMIC and the .dynamic section disagree"
        if not 0 < dynamic.link < len(headers):
            raise self.b.fail(f"dynamic section links to section {dynamic.link}, which does not exist")
        table = headers[dynamic.link]
        if (table.offset, table.size) != (str_offset, strsz):
            unsafe = "the .dynamic section's string table and DT_STRTAB/DT_STRSZ disagree"
        known = {SHT_DYNAMIC, SHT_DYNSYM, SHT_GNU_VERNEED, SHT_GNU_VERDEF}
        for h in headers:
            if h.index and h.link == dynamic.link and h.type not in known:
                unsafe = f"section {h.index} (type {h.type:#x}) also uses the dynamic string table"
        symbols: list[int] = []
        dynsym = by_type.get(SHT_DYNSYM)
        if dynsym is not None and dynsym.link == dynamic.link:
            self._check_section(dynsym, "dynamic symbol table")
            entsize = dynsym.entsize or self.L.sym.size
            if entsize != self.L.sym.size:
                raise self.b.fail(f"dynamic symbol entry size {entsize} is not {self.L.sym.size}")
            count = dynsym.size // entsize
            rows = self.L.sym.iter_unpack(self.b.buf[dynsym.offset : dynsym.offset + count * entsize])
            symbols = sorted({v[0] for v in rows})  # st_name comes first in both classes
        files: list[tuple[int, int]] = []
        names: list[int] = []
        verneed = by_type.get(SHT_GNU_VERNEED)
        if verneed is not None:
            if verneed.link != dynamic.link:
                unsafe = "the version needs use another string table"
            self._walk_versions(verneed, needs=True, files=files, names=names)
        verdef = by_type.get(SHT_GNU_VERDEF)
        if verdef is not None:
            if verdef.link != dynamic.link:
                unsafe = "the version definitions use another string table"
            self._walk_versions(verdef, needs=False, files=files, names=names)
        return DynamicStrings(
            self.L.bits,
            self.order,
            dynamic.offset,
            slots,
            tuple(entries),
            str_offset,
            strsz,
            tuple(symbols),
            tuple(files),
            tuple(names),
            unsafe,
        )

    def _walk_versions(
        self, h: _Shdr, *, needs: bool, files: list[tuple[int, int]], names: list[int]
    ) -> None:
        """Collect the string references of a version needs (``vn_file``: its field's offset and value;
        ``vna_name``) or definitions (every ``vda_name``) section."""
        self._check_section(h, "version section")
        end = h.offset + h.size
        at = h.offset
        head, aux = (self.L.verneed, self.L.vernaux) if needs else (self.L.verdef, self.L.verdaux)
        budget = h.size // 8 + 1
        while budget > 0:
            budget -= 1
            if at + head.size > end:
                raise self.b.fail("version entry runs past its section")
            v = head.unpack_from(self.b.buf, at)
            if needs:  # vn_version, vn_cnt, vn_file, vn_aux, vn_next
                cnt, aux_off, next_off = v[1], v[3], v[4]
                files.append((at + 4, v[2]))  # vn_file follows vn_version and vn_cnt
            else:  # vd_version, vd_flags, vd_ndx, vd_cnt, vd_hash, vd_aux, vd_next
                cnt, aux_off, next_off = v[3], v[5], v[6]
            aux_at = at + aux_off
            for _ in range(cnt):
                if budget <= 0 or aux_at < h.offset or aux_at + aux.size > end:
                    raise self.b.fail("version auxiliary entry runs past its section")
                budget -= 1
                a = aux.unpack_from(self.b.buf, aux_at)
                names.append(a[3] if needs else a[0])  # vna_name / vda_name
                step = a[4] if needs else a[1]  # vna_next / vda_next
                if step == 0:
                    break
                aux_at += step
            if next_off == 0:
                return
            at += next_off
            if at < h.offset:
                raise self.b.fail("version entry points before its section")
        raise self.b.fail("version table does not terminate")

    def _vaddr_to_offset(self, phdrs: list[tuple[int, ...]], vaddr: int) -> int | None:
        for ptype, offset, start, filesz in phdrs:
            if ptype == PT_LOAD and start <= vaddr < start + filesz:
                return int(offset + (vaddr - start))
        return None

    def _dynamic(
        self, headers: list[_Shdr], phdrs: list[tuple[int, ...]]
    ) -> tuple[list[tuple[int, int]] | None, tuple[int, int] | None]:
        """The dynamic entries and the (offset, end) of their string table."""
        dyn_off = dyn_size = None
        strtab: tuple[int, int] | None = None
        for h in headers:
            if h.type == SHT_DYNAMIC:
                self._check_section(h, "dynamic section")
                dyn_off, dyn_size = h.offset, h.size
                if 0 < h.link < len(headers):
                    link = headers[h.link]
                    self._check_section(link, "dynamic string table")
                    strtab = (link.offset, link.offset + link.size)
                break
        else:
            for ptype, offset, _vaddr, filesz in phdrs:
                if ptype == PT_DYNAMIC:
                    self.b.check(offset, filesz, "dynamic segment")
                    dyn_off, dyn_size = offset, filesz
                    break
        if dyn_off is None or dyn_size is None:
            return None, None
        entries: list[tuple[int, int]] = []
        step = self.L.dyn.size
        strtab_addr: int | None = None
        strsz: int | None = None
        for at in range(dyn_off, dyn_off + dyn_size - step + 1, step):
            tag, value = self.L.dyn.unpack_from(self.b.buf, at)
            if tag == DT_NULL:
                break
            entries.append((tag, value))
            if tag == DT_STRTAB:
                strtab_addr = value
            elif tag == DT_STRSZ:
                strsz = value
        if strtab is None and strtab_addr is not None and strsz is not None:
            str_offset = self._vaddr_to_offset(phdrs, strtab_addr)
            if str_offset is None:
                raise self.b.fail(f"DT_STRTAB address {strtab_addr:#x} lies in no loaded segment")
            self.b.check(str_offset, strsz, "dynamic string table")
            strtab = (str_offset, str_offset + strsz)
        if strtab is None and any(tag in (DT_NEEDED, DT_SONAME, DT_RPATH, DT_RUNPATH) for tag, _ in entries):
            raise self.b.fail("dynamic section names strings but has no string table")
        return entries, strtab

    def _symbols(
        self, headers: list[_Shdr], needed: list[str], *, exports: bool = True
    ) -> tuple[
        tuple[Import, ...],
        tuple[str, ...],
        tuple[ImportedSymbol, ...],
        tuple[str, ...],
        tuple[tuple[str, str], ...],
    ]:
        dynsym = next((h for h in headers if h.type == SHT_DYNSYM), None)
        symbols: list[_Symbol] = []
        definitions = self._definitions(headers)
        versym: tuple[int, ...] = ()
        if dynsym is not None:
            entsize = dynsym.entsize or self.L.sym.size
            versym = self._versym(headers, dynsym, dynsym.size // entsize if entsize else 0)
            # without exports, a defined symbol is named only when it is bound to a defined version
            keep = None if exports else frozenset(definitions)
            symbols = self._read_symbols(headers, dynsym, versym, keep)
        needs = self._needs(headers) if versym else {}

        per_library: dict[str, list[ImportedSymbol]] = {name: [] for name in needed}
        exported: set[str] = set()
        versioned: set[tuple[str, str]] = set()
        undefined: list[ImportedSymbol] = []
        nversym = len(versym)
        for index, (name, bind, kind, visibility, shndx) in enumerate(symbols):
            if index == 0 or not name or kind in (STT_SECTION, STT_FILE):
                continue
            # the hidden bit marks a non-default version (sym@VER, not sym@@VER): still bound by a versioned
            # reference, so it is kept
            ndx = versym[index] & 0x7FFF if index < nversym else 0
            if shndx == SHN_UNDEF:
                if bind not in (STB_GLOBAL, STB_WEAK):
                    continue
                file, version = needs.get(ndx, (None, None))
                imported = ImportedSymbol(name, version=version)
                if file is not None and file in per_library:
                    per_library[file].append(imported)
                if bind == STB_GLOBAL:
                    undefined.append(imported)
            elif bind in (STB_GLOBAL, STB_WEAK, STB_GNU_UNIQUE) and visibility in (
                STV_DEFAULT,
                STV_PROTECTED,
            ):
                exported.add(name)
                if ndx > 1 and definitions:
                    defined = definitions.get(ndx)
                    if defined is not None:
                        versioned.add((name, defined))
        imports = tuple(Import(name, ImportKind.NEEDED, tuple(per_library[name])) for name in needed)
        names = tuple(dict.fromkeys(definitions.values()))
        return (
            imports,
            tuple(sorted(exported)) if exports else (),
            tuple(undefined),
            names,
            tuple(sorted(versioned)),
        )

    def _read_symbols(
        self,
        headers: list[_Shdr],
        dynsym: _Shdr,
        versym: tuple[int, ...] = (),
        keep: frozenset[int] | None = None,
    ) -> list[_Symbol]:
        """Every dynamic symbol; with ``keep``, a defined symbol whose version index is not in it is left
        unnamed (its name is neither read nor checked)."""
        self._check_section(dynsym, "dynamic symbol table")
        entsize = dynsym.entsize or self.L.sym.size
        if entsize < self.L.sym.size:
            raise self.b.fail(f"dynamic symbol entry size {entsize} is smaller than {self.L.sym.size}")
        if not 0 < dynsym.link < len(headers):
            raise self.b.fail(f"dynamic symbol table links to section {dynsym.link}, which does not exist")
        strtab = headers[dynsym.link]
        self._check_section(strtab, "dynamic symbol string table")
        str_end = strtab.offset + strtab.size
        # The string table is copied once. When it is ASCII (every real one), it is decoded and split at its
        # NULs in C, giving the name at every string start; a name that starts inside another string (a
        # shared suffix), or any other case, is found with bytes.find. Same names, errors and work budget as
        # Bounded.cstring per symbol, at a fraction of the cost (large libraries have 100,000s of symbols).
        table = bytes(self.b.buf[strtab.offset : min(str_end, self.b.size)])
        find = table.find
        names: dict[int, str] = {}
        found: dict[int, tuple[str, int]] = {}  # names found with find: (name, its length in bytes)
        if table.isascii():
            pieces = table.decode("ascii").split("\0")[:-1]  # the last piece is not NUL-terminated
            names = dict(zip(accumulate((len(p) + 1 for p in pieces), initial=0), pieces, strict=False))
        bounded = self.b
        sym = self.L.sym
        buf = self.b.buf
        wide = self.L.bits == 64
        count = dynsym.size // entsize
        rows: Iterable[tuple[int, ...]]
        if entsize == sym.size:
            rows = sym.iter_unpack(buf[dynsym.offset : dynsym.offset + count * entsize])
        else:
            rows = (sym.unpack_from(buf, dynsym.offset + i * entsize) for i in range(count))
        out = []
        nversym = len(versym)
        for index, v in enumerate(rows):
            if wide:  # st_name, st_info, st_other, st_shndx, st_value, st_size
                name_off, info, other, shndx = v[0], v[1], v[2], v[3]
            else:  # st_name, st_value, st_size, st_info, st_other, st_shndx
                name_off, info, other, shndx = v[0], v[3], v[4], v[5]
            if keep is not None and shndx != SHN_UNDEF:
                ndx = versym[index] & 0x7FFF if index < nversym else 0
                if ndx not in keep:
                    out.append(("", info >> 4, info & 0xF, other & 3, shndx))
                    continue
            if name_off == 0:
                name = ""
            elif name_off >= strtab.size:
                at = dynsym.offset + index * entsize
                raise self.b.fail(f"dynamic symbol at offset {at:#x}: name offset {name_off:#x} out of range")
            else:
                cached = names.get(name_off)
                if cached is not None and len(cached) < MAX_NAME:
                    length = len(cached)  # ASCII: as many bytes as characters
                elif name_off in found:
                    cached, length = found[name_off]
                else:
                    nul = find(b"\0", name_off, name_off + MAX_NAME)
                    if nul < 0:  # not terminated within the table or the name limit: cstring says which
                        bounded.cstring(strtab.offset + name_off, str_end, "dynamic symbol name")
                    length = nul - name_off
                    cached = decode(table[name_off:nul])
                    found[name_off] = (cached, length)
                bounded.spent += length + 1
                if bounded.spent > bounded.budget:
                    bounded.spend(0, "dynamic symbol name")  # raises
                name = cached
            out.append((name, info >> 4, info & 0xF, other & 3, shndx))
        return out

    def _versym(self, headers: list[_Shdr], dynsym: _Shdr | None, count: int) -> tuple[int, ...]:
        """The version index of each dynamic symbol (``.gnu.version``); empty when the file has none."""
        if dynsym is None or count == 0:
            return ()
        versym = next((h for h in headers if h.type == SHT_GNU_VERSYM), None)
        if versym is None:
            return ()
        self._check_section(versym, "symbol version table")
        limit = min(count, versym.size // self.L.u16.size)
        return struct.unpack_from(f"{self.order}{limit}H", self.b.buf, versym.offset)

    def _version_strings(self, headers: list[_Shdr], table: _Shdr, what: str) -> Callable[[int, str], str]:
        """A reader of names in the string table that the version section ``table`` links to."""
        if not 0 < table.link < len(headers):
            raise self.b.fail(f"{what} links to section {table.link}, which does not exist")
        strtab = headers[table.link]
        self._check_section(strtab, f"{what} string table")
        str_end = strtab.offset + strtab.size

        def name_at(offset: int, where: str) -> str:
            if offset >= strtab.size:
                raise self.b.fail(f"{where}: name offset {offset:#x} out of range")
            return self.b.cstring(strtab.offset + offset, str_end, where)

        return name_at

    def _needs(self, headers: list[_Shdr]) -> dict[int, tuple[str, str]]:
        """Version index → (library file, version name) for the versions required (``.gnu.version_r``)."""
        verneed = next((h for h in headers if h.type == SHT_GNU_VERNEED), None)
        if verneed is None:
            return {}
        self._check_section(verneed, "version needs table")
        name_at = self._version_strings(headers, verneed, "version needs table")
        by_index: dict[int, tuple[str, str]] = {}
        end = verneed.offset + verneed.size
        at = verneed.offset
        # Each entry and aux record is at least 16 bytes: bounding the walk by the section size stops loops.
        budget = verneed.size // 16 + 1
        while budget > 0:
            budget -= 1
            if at + self.L.verneed.size > end:
                raise self.b.fail("version needs entry runs past its section")
            _version, cnt, file_off, aux, next_off = self.L.verneed.unpack_from(self.b.buf, at)
            file = name_at(file_off, "version needs file name")
            aux_at = at + aux
            for _ in range(cnt):
                if budget <= 0 or aux_at < verneed.offset or aux_at + self.L.vernaux.size > end:
                    raise self.b.fail("version needs auxiliary entry runs past its section")
                budget -= 1
                _hash, _flags, other, vname_off, aux_next = self.L.vernaux.unpack_from(self.b.buf, aux_at)
                by_index[other & 0x7FFF] = (file, name_at(vname_off, "version needs version name"))
                if aux_next == 0:
                    break
                aux_at += aux_next
            if next_off == 0:
                break
            at += next_off
            if at < verneed.offset:
                raise self.b.fail("version needs entry points before its section")
        else:
            raise self.b.fail("version needs table does not terminate")
        return by_index

    def _definitions(self, headers: list[_Shdr]) -> dict[int, str]:
        """Version index → name of each version the file defines (``.gnu.version_d``), the base entry (the
        file's own name, VER_FLG_BASE) left out."""
        verdef = next((h for h in headers if h.type == SHT_GNU_VERDEF), None)
        if verdef is None:
            return {}
        self._check_section(verdef, "version definitions table")
        name_at = self._version_strings(headers, verdef, "version definitions table")
        out: dict[int, str] = {}
        end = verdef.offset + verdef.size
        at = verdef.offset
        # Each definition is at least 20 bytes and names itself in an 8-byte aux record: the section size
        # bounds the walk, so a looping chain ends.
        budget = verdef.size // 20 + 1
        while budget > 0:
            budget -= 1
            if at + self.L.verdef.size > end:
                raise self.b.fail("version definition runs past its section")
            _version, flags, ndx, cnt, _hash, aux, next_off = self.L.verdef.unpack_from(self.b.buf, at)
            if cnt:
                aux_at = at + aux
                if aux_at < verdef.offset or aux_at + self.L.verdaux.size > end:
                    raise self.b.fail("version definition name runs past its section")
                name_off, _next = self.L.verdaux.unpack_from(self.b.buf, aux_at)
                if not flags & VER_FLG_BASE:
                    out[ndx & 0x7FFF] = name_at(name_off, "version definition name")
            if next_off == 0:
                break
            at += next_off
            if at < verdef.offset:
                raise self.b.fail("version definition points before its section")
        else:
            raise self.b.fail("version definitions table does not terminate")
        return out
