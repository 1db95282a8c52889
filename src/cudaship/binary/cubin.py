"""Cubins: ELF files with ``e_machine == EM_CUDA`` (190), standalone or inside a fatbin entry.

What a cubin says about itself (all verified on nvcc 13.0 output, see docs/formats.md):

* the SM number, in ``e_flags``: ``e_flags & 0xFF`` for ELF ABI version 7 (CUDA 11/12),
  ``(e_flags >> 8) & 0xFF`` for ABI version 8 (CUDA 13);
* an 'a' target (``sm_90a``), in the ``.nv.compat`` section: attribute 0x09 set to 1. ``e_flags`` are
  identical for ``sm_100``, ``sm_100a`` and ``sm_100f``;
* an 'f' target (``sm_100f``), only in the ptxas/nvlink command line kept in the ``.note.nv.tkinfo`` note;
* the producing tool, toolkit release and command line, in ``.note.nv.tkinfo``;
* the virtual SM and toolkit version, in ``.note.nv.cuinfo``;
* kernels, as FUNC symbols with ``st_other & 0x10`` (STO_CUDA_ENTRY); ``.text.<name>`` sections when there is
  no symbol table (with ``-rdc=true`` device functions get ``.text.<name>`` sections too).

The ELF parser here is deliberately small: it reads the header, the section headers and the three sections
above, checking each offset against the buffer. It never follows anything else.
"""

from __future__ import annotations

import re
import struct
from dataclasses import dataclass, replace
from typing import NamedTuple

from cudaship.binary._bounded import work_budget
from cudaship.binary.fatbin import entry_payload, standalone_code
from cudaship.binary.magic import ELF_MAGIC, EM_CUDA
from cudaship.binary.ptx import ptx_kernel_count, read_ptx
from cudaship.errors import BinaryFormatError
from cudaship.records.binary import CubinInfo, DeviceCode, DeviceCodeKind
from cudaship.records.buffer import Buffer

#: EI_OSABI of cubins: 0x33 with ELF ABI version 7 (CUDA 11/12), 0x41 with version 8 (CUDA 12.8+ for sm_100+,
#: CUDA 13 always). Not checked: it says nothing the rest of the header does not.
ELFOSABI_CUDA_V7, ELFOSABI_CUDA_V8 = 0x33, 0x41
ET_REL = 1
SHT_NOBITS = 8
SHT_NOTE = 7
SHF_EXECINSTR = 0x4
SHT_SYMTAB = 2
STT_FUNC = 2
STO_CUDA_ENTRY = 0x10  #: st_other bit of a kernel (``__global__``) symbol

NOTE_OWNER = b"NVIDIA Corp"
NOTE_TKINFO = 2000
NOTE_CUINFO = 1000
#: ``.nv.compat`` attribute that is 1 on arch-specific ('a') cubins.
COMPAT_ARCH_SPECIFIC = 0x09

#: Format bytes of ``.nv.info``-style TLV records.
_EIFMT_NVAL, _EIFMT_BVAL, _EIFMT_HVAL, _EIFMT_SVAL = 1, 2, 3, 4

_IDENT = struct.Struct("<4sBBBBB7x")
_HEADERS = {
    1: (struct.Struct("<HHIIIIIHHHHHH"), struct.Struct("<IIIIIIIIII")),  # ELFCLASS32
    2: (struct.Struct("<HHIQQQIHHHHHH"), struct.Struct("<IIQQQQIIQQ")),  # ELFCLASS64
}
#: The largest section count we believe (real cubins from cuBLASLt have a few thousand).
MAX_SECTIONS = 1 << 20
_ARCH_OPTION = re.compile(r"(?:^|\s)-{1,2}(?:arch|gpu-name)(?:=|\s+)sm_(\d+)([af]?)(?=\s|$)")
_RELEASE = re.compile(r"release (\d+)\.(\d+)")


@dataclass(frozen=True)
class _Section:
    name: str
    type: int
    flags: int
    offset: int
    size: int
    link: int


def is_cubin(buf: Buffer) -> bool:
    """True when ``buf`` starts like an EM_CUDA ELF (little-endian)."""
    if len(buf) < 20 or bytes(buf[:4]) != ELF_MAGIC:
        return False
    return bool(struct.unpack_from("<H", buf, 18)[0] == EM_CUDA and buf[5] == 1)


class _Header(NamedTuple):
    abi_version: int
    e_type: int
    e_version: int
    e_flags: int
    sections: list[_Section]
    elf_class: int


