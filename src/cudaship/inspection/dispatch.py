"""From one buffer to one :class:`FileReport`: recognise the format by its first bytes, call the readers.

The format is decided by magic, never by the file name: ELF (``e_machine`` 190 is a cubin), PE (``MZ``),
Mach-O (thin and fat, both byte orders), a fatbin container, a COFF archive (``!<arch>\\n``, read as an import
library) and PTX text. Every problem becomes the report's one-line ``error``; an unexpected exception from a
reader becomes one too (naming its type), so one bad file never hides the others.
"""

from __future__ import annotations

from dataclasses import replace

from cudaship.binary.magic import MACHO_FAT_MAGICS, binary_format
from cudaship.errors import CudashipError
from cudaship.records.binary import (
    DeviceCode,
    DeviceCodeKind,
    FatbinContainer,
    FileFormat,
    HostBinary,
    Import,
    ImportedSymbol,
    ImportKind,
    LinkerScript,
    Machine,
)
from cudaship.records.buffer import Buffer
from cudaship.records.files import CudaLinkage, FileReport


def detect_format(buf: Buffer) -> FileFormat | None:
    """The format of ``buf`` from its first bytes, or None when it is none that cudaship reads."""
    head = bytes(buf[:64])
    fmt = binary_format(head)
    # A fat Mach-O magic followed by a Java class version is no binary, and no PTX either.
    if fmt is None and head[:4] not in MACHO_FAT_MAGICS and _looks_like_ptx(buf):
        return FileFormat.PTX
    if fmt is None and _looks_like_linker_script(buf):
        return FileFormat.LINKER_SCRIPT
    return fmt


def _looks_like_ptx(buf: Buffer) -> bool:
    from cudaship.binary.ptx import looks_like_ptx  # the reader a format needs, when met: start-up time

    return looks_like_ptx(buf)


def _looks_like_linker_script(buf: Buffer) -> bool:
    # the reader a format needs, when met: start-up time
    from cudaship.binary.ldscript import looks_like_linker_script

    return looks_like_linker_script(buf)


def inspect_buffer(
    buf: Buffer,
    path: str,
    *,
    container: str | None = None,
    details: bool = False,
    notes: tuple[str, ...] = (),
    device: bool = True,
    toolkit_sample: bool = False,
) -> FileReport:
    """Read ``buf`` (the bytes of ``path``) and report everything inspect knows about it.

    ``details`` decompresses SASS entries to read the toolkit version each cubin records. Without it, a
    sample is read (:func:`_with_kernel_sample`): per loadable kind and arch, entries until one holds a
    kernel, for what the verdicts need; ``toolkit_sample`` keeps the toolkit versions the sample read (the
    audit's consistency check needs one cubin per arch, no more). ``device=False``
    reads what a loader question needs: imports, search paths, symbol versions (ELF: no unversioned exports,
    no library names from read-only data), no device code, no CUDA runtime linkage.
    Never raises for bad input: the report's ``error`` says what went wrong.
    """
    size = len(buf)
    fmt = detect_format(buf)
    if fmt is None:
        if size == 0:
            reason = "empty file"
        else:
            reason = "not a binary cudaship reads (no ELF, PE, Mach-O, fatbin, COFF archive or PTX signature)"
        return FileReport(path=path, format=None, size=size, container=container, error=reason, notes=notes)
    state = _Partial(path=path, format=fmt, size=size, container=container, notes=notes)
    try:
        _read_into(state, buf, details=details, device=device, toolkit=toolkit_sample)
    except CudashipError as e:
        state.error = _one_line(e.message)
    except Exception as e:  # a reader bug must not hide the other files
        state.error = _one_line(f"cannot read ({type(e).__name__}: {e})")
    return state.report()


class _Partial:
    """What has been read so far, so a late failure still reports what came before it."""

    def __init__(
        self, *, path: str, format: FileFormat, size: int, container: str | None, notes: tuple[str, ...]
    ) -> None:
        self.path = path
        self.format = format
        self.size = size
        self.container = container
        self.notes = list(notes)
        self.host: HostBinary | None = None
        self.linkage: CudaLinkage | None = None
        self.containers: tuple[FatbinContainer, ...] = ()
        self.device_code: tuple[DeviceCode, ...] = ()
        self.error: str | None = None
        self.linker_script: LinkerScript | None = None

    def report(self) -> FileReport:
        return FileReport(
            path=self.path,
            format=self.format,
            size=self.size,
            container=self.container,
            host=self.host,
            linkage=self.linkage,
            containers=self.containers,
            device_code=self.device_code,
            error=self.error,
            notes=tuple(self.notes),
            linker_script=self.linker_script,
        )


