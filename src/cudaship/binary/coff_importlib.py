"""Reading COFF import libraries (``.lib`` from MSVC / lld-link / llvm-dlltool, ``.dll.a`` / ``.lib`` from GNU
dlltool): which DLL(s) a library names and which symbols it provides.

An import library is an ``ar`` archive. Two member formats exist:

* **short import objects** (MSVC, LLVM): a 20-byte ``IMPORT_OBJECT_HEADER`` (``Sig1 = 0``, ``Sig2 = 0xFFFF``,
  ``Version = 0``) followed by the symbol name and the DLL name, NUL-terminated. The name type says whether
  the symbol is imported by ordinal. MSVC libraries also hold three regular COFF objects (the import
  descriptor, the null descriptor, the null thunk); the descriptor's ``.idata$6`` holds the DLL name.
* **long format** (GNU dlltool): every member is a regular COFF object. A "tail" object holds the DLL name in
  ``.idata$7`` under a symbol (``__<lib>_iname``); the "head" object's ``.idata$2`` relocates against it and
  defines ``_head_<lib>``; each symbol object's ``.idata$7`` relocates against that head, its ``.idata$6``
  holds the hint and name, or its ``.idata$4`` the ordinal (high bit set). These links are followed so an
  archive naming several DLLs attributes each symbol to the right one.

Members that are neither (ordinary objects of a static library) are ignored; an archive with no import member
at all is reported as such by :class:`~cudaship.records.binary.ImportLibrary` with no DLLs.
"""

from __future__ import annotations

import struct
from dataclasses import dataclass, field

from cudaship.binary._bounded import Bounded, decode
from cudaship.binary.magic import AR_MAGIC
from cudaship.records.binary import ImportLibrary, ImportLibraryMember
from cudaship.records.buffer import Buffer

THIN_MAGIC = b"!<thin>\n"
_AR_HEADER = 60
IMPORT_NAME_ORDINAL = 0
#: COFF machines with 64-bit thunks.
_MACHINES_64 = (0x8664, 0xAA64, 0xA641, 0x0200)

_IMPORT_HEADER = struct.Struct("<HHHHIIHH")
_COFF_HEADER = struct.Struct("<HHIIIHH")
_COFF_SECTION = struct.Struct("<8sIIIIIIHHI")
_COFF_SYMBOL = struct.Struct("<8sIhHBB")
_COFF_RELOC = struct.Struct("<IIH")
_U16 = struct.Struct("<H")
_U32 = struct.Struct("<I")
_U64 = struct.Struct("<Q")


def read_import_library(buf: Buffer) -> ImportLibrary:
    """Read an import library's DLL names and imported symbols. Raises BinaryFormatError when corrupt."""
    b = Bounded(buf, "import library")
    head = b.read(0, 8, "archive signature") if len(buf) >= 8 else b""
    if head == THIN_MAGIC:
        raise b.fail("thin archive (members are stored outside the file): not supported")
    if head != AR_MAGIC:
        raise b.fail("not an ar archive (no !<arch> signature)")
    members: list[ImportLibraryMember] = []
    dlls: list[str] = []
    objects: list[_CoffObject] = []
    for name, start, size in _ar_members(b):
        if name in ("/", "//", "/SYM64/", "__.SYMDEF", "__.SYMDEF SORTED", "/<ECSYMBOLS>/"):
            continue
        if size >= _IMPORT_HEADER.size:
            sig1, sig2, version = struct.unpack_from("<HHH", b.buf, start)
            if sig1 == 0 and sig2 == 0xFFFF:
                if version == 0:
                    member = _short_import(b, start, size)
                    members.append(member)
                    if member.dll not in dlls:
                        dlls.append(member.dll)
                continue  # version >= 1: an anonymous (LTCG / bigobj) object, not an import
        if size >= _COFF_HEADER.size:
            obj = _coff_object(b, start, size, name)
            if obj is not None:
                objects.append(obj)
    long_members, long_dlls = _long_format(objects)
    for dll in long_dlls:
        if dll not in dlls:
            dlls.append(dll)
    return ImportLibrary(dlls=tuple(dlls), members=tuple(members + long_members))