def _sections(buf: Buffer) -> _Header:
    """Parse the ELF header and the section table."""
    size = len(buf)
    if size < _IDENT.size:
        raise BinaryFormatError(f"file of {size} bytes is too short for an ELF header")
    magic, ei_class, ei_data, _ver, _osabi, abi_version = _IDENT.unpack_from(buf, 0)
    if magic != ELF_MAGIC:
        raise BinaryFormatError("not an ELF file (bad magic)")
    if ei_class not in _HEADERS:
        raise BinaryFormatError(f"ELF class {ei_class} is neither 32- nor 64-bit")
    if ei_data != 1:
        raise BinaryFormatError("cubin is not little-endian")
    ehdr, shdr = _HEADERS[ei_class]
    if size < _IDENT.size + ehdr.size:
        raise BinaryFormatError("ELF header is truncated")
    (
        e_type,
        e_machine,
        e_version,
        _entry,
        _phoff,
        shoff,
        e_flags,
        _eh,
        _phes,
        _phn,
        shentsize,
        shnum,
        shstrndx,
    ) = ehdr.unpack_from(buf, _IDENT.size)
    if e_machine != EM_CUDA:
        raise BinaryFormatError(f"ELF machine {e_machine} is not EM_CUDA ({EM_CUDA}): not a cubin")
    sections: list[_Section] = []
    if shoff == 0:
        return _Header(abi_version, e_type, e_version, e_flags, sections, ei_class)
    if shentsize < shdr.size:
        raise BinaryFormatError(f"ELF section header size {shentsize} is too small")
    if shoff > size or shoff + shdr.size > size:
        raise BinaryFormatError(f"ELF section table at {shoff:#x} is past the end of the file ({size} bytes)")
    raw: list[tuple[int, ...]] = []
    first = shdr.unpack_from(buf, shoff)
    if shnum == 0:  # extended numbering: the count is in section 0's sh_size
        shnum = first[5]
    if shstrndx == 0xFFFF:  # SHN_XINDEX
        shstrndx = first[6]
    if shnum > MAX_SECTIONS or shoff + shnum * shentsize > size:
        raise BinaryFormatError(
            f"ELF section table ({shnum} entries at {shoff:#x}) runs past the end of the file"
        )
    for i in range(shnum):
        raw.append(shdr.unpack_from(buf, shoff + i * shentsize))
    if shstrndx >= shnum:
        raise BinaryFormatError(f"ELF section name table index {shstrndx} is out of range")
    strtab = raw[shstrndx]
    str_off, str_size = strtab[4], strtab[5]
    if str_off > size or str_size > size - str_off:
        raise BinaryFormatError("ELF section name table is past the end of the file")
    names = bytes(buf[str_off : str_off + str_size])
    budget = _NameBudget(size, "ELF section names", "sections")
    for entry in raw:
        sh_name, sh_type, sh_flags, sh_offset, sh_size = entry[0], entry[1], entry[2], entry[4], entry[5]
        if sh_name >= len(names) and sh_name:
            raise BinaryFormatError(f"ELF section name offset {sh_name} is outside the name table")
        name = budget.name(names, sh_name)
        sections.append(_Section(name, sh_type, sh_flags, sh_offset, sh_size, entry[6]))
    return _Header(abi_version, e_type, e_version, e_flags, sections, ei_class)


def _section_bytes(buf: Buffer, section: _Section) -> bytes:
    """The bytes of a section we read. Only these are bounds-checked: CUDA has NOBITS-like section types of
    its own (``.nv.shared.*``, ``.nv_debug.shared`` are ``SHT_LOPROC + 0xa``) whose sizes exceed the file."""
    if section.offset > len(buf) or section.size > len(buf) - section.offset:
        raise BinaryFormatError(f"ELF section {section.name!r} runs past the end of the file")
    return bytes(buf[section.offset : section.offset + section.size])


def _notes(data: bytes) -> list[tuple[bytes, int, bytes]]:
    """(owner, type, descriptor) of each ELF note in ``data``; stops at the first malformed one."""
    notes = []
    pos = 0
    while pos + 12 <= len(data):
        namesz, descsz, ntype = struct.unpack_from("<III", data, pos)
        name_start = pos + 12
        desc_start = name_start + ((namesz + 3) & ~3)
        desc_end = desc_start + descsz
        if desc_end > len(data):
            break
        notes.append((data[name_start : name_start + namesz].rstrip(b"\0"), ntype, data[desc_start:desc_end]))
        pos = desc_start + ((descsz + 3) & ~3)
    return notes


def _until_nul(table: bytes, offset: int) -> bytes:
    """The bytes of ``table`` from ``offset`` to the next NUL (or the end), without copying the rest of it:
    a cubin's name tables are walked once per section and per symbol."""
    end = table.find(b"\0", offset)
    return table[offset:] if end < 0 else table[offset:end]