def _read_into(
    state: _Partial, buf: Buffer, *, details: bool, device: bool = True, toolkit: bool = False
) -> None:
    fmt = state.format
    if fmt in (FileFormat.ELF, FileFormat.PE, FileFormat.MACHO):
        host = _read_host(fmt, buf, full=device)
        state.host = host
        if not device:  # host-side facts only: no device code, no runtime linkage
            return
        _scan_device_code(state, buf, host, details=details, toolkit=toolkit)
        # the reader a format needs, when met: start-up time
        from cudaship.analysis.linkage import cuda_linkage

        state.linkage = cuda_linkage(host)
    elif fmt is FileFormat.COFF_IMPORT_LIBRARY:
        state.host = _read_import_library(buf)
        if not state.host.imports:  # the signature only says "ar archive": one naming no DLL is static
            state.format = FileFormat.STATIC_LIBRARY
        _scan_device_code(
            state, buf, None, details=details, toolkit=toolkit
        )  # static libraries may carry relocatable code
    elif fmt is FileFormat.LINKER_SCRIPT:
        from cudaship.binary.ldscript import read_linker_script  # the reader a format needs, when met

        state.linker_script = read_linker_script(buf)
    else:
        _read_device_file(state, buf, details=details)


def _read_device_file(state: _Partial, buf: Buffer, *, details: bool) -> None:
    """A standalone fatbin, cubin or PTX file."""
    # the reader a format needs, when met: start-up time
    from cudaship.binary.devicescan import read_device_file

    found = read_device_file(buf)
    containers = found.containers
    if details:
        containers = tuple(_with_details(buf, c, state.notes) for c in containers)
        state.device_code = tuple(e for c in containers for e in c.entries) or found.entries
    elif containers:
        containers = _with_kernel_sample(buf, containers, toolkit=False)
        state.device_code = tuple(e for c in containers for e in c.entries)
    else:
        state.device_code = found.entries
    state.containers = containers


def stored_library_names(buf: Buffer) -> tuple[str, ...]:
    """The library names a native file stores as strings (what it may dlopen by name): its host facts read in
    full, no device code; () for what is not a host binary. ``doctor --env`` reads an environment's hosts
    without them (a big C++ library stores 100,000 strings) and asks this of the few libraries that may load a
    plugin by name."""
    fmt = binary_format(bytes(buf[:64]))
    if fmt not in (FileFormat.ELF, FileFormat.PE, FileFormat.MACHO):
        return ()
    return _read_host(fmt, buf).embedded_library_names


def _read_host(fmt: FileFormat, buf: Buffer, *, full: bool = True) -> HostBinary:
    if fmt is FileFormat.ELF:
        from cudaship.binary.elf import read_elf  # the reader a format needs, when met: start-up time

        return read_elf(buf, full=full)
    if fmt is FileFormat.PE:
        from cudaship.binary.pe import read_pe  # the reader a format needs, when met: start-up time

        return read_pe(buf)
    from cudaship.binary.macho import read_macho  # the reader a format needs, when met: start-up time

    return read_macho(buf)


def _read_import_library(buf: Buffer) -> HostBinary:
    """A COFF import library as a host record: one import per DLL it names, with the symbols it provides."""
    # the reader a format needs, when met: start-up time
    from cudaship.binary.coff_importlib import read_import_library

    library = read_import_library(buf)
    by_dll: dict[str, list[ImportedSymbol]] = {dll: [] for dll in library.dlls}
    for member in library.members:
        by_dll.setdefault(member.dll, []).append(ImportedSymbol(member.symbol, member.ordinal))
    imports = tuple(Import(dll, ImportKind.IMPORT, tuple(symbols)) for dll, symbols in by_dll.items())
    return HostBinary(
        format=FileFormat.COFF_IMPORT_LIBRARY if imports else FileFormat.STATIC_LIBRARY,
        machine=Machine.OTHER,
        bits=0,
        kind="import-library" if imports else "static-library",
        imports=imports,
    )