def _ar_members(b: Bounded) -> list[tuple[str, int, int]]:
    """(name, data offset, size) of each member, long names resolved (GNU ``//`` table and ``/N`` refs)."""
    out: list[tuple[str, int, int]] = []
    long_names: tuple[int, int] | None = None
    at = 8
    while at < b.size:
        if at + _AR_HEADER > b.size:
            if b.read(at, b.size - at, "archive padding").strip(b"\n\x00") == b"":
                break
            raise b.fail(f"member header at offset {at:#x} is truncated")
        header = b.read(at, _AR_HEADER, "member header")
        if header[58:60] != b"`\n":
            raise b.fail(f"member header at offset {at:#x} is corrupt (no terminator)")
        raw_name = header[:16].decode("latin-1").rstrip(" ")
        size_text = header[48:58].decode("latin-1").strip()
        if not (size_text.isascii() and size_text.isdigit()):
            raise b.fail(f"member header at offset {at:#x} has a bad size {size_text!r}")
        size = int(size_text)
        data = at + _AR_HEADER
        b.check(data, size, f"member at offset {at:#x}")
        name = raw_name
        if raw_name == "//":
            long_names = (data, data + size)
        elif raw_name.startswith("#1/"):  # BSD: the name follows the header
            length = int(raw_name[3:]) if raw_name[3:].isascii() and raw_name[3:].isdigit() else -1
            if not 0 <= length <= size:
                raise b.fail(f"member header at offset {at:#x} has a bad BSD name length")
            name = decode(b.read(data, length, "member name").rstrip(b"\x00"))
            data, size = data + length, size - length
        elif raw_name.startswith("/") and raw_name[1:].isascii() and raw_name[1:].isdigit():
            if long_names is None:
                raise b.fail(
                    f"member at offset {at:#x} refers to a long name but the archive has no name table"
                )
            offset = long_names[0] + int(raw_name[1:])
            if offset >= long_names[1]:
                raise b.fail(f"member at offset {at:#x} has a long name outside the name table")
            table = b.read(offset, min(long_names[1] - offset, 4096), "long name table")
            cut = min(
                (i for i in (table.find(b"/\n"), table.find(b"\x00"), table.find(b"\n")) if i >= 0),
                default=len(table),
            )
            name = decode(table[:cut])
        elif raw_name.endswith("/") and raw_name not in ("/", "//"):
            name = raw_name[:-1]
        out.append((name, data, size))
        at = data + size + (size & 1)
    return out


def _short_import(b: Bounded, start: int, size: int) -> ImportLibraryMember:
    (_s1, _s2, _version, _machine, _stamp, data_size, ordinal_hint, type_info) = b.unpack(
        _IMPORT_HEADER, start, "import object header"
    )
    if data_size > size - _IMPORT_HEADER.size:
        raise b.fail(
            f"import object at offset {start:#x} claims {data_size} bytes of names, more than it holds"
        )
    if data_size > 2 * 65536:
        raise b.fail(f"import object at offset {start:#x} claims {data_size} bytes of names")
    names = b.read(start + _IMPORT_HEADER.size, data_size, f"import object at offset {start:#x} names")
    parts = names.split(b"\x00")
    if len(parts) < 3 or not parts[1]:
        raise b.fail(f"import object at offset {start:#x} does not name a symbol and a DLL")
    symbol, dll = decode(parts[0]), decode(parts[1])
    name_type = (type_info >> 2) & 0x7
    if name_type == IMPORT_NAME_ORDINAL:
        return ImportLibraryMember(dll, symbol or None, ordinal=ordinal_hint)
    return ImportLibraryMember(dll, symbol or None)


@dataclass
class _CoffObject:
    name: str
    machine: int
    #: section name → (raw data, relocation target symbol names)
    sections: dict[str, tuple[bytes, list[str]]] = field(default_factory=dict)
    defined: dict[str, str] = field(default_factory=dict)  #: external symbol → its section name