class _NameBudget:
    """Names read from a table, their bytes counted against :func:`work_budget` of the file: many entries
    sharing one long name cannot make the work grow with their product."""

    def __init__(self, size: int, what: str, entries: str) -> None:
        self._left = self._limit = work_budget(size)
        self._what = what
        self._entries = entries

    def name(self, table: bytes, offset: int) -> str:
        raw = _until_nul(table, offset)
        self._left -= len(raw) + 1
        if self._left < 0:
            raise BinaryFormatError(
                f"{self._what} add up to more than {self._limit} bytes ({self._entries} sharing one name?)"
            )
        return raw.decode("utf-8", "replace")


def _cstring(table: bytes, offset: int) -> str | None:
    if offset >= len(table):
        return None
    text = _until_nul(table, offset).decode("utf-8", "replace").strip()
    return text or None


@dataclass(frozen=True)
class ToolkitInfo:
    """The ``.note.nv.tkinfo`` strings: tool name, tool version line, build line, command line."""

    tool: str | None
    tool_version: str | None
    branch: str | None
    command_line: str | None

    @property
    def release(self) -> str | None:
        """``"13.0"`` from ``"Cuda compilation tools, release 13.0, V13.0.88"``."""
        match = _RELEASE.search(self.tool_version or "")
        return f"{match.group(1)}.{match.group(2)}" if match else None


def parse_tkinfo(desc: bytes) -> ToolkitInfo | None:
    """Descriptor of a tkinfo note: ``u32 version, u32 offsets[5]`` (object file, tool, tool version, branch,
    options) into a string table that follows the 24-byte head."""
    if len(desc) < 24:
        return None
    _version, _obj, tool, tool_version, branch, options = struct.unpack_from("<6I", desc, 0)
    table = desc[24:]
    return ToolkitInfo(
        _cstring(table, tool),
        _cstring(table, tool_version),
        _cstring(table, branch),
        _cstring(table, options),
    )


def parse_compat(data: bytes) -> dict[int, int | bytes]:
    """``.nv.compat`` records (``.nv.info`` TLV format): attribute → value."""
    attrs: dict[int, int | bytes] = {}
    pos = 0
    while pos + 4 <= len(data):
        fmt, attr, value = struct.unpack_from("<BBH", data, pos)
        pos += 4
        if fmt == _EIFMT_SVAL:
            attrs[attr] = data[pos : pos + value]
            pos += value
        elif fmt in (_EIFMT_NVAL, _EIFMT_BVAL, _EIFMT_HVAL):
            attrs[attr] = value if fmt != _EIFMT_BVAL else value & 0xFF
        else:
            break  # padding or an unknown format: nothing after it can be trusted
    return attrs


def _version_from_e_version(e_version: int) -> str | None:
    """ABI-version-7 cubins (CUDA 11/12) store the toolkit as ``e_version`` (121 → "12.1"); CUDA 13: 1."""
    if 100 <= e_version < 1000:
        return f"{e_version // 10}.{e_version % 10}"
    return None


def sm_from_flags(abi_version: int, e_flags: int) -> int:
    """The SM number stored in ``e_flags`` (its layout depends on EI_ABIVERSION)."""
    if abi_version >= 8:
        return (e_flags >> 8) & 0xFF
    return e_flags & 0xFF


def read_cubin(buf: Buffer) -> CubinInfo:
    """Read the facts of a cubin. Raises :class:`BinaryFormatError` for anything that is not a sound cubin."""
    return _cubin_info(buf, _sections(buf))


def _cubin_info(buf: Buffer, header: _Header) -> CubinInfo:
    abi_version, _e_type, e_version, e_flags, sections, elf_class = header
    sm = sm_from_flags(abi_version, e_flags)
    if sm == 0:
        raise BinaryFormatError(f"cubin e_flags {e_flags:#x} (ABI version {abi_version}) name no SM")
    tk: ToolkitInfo | None = None
    virtual_sm: int | None = None
    cuinfo_toolkit: str | None = None
    compat: dict[int, int | bytes] = {}
    text_sections: list[str] = []
    for section in sections:
        if section.name == ".note.nv.tkinfo" or section.name == ".note.nv.cuinfo":
            data = _section_bytes(buf, section)
            for owner, ntype, desc in _notes(data):
                if owner != NOTE_OWNER:
                    continue
                if ntype == NOTE_TKINFO and tk is None:
                    tk = parse_tkinfo(desc)
                elif ntype == NOTE_CUINFO and len(desc) >= 6:
                    _cu_version, vsm, toolkit = struct.unpack_from("<HHH", desc, 0)
                    virtual_sm = vsm or None
                    if toolkit:
                        cuinfo_toolkit = f"{toolkit // 10}.{toolkit % 10}"
        elif section.name == ".nv.compat":
            compat = parse_compat(_section_bytes(buf, section))
        elif section.name.startswith(".text.") and section.flags & SHF_EXECINSTR:
            text_sections.append(section.name[len(".text.") :])
    command_line = tk.command_line if tk else None
    variant = ""
    if compat.get(COMPAT_ARCH_SPECIFIC) == 1:
        variant = "a"
    elif command_line:
        for match in _ARCH_OPTION.finditer(command_line):
            if int(match.group(1)) == sm and match.group(2):
                variant = match.group(2)
    return CubinInfo(
        sm=sm,
        variant=variant,
        abi_version=abi_version,
        e_flags=e_flags,
        toolkit_version=(tk.release if tk else None) or cuinfo_toolkit or _version_from_e_version(e_version),
        tool=tk.tool if tk else None,
        command_line=command_line,
        virtual_sm=virtual_sm,
        kernels=_kernel_symbols(buf, sections, elf_class) or tuple(text_sections),
    )


