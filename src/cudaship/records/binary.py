"""Plain typed records produced by the binary readers.

Every reader in :mod:`cudaship.binary` returns these frozen dataclasses and nothing else; checks, the
knowledge base and renderers consume them. Readers take a buffer (``bytes``, ``memoryview`` or ``mmap``),
never a path, and raise :class:`cudaship.errors.BinaryFormatError` (without a path; the caller adds it) on
bad input.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from enum import Enum

#: What a reader accepts: anything sliceable with ``len`` that yields bytes.


class FileFormat(str, Enum):
    ELF = "elf"
    PE = "pe"
    MACHO = "macho"
    CUBIN = "cubin"
    FATBIN = "fatbin"
    PTX = "ptx"
    COFF_IMPORT_LIBRARY = "coff-import-library"  #: an ``!<arch>`` archive naming DLLs (an import library)
    STATIC_LIBRARY = "static-library"  #: an ``!<arch>`` archive of objects naming no DLL (Linux ``.a``, ...)
    #: a GNU ld linker script (``INPUT(...)``, ``GROUP(...)``): text for the link editor's ``-lfoo``, never
    #: loaded at run time (glibc's ``libc.so``, a wheel's ``libfoo.so`` naming ``libfoo.so.1``)
    LINKER_SCRIPT = "linker-script"


class Machine(str, Enum):
    """Host machine, normalized across formats (PE's AMD64 is ``x86_64``, Mach-O's arm64 is ``aarch64``)."""

    X86_64 = "x86_64"
    AARCH64 = "aarch64"
    X86 = "x86"
    ARM = "arm"
    PPC64LE = "ppc64le"
    CUDA = "cuda"  #: an EM_CUDA cubin
    OTHER = "other"


@dataclass(frozen=True)
class Section:
    """A section of a host binary: its name as stored (PE names are cut to 8 characters)."""

    name: str
    offset: int  #: file offset of its bytes
    size: int  #: bytes present in the file (0 for NOBITS / uninitialized data)
    address: int = 0  #: virtual address (RVA for PE)
    #: holds machine code (ELF SHF_EXECINSTR, PE IMAGE_SCN_MEM_EXECUTE / CNT_CODE, Mach-O instruction
    #: attributes). The device-code scan does not search these: linkers place fatbins in data sections.
    executable: bool = False


@dataclass(frozen=True)
class ImportedSymbol:
    """One symbol taken from a library: by name, or (PE) by ordinal."""

    name: str | None
    ordinal: int | None = None
    version: str | None = None  #: ELF symbol version (e.g. ``libcudart.so.13``), when the binary records it


class ImportKind(str, Enum):
    NEEDED = "needed"  #: ELF DT_NEEDED
    IMPORT = "import"  #: PE import directory
    DELAY = "delay"  #: PE delay-load import directory
    DYLIB = "dylib"  #: Mach-O LC_LOAD_DYLIB (and weak / re-export / lazy variants)


@dataclass(frozen=True)
class Import:
    """A library a binary names to be loaded with it, exactly as written, with the symbols taken from it.

    For ELF, symbols are attached to a library only where symbol versioning says which library provides them;
    the rest are in :attr:`HostBinary.undefined_symbols`.
    """

    library: str
    kind: ImportKind
    symbols: tuple[ImportedSymbol, ...] = ()


@dataclass(frozen=True)
class HostBinary:
    """Host-side facts of an ELF, PE or Mach-O file."""

    format: FileFormat
    machine: Machine
    bits: int
    kind: str  #: "shared-library", "executable", "object", "other"
    soname: str | None = None  #: ELF DT_SONAME; Mach-O LC_ID_DYLIB; PE export directory name
    rpath: tuple[str, ...] = ()  #: ELF DT_RPATH entries; Mach-O LC_RPATH
    runpath: tuple[str, ...] = ()  #: ELF DT_RUNPATH entries
    imports: tuple[Import, ...] = ()
    exports: tuple[str, ...] = ()  #: defined dynamic symbols (ELF), exports (PE, Mach-O)
    undefined_symbols: tuple[ImportedSymbol, ...] = ()  #: ELF: undefined dynamic symbols
    #: ELF: the symbol versions this file defines (``.gnu.version_d``: ``GLIBC_2.34``,
    #: ``libnvJitLink.so.12``), the base entry (the file's own name) left out; empty when none.
    version_definitions: tuple[str, ...] = ()
    #: ELF: (symbol, version) of each exported symbol bound to a defined version other than the base one,
    #: sorted; what a versioned import (``__nvJitLinkComplete_12_4@libnvJitLink.so.12``) is checked against.
    versioned_exports: tuple[tuple[str, str], ...] = ()
    sections: tuple[Section, ...] = ()
    #: Library names stored as strings in read-only data (``libcuda.so.1``, ``nvcuda.dll``, ...): evidence of
    #: dlopen / LoadLibrary. Only names matching a library-like pattern are kept.
    embedded_library_names: tuple[str, ...] = ()
    #: Strings only the CUDA runtime itself stores (``cudaGetExportTable``, ``__cudaRegisterFatBinary``),
    #: found in the same read-only data: evidence that the runtime is linked in statically (analysis.linkage).
    cuda_markers: tuple[str, ...] = ()


class DeviceCodeKind(str, Enum):
    SASS = "sass"  #: an ELF cubin (fatbin entry kind 2, or 4 for the old cubin kind)
    PTX = "ptx"
    LTOIR = "ltoir"  #: NVVM IR / LTO-IR (entry kind 8)
    UNKNOWN = "unknown"  #: an entry kind not documented (0x10, 0x40 seen in cuBLASLt)


class Compression(str, Enum):
    NONE = "none"
    LZ4 = "lz4"
    ZSTD = "zstd"


@dataclass(frozen=True)
class DeviceCode:
    """One piece of device code: a fatbin entry, or a standalone cubin / PTX file.

    ``arch`` is the name with its variant, as a user writes it: ``sm_90a``, ``sm_100f`` for SASS and LTO-IR,
    ``compute_120`` (``compute_90a``) for PTX.
    """

    kind: DeviceCodeKind
    arch: str
    sm: int  #: the SM number without variant (90 for sm_90a)
    variant: str  #: "", "a" or "f"
    section: str | None  #: host section that held it (None for standalone files)
    relocatable: bool  #: lives in a relocatable fatbin (``__nv_relfatbin``): linked, not loaded at run time
    compression: Compression
    stored_size: int  #: bytes stored in the file (padded payload)
    uncompressed_size: int | None  #: payload size once decompressed (None when not recorded)
    offset: int  #: file offset of the entry header (or of the file itself when standalone)
    container_offset: int | None = None  #: file offset of the fatbin container holding it
    #: PTX: the PTX ISA version ("9.0"); SASS: the cubin code version recorded in the entry header.
    version: str | None = None
    flags: int = 0  #: raw fatbin entry flags
    name: str | None = None  #: optional identifier stored in the entry
    host: str | None = None  #: "linux", "windows", "mac" from the entry flags
    debug: bool = False
    #: Toolkit that produced a cubin, from ``.note.nv.tkinfo`` (only when the entry was decompressed/read).
    toolkit_version: str | None = None
    ptxas_options: str | None = None  #: PTX: options string stored beside the entry
    #: Kernels the payload holds: a cubin's FUNC symbols marked STO_CUDA_ENTRY (``cuobjdump -elf`` shows
    #: them as ``FUNC ... ENTRY``), a PTX text's ``.entry`` directives. None when the payload was not read.
    #: 0: device code with nothing a host can launch (nvlink writes such cubins when a library's device code
    #: all went away: ``libcufftw.so.12``'s sm_75 cubin); it restricts no GPU (see docs/gpus.md).
    kernels: int | None = None


@dataclass(frozen=True)
class FatbinContainer:
    """One fatbin container (magic 0xBA55ED50) found in a file."""

    offset: int  #: file offset of the container header
    size: int  #: header + fat_size
    section: str | None
    relocatable: bool
    entries: tuple[DeviceCode, ...]


@dataclass(frozen=True)
class CubinInfo:
    """Facts read from an EM_CUDA ELF (a cubin)."""

    sm: int
    variant: str  #: "a" when .nv.compat says so, "f" when the tkinfo command line says so, else ""
    abi_version: int
    e_flags: int
    toolkit_version: str | None = None  #: from .note.nv.tkinfo
    tool: str | None = None  #: producing tool name from .note.nv.tkinfo
    command_line: str | None = None  #: ptxas command line from .note.nv.tkinfo
    virtual_sm: int | None = None  #: from .note.nv.cuinfo
    #: names of the kernels: FUNC symbols marked STO_CUDA_ENTRY, else ``.text.<name>`` sections
    kernels: tuple[str, ...] = ()


@dataclass(frozen=True)
class PtxInfo:
    """Facts read from PTX text."""

    isa_version: str  #: ".version 9.0" → "9.0"
    target: str  #: ".target sm_90a" → "sm_90a"
    address_size: int | None = None
    entries: tuple[str, ...] = ()  #: .entry names


@dataclass(frozen=True)
class ImportLibraryMember:
    """One short import object of a COFF import library: the DLL it names and the symbol it imports."""

    dll: str
    symbol: str | None
    ordinal: int | None = None


@dataclass(frozen=True)
class LinkerScript:
    """Facts read from a GNU ld linker script: the files it hands to the link editor, as written.

    ``inputs`` are the operands of ``INPUT`` and ``GROUP`` (those inside ``AS_NEEDED(...)`` too), in order;
    a name may be a file name (looked up beside the script, then on the search path), an absolute path (on
    the machine that links) or ``-lname``.
    """

    inputs: tuple[str, ...]
    as_needed: tuple[str, ...] = ()  #: the inputs that sit inside ``AS_NEEDED(...)``
    output_format: str | None = None  #: ``OUTPUT_FORMAT(elf64-x86-64)``'s first operand


@dataclass(frozen=True)
class ImportLibrary:
    """A COFF import library (``.lib``): which DLL(s) it names and which symbols it provides."""

    dlls: tuple[str, ...]
    members: tuple[ImportLibraryMember, ...] = field(default=())


@dataclass(frozen=True)
class LdCacheEntry:
    """One library of the dynamic loader's cache (``/etc/ld.so.cache``): a name and the file it maps to."""

    name: str  #: the SONAME (or file name) ``ldconfig`` recorded: ``libcudart.so.12``
    path: str  #: ``/usr/local/cuda-12.8/targets/x86_64-linux/lib/libcudart.so.12``
    machine: Machine  #: from the entry's flags: a 32-bit x86 entry is not used by a 64-bit process