def _scan_device_code(
    state: _Partial, buf: Buffer, host: HostBinary | None, *, details: bool, toolkit: bool = False
) -> None:
    """Find every container; one that fails validation inside a fatbin section is corruption, not noise."""
    # the reader a format needs, when met: start-up time
    from cudaship.binary.devicescan import is_device_section, scan_containers

    sections = host.sections if host is not None else ()
    # Only rejections inside device sections are reported (as corruption): the rest of the file is searched
    # for the container header's first 8 bytes, faster than the bare magic.
    scan = scan_containers(buf, sections, all_rejected=False)
    containers = scan.containers
    if details:
        containers = tuple(_with_details(buf, c, state.notes) for c in containers)
    elif containers:
        containers = _with_kernel_sample(buf, containers, toolkit=toolkit)
    state.containers = containers
    state.device_code = tuple(entry for c in containers for entry in c.entries)
    corrupt = [r for r in scan.rejected if is_device_section(r.section)]
    if corrupt:
        first = corrupt[0]
        more = f" (and {len(corrupt) - 1} more)" if len(corrupt) > 1 else ""
        state.error = _one_line(
            f"corrupt fatbin container in {first.section} at {first.offset:#x}: {first.reason}{more}"
        )


#: Problems with single entries under ``--details`` noted per file before the rest are only counted.
_MAX_DETAIL_NOTES = 5


def _with_details(buf: Buffer, container: FatbinContainer, notes: list[str]) -> FatbinContainer:
    """Decompress each SASS and PTX entry of ``container`` for what only its payload knows.

    An entry whose payload is corrupt keeps what its header said and gets a note; the rest are still read.
    """
    from cudaship.binary.cubin import entry_details  # the reader a format needs, when met: start-up time

    entries = []
    for entry in container.entries:
        try:
            entries.append(entry_details(buf, entry))
        except CudashipError as e:
            entries.append(entry)
            failed = sum(1 for n in notes if n.startswith("--details:"))
            if failed < _MAX_DETAIL_NOTES:
                notes.append(f"--details: {_one_line(e.message)}")
            elif failed == _MAX_DETAIL_NOTES:
                notes.append("--details: more entries could not be decompressed (not listed)")
    return replace(container, entries=tuple(entries))


def _with_kernel_sample(
    buf: Buffer, containers: tuple[FatbinContainer, ...], *, toolkit: bool
) -> tuple[FatbinContainer, ...]:
    """Read, per kind (SASS, PTX) and arch of the loadable entries, entries in file order until one holds a
    kernel, filling in their ``kernels`` (and ``toolkit_version`` with ``toolkit``).

    A verdict needs no more: an arch one of whose entries holds a kernel counts as code whatever its other
    entries hold (those stay ``kernels=None``, "not read", which counts as code too); an arch all of whose
    entries hold none restricts no GPU, and each of them was read to show it. A typical library costs one
    decompression per arch (what the audit's toolkit sample always cost); one made only of code-less cubins,
    one per entry. An entry that cannot be decompressed stays unread and ends its arch's sample (the
    ``--details`` mode reports it).
    """
    from cudaship.binary.cubin import entry_details  # the reader a format needs, when met: start-up time

    settled: set[tuple[DeviceCodeKind, str]] = set()
    read: dict[int, DeviceCode] = {}
    for container in containers:
        for entry in container.entries:
            key = (entry.kind, entry.arch)
            if entry.relocatable or key in settled:
                continue
            if entry.kind not in (DeviceCodeKind.SASS, DeviceCodeKind.PTX):
                continue
            try:
                detailed = entry_details(buf, entry)
            except CudashipError:
                settled.add(key)
                continue
            if not toolkit:
                detailed = replace(detailed, toolkit_version=entry.toolkit_version)
            read[entry.offset] = detailed
            if detailed.kernels != 0:
                settled.add(key)
    if not read:
        return containers
    return tuple(replace(c, entries=tuple(read.get(e.offset, e) for e in c.entries)) for c in containers)


def _one_line(text: str) -> str:
    lines = [line.strip() for line in str(text).splitlines() if line.strip()]
    return " ".join(lines) if lines else "unreadable"