def _coff_object(b: Bounded, start: int, size: int, member: str) -> _CoffObject | None:
    """The ``.idata$*`` sections, their relocations and the defined external symbols of a COFF object; None
    for members that are not COFF objects or have no import data."""
    machine, nsections, _stamp, symtab, nsyms, opt_size, _chars = _COFF_HEADER.unpack_from(b.buf, start)
    if machine == 0 or nsections == 0 or nsections > 96:
        return None
    end = start + size
    table = start + _COFF_HEADER.size + opt_size
    if table + nsections * _COFF_SECTION.size > end:
        return None
    where = f"member {member!r}"
    if not symtab:
        nsyms = 0  # no symbol table, whatever the count says
    if symtab and (symtab > size or nsyms * _COFF_SYMBOL.size > size - symtab):
        raise b.fail(f"{where}: symbol table ({nsyms} entries) runs past the member")
    strtab = start + symtab + nsyms * _COFF_SYMBOL.size
    strsize = 0
    if symtab and strtab + 4 <= end:
        (strsize,) = _U32.unpack_from(b.buf, strtab)
        strsize = min(strsize, end - strtab)

    def symbol_name(raw: bytes) -> str:
        if raw[:4] == b"\x00\x00\x00\x00" and symtab:
            (offset,) = _U32.unpack_from(raw, 4)
            if not 4 <= offset < strsize:
                raise b.fail(f"{where}: symbol name offset {offset} outside the string table")
            return b.cstring(strtab + offset, strtab + strsize, f"{where} symbol name")
        return decode(raw.split(b"\x00", 1)[0])

    symbols: list[tuple[str, int, int]] = []  # (name, section number, storage class) per symbol index
    index = 0
    while index < nsyms:
        raw, _value, section, _type, storage, aux = _COFF_SYMBOL.unpack_from(
            b.buf, start + symtab + 18 * index
        )
        entry = (symbol_name(raw), section, storage)
        symbols.append(entry)
        symbols.extend([("", 0, 0)] * min(aux, nsyms - index - 1))
        index += 1 + aux

    obj = _CoffObject(member, machine)
    section_names: list[str] = []
    for k in range(nsections):
        raw_name, _vsize, _va, raw_size, raw_ptr, reloc_ptr, _lines, nrelocs, _nlines, _flags = (
            _COFF_SECTION.unpack_from(b.buf, table + k * _COFF_SECTION.size)
        )
        name = decode(raw_name.split(b"\x00", 1)[0])
        if name.startswith("/") and name[1:].isascii() and name[1:].isdigit() and strsize:
            offset = int(name[1:])
            if 4 <= offset < strsize:
                name = b.cstring(strtab + offset, strtab + strsize, f"{where} section name")
        section_names.append(name)
        if not name.startswith(".idata$"):
            continue
        data = b""
        if raw_size and raw_ptr:
            if raw_ptr > size or raw_size > size - raw_ptr:
                raise b.fail(f"{where}: section {name} runs past the member")
            data = b.read(start + raw_ptr, raw_size, f"{where} section {name}")
        targets: list[str] = []
        if nrelocs:
            if reloc_ptr > size or nrelocs * _COFF_RELOC.size > size - reloc_ptr:
                raise b.fail(f"{where}: relocations of {name} run past the member")
            for r in range(nrelocs):
                _addr, sym_index, _rtype = _COFF_RELOC.unpack_from(b.buf, start + reloc_ptr + 10 * r)
                if sym_index < len(symbols) and symbols[sym_index][0]:
                    targets.append(symbols[sym_index][0])
        obj.sections[name] = (data, targets)
    for name, section, storage in symbols:
        if (
            storage == 2 and section > 0 and name and section <= len(section_names)
        ):  # IMAGE_SYM_CLASS_EXTERNAL
            obj.defined[name] = section_names[section - 1]
    return obj if obj.sections else None


def _c_string(data: bytes) -> str | None:
    text = data.split(b"\x00", 1)[0]
    if not text or any(c < 0x20 or c > 0x7E for c in text):
        return None
    return text.decode("ascii")


def _long_format(objects: list[_CoffObject]) -> tuple[list[ImportLibraryMember], list[str]]:
    """Members and DLL names from long-format (regular COFF object) members."""
    dll_of_symbol: dict[str, str] = {}  # a tail's iname symbol → DLL name
    dlls: list[str] = []
    for obj in objects:
        descriptor = any(name.startswith("__IMPORT_DESCRIPTOR_") for name in obj.defined)
        tail = obj.sections.get(".idata$7")
        if tail is not None and len(tail[0]) > 4:  # holds the DLL name (a symbol object holds a 4-byte reloc)
            dll = _c_string(tail[0])
            if dll:
                for name, section in obj.defined.items():
                    if section == ".idata$7":
                        dll_of_symbol[name] = dll
                if dll not in dlls:
                    dlls.append(dll)
        if descriptor and ".idata$6" in obj.sections:  # MSVC: the import descriptor names the DLL
            dll = _c_string(obj.sections[".idata$6"][0])
            if dll and dll not in dlls:
                dlls.append(dll)
    dll_of_head: dict[str, str] = {}  # a head's _head_ symbol → DLL name
    for obj in objects:
        if ".idata$2" in obj.sections:
            targets = obj.sections[".idata$2"][1]
            found = next((dll_of_symbol[t] for t in targets if t in dll_of_symbol), None)
            if found:
                for name in obj.defined:
                    dll_of_head[name] = found
    members: list[ImportLibraryMember] = []
    only = dlls[0] if len(dlls) == 1 else None
    for obj in objects:
        link = obj.sections.get(".idata$7")
        if link is None or len(link[0]) > 4 or ".idata$2" in obj.sections:
            continue  # a tail or a head, not a symbol object
        dll = next((dll_of_head[t] for t in link[1] if t in dll_of_head), only)
        if dll is None:
            continue
        hint_name = obj.sections.get(".idata$6", (b"", []))[0]
        if len(hint_name) > 2:
            symbol = _c_string(hint_name[2:])
            members.append(ImportLibraryMember(dll, symbol))
            continue
        thunk = obj.sections.get(".idata$4", (b"", []))[0]
        wide = obj.machine in _MACHINES_64
        if len(thunk) >= (8 if wide else 4):
            (value,) = (_U64 if wide else _U32).unpack_from(thunk, 0)
            if value >> (63 if wide else 31):
                imp = next((n[6:] for n in obj.defined if n.startswith("__imp_")), None)
                members.append(ImportLibraryMember(dll, imp, ordinal=value & 0xFFFF))
    return members, dlls