_SYMBOLS = {1: struct.Struct("<IIIBBH"), 2: struct.Struct("<IBBHQQ")}
#: The largest symbol table we walk (cuBLASLt cubins have tens of thousands of symbols).
MAX_SYMBOLS = 1 << 22


def _kernel_symbols(buf: Buffer, sections: list[_Section], elf_class: int) -> tuple[str, ...]:
    """Names of the FUNC symbols marked STO_CUDA_ENTRY: the kernels.

    ``.text.<name>`` sections are not enough: with ``-rdc=true`` every non-inlined ``__device__`` function
    gets one too. Returns () when there is no usable symbol table (the caller then falls back to sections).
    """
    symtab = next((s for s in sections if s.type == SHT_SYMTAB), None)
    if symtab is None or not 0 < symtab.link < len(sections):
        return ()
    layout = _SYMBOLS[elf_class]
    data = _section_bytes(buf, symtab)
    names = _section_bytes(buf, sections[symtab.link])
    count = min(len(data) // layout.size, MAX_SYMBOLS)
    kernels: list[str] = []
    budget = _NameBudget(len(buf), "cubin: kernel names", "symbols")
    for i in range(count):
        fields = layout.unpack_from(data, i * layout.size)
        st_name, st_info, st_other = (fields[0], fields[3], fields[4]) if elf_class == 1 else fields[:3]
        if st_info & 0xF == STT_FUNC and st_other & STO_CUDA_ENTRY and st_name < len(names):
            name = budget.name(names, st_name)
            if name:
                kernels.append(name)
    return tuple(dict.fromkeys(kernels))


def cubin_is_relocatable(buf: Buffer) -> bool:
    """True for an ET_REL cubin (``nvcc -cubin -rdc=true``): device-linked, not loaded as is."""
    return _sections(buf).e_type == ET_REL


def cubin_device_code(buf: Buffer) -> DeviceCode:
    """The record of a standalone ``.cubin`` file: :func:`read_cubin` and :func:`cubin_is_relocatable` from
    one reading of its ELF header and section table."""
    header = _sections(buf)
    info = _cubin_info(buf, header)
    return standalone_code(
        DeviceCodeKind.SASS,
        info.sm,
        info.variant,
        len(buf),
        len(info.kernels),
        relocatable=header.e_type == ET_REL,
        toolkit_version=info.toolkit_version,
    )


def entry_details(buf: Buffer, entry: DeviceCode) -> DeviceCode:
    """Decompress one fatbin entry of ``buf`` and fill in what only its payload knows.

    SASS: ``toolkit_version`` from the cubin's notes (and the cubin must agree with the header's SM).
    PTX: ``version`` from the ``.version`` directive when the header lacked it. Both: ``kernels``, how many
    kernels the payload holds. Other kinds come back as is.
    Raises :class:`BinaryFormatError` when the payload is corrupt, a bomb, or disagrees with its header.
    """
    if entry.kind not in (DeviceCodeKind.SASS, DeviceCodeKind.PTX):
        return entry
    payload = entry_payload(buf, entry)
    where = f"fatbin entry at {entry.offset:#x}"
    try:
        if entry.kind is DeviceCodeKind.SASS:
            info = read_cubin(payload)
            if info.sm != entry.sm:
                raise BinaryFormatError(f"holds a cubin for sm_{info.sm}, header says sm_{entry.sm}")
            return replace(entry, toolkit_version=info.toolkit_version, kernels=len(info.kernels))
        if entry.version:  # the header gave the ISA: only the kernel count is wanted (fast)
            return replace(entry, kernels=ptx_kernel_count(payload))
        ptx = read_ptx(payload)
        return replace(entry, version=ptx.isa_version, kernels=len(ptx.entries))
    except BinaryFormatError as e:
        raise BinaryFormatError(f"{where}: {e.message}") from e
