"""The result of one ``inspect`` run and the derived facts every renderer shows the same way.

Renderers print; they do not decide. What a summary line says, how entries are grouped and which CUDA
release a PTX ISA version implies are decided here, once.
"""

from __future__ import annotations

import shutil
from collections.abc import Iterable, Sequence
from dataclasses import dataclass

from cudaship import words
from cudaship.exitcodes import ExitCode
from cudaship.knowledge.archs import sort_arch_names
from cudaship.records.binary import DeviceCode, DeviceCodeKind
from cudaship.records.files import ContainerKind, FileReport, RuntimeLinkage, WheelInfo
from cudaship.wheel.records import WheelVariant


@dataclass(frozen=True)
class WheelReport:
    """One container read in place (a wheel, or an exported program: ``.pt2``, ``.pte``): its own facts
    and the reports of the members read, each with ``container`` = this path."""

    path: str  #: as given (or as found under a directory)
    info: WheelInfo | None  #: None when the archive could not be opened, and for programs
    error: str | None
    files: tuple[FileReport, ...]
    kind: ContainerKind = ContainerKind.WHEEL
    #: programs: the CUDA train the code was built for, when the members tell (``13.0``), and how
    #: (``PTX ISA 9.0``); None when nothing records it
    cuda_train: str | None = None
    train_evidence: str | None = None
    notes: tuple[str, ...] = ()
    #: a variant wheel's label and ``variant.json`` (None for a non-variant wheel), and why a malformed one
    #: could not be read (``inspect`` reads on; ``gpus`` and ``doctor`` refuse it when they pick a variant)
    variant: WheelVariant | None = None
    variant_error: str | None = None


@dataclass(frozen=True)
class InspectReport:
    """Every file inspected in one run, wheel members included, in input order."""

    inputs: tuple[str, ...]
    files: tuple[FileReport, ...]
    wheels: tuple[WheelReport, ...] = ()
    #: Top-level items in input order: plain files and wheels (whose members are in their ``files``).
    items: tuple[FileReport | WheelReport, ...] = ()

    @property
    def failed(self) -> tuple[FileReport, ...]:
        return tuple(f for f in self.files if f.error is not None)

    @property
    def exit_code(self) -> ExitCode:
        """0 when every input was read, 2 when any could not be."""
        return ExitCode.BAD_INPUT if self.failed else ExitCode.OK


@dataclass(frozen=True)
class EntryGroup:
    """Entries that agree on everything a reader cares about, counted (a container often repeats an arch)."""

    kind: DeviceCodeKind
    arch: str
    section: str | None
    relocatable: bool
    compression: str
    version: str | None
    count: int
    stored_size: int
    uncompressed_size: int | None  #: None when any entry of the group does not record it
    toolkits: tuple[str, ...] = ()  #: toolkit versions the cubins record (read with ``--details`` only)
    #: entries read and found to hold no kernel (``DeviceCode.kernels == 0``); entries not read do not count
    kernel_free: int = 0


def _arch_sorted(names: Iterable[str]) -> tuple[str, ...]:

    return tuple(sort_arch_names(set(names)))


class ArchIndex:
    """The sorted unique arch names of entries, by kind and ``relocatable``, from one pass over the entries (a
    report asks for five or more such lists, and a large library has thousands of entries)."""

    def __init__(self, device_code: Iterable[DeviceCode]) -> None:
        found: dict[tuple[DeviceCodeKind, bool], set[str]] = {}
        for d in device_code:
            key = (d.kind, d.relocatable)
            names = found.get(key)
            if names is None:
                names = found[key] = set()
            names.add(d.arch)
        self._found = found

    def names(self, kind: DeviceCodeKind, *, relocatable: bool | None = None) -> tuple[str, ...]:
        """Sorted unique arch names of one kind; ``relocatable`` None means both kinds of fatbin."""
        if relocatable is not None:
            return _arch_sorted(self._found.get((kind, relocatable), ()))
        return _arch_sorted([*self._found.get((kind, False), ()), *self._found.get((kind, True), ())])


def group_entries(device_code: Iterable[DeviceCode]) -> tuple[EntryGroup, ...]:
    """Entries grouped by kind, arch, section, relocatable, compression and version, in arch order."""
    groups: dict[tuple[DeviceCodeKind, str, str | None, bool, str, str | None], list[DeviceCode]] = {}
    for d in device_code:
        key = (d.kind, d.arch, d.section, d.relocatable, d.compression.value, d.version)
        groups.setdefault(key, []).append(d)
    order = {name: i for i, name in enumerate(_arch_sorted(k[1] for k in groups))}
    kind_order = {
        DeviceCodeKind.SASS: 0,
        DeviceCodeKind.PTX: 1,
        DeviceCodeKind.LTOIR: 2,
        DeviceCodeKind.UNKNOWN: 3,
    }
    result = []
    for key in sorted(
        groups, key=lambda k: (k[3], kind_order[k[0]], order[k[1]], k[2] or "", k[4], k[5] or "")
    ):
        entries = groups[key]
        sizes = [e.uncompressed_size for e in entries]
        result.append(
            EntryGroup(
                kind=key[0],
                arch=key[1],
                section=key[2],
                relocatable=key[3],
                compression=key[4],
                version=key[5],
                count=len(entries),
                stored_size=sum(e.stored_size for e in entries),
                uncompressed_size=None
                if any(s is None for s in sizes)
                else sum(s for s in sizes if s is not None),
                toolkits=tuple(sorted({e.toolkit_version for e in entries if e.toolkit_version})),
                kernel_free=sum(1 for e in entries if e.kernels == 0),
            )
        )
    return tuple(result)


def linkage_phrase(report: FileReport) -> str | None:
    """``cudart 13 dynamic``, ``cudart static``, ``no cudart`` (None when the file is not a host binary)."""
    linkage = report.linkage
    if linkage is None:
        return None
    if linkage.runtime is RuntimeLinkage.DYNAMIC:
        major = f" {linkage.cudart_major}" if linkage.cudart_major is not None else ""
        return f"cudart{major} dynamic"
    if linkage.runtime is RuntimeLinkage.STATIC:
        return "cudart static"
    return "no cudart"


def summary_line(report: FileReport, archs: ArchIndex | None = None) -> str:
    """One line: executable SASS archs | PTX archs | relocatable code | LTO-IR | CUDA runtime linkage.

    Example: ``sm_75 sm_80 sm_86 sm_89 sm_90a sm_120a | PTX compute_120 | cudart 13 dynamic``.
    ``archs``: the :class:`ArchIndex` of ``report.device_code``, when the caller has it already.
    """
    if report.error is not None and not report.device_code and report.host is None:
        return "unreadable"
    if report.linker_script is not None:
        names = " ".join(report.linker_script.inputs) or "nothing"
        return f"GNU ld linker script (link time only, never loaded): names {names}"
    code = report.device_code
    if archs is None:
        archs = ArchIndex(code)
    parts = _arch_parts(code, archs)
    phrase = linkage_phrase(report)
    if phrase is not None:
        parts.append(phrase)
    return " | ".join(parts)


def wheel_summary_line(wheel: WheelReport) -> str:
    """The arch summary of a whole wheel (or program): which of its members carry device code, and every
    SASS and PTX arch across them, in the order of :func:`summary_line`.

    Example: ``device code in 3 of 65 files: sm_50 sm_52 ... sm_120 | PTX compute_100``.
    """
    carriers = [f for f in wheel.files if f.device_code]
    if not carriers:
        return f"no device code in {words.count(len(wheel.files), 'file')}"
    code = [d for f in carriers for d in f.device_code]
    parts = _arch_parts(code, ArchIndex(code))
    files = words.count(len(wheel.files), "file")
    return f"device code in {len(carriers):,} of {files}: " + " | ".join(parts)


def _arch_parts(code: Sequence[DeviceCode], archs: ArchIndex) -> list[str]:
    """SASS archs | PTX archs | relocatable | LTO-IR | unknown entries, of ``code`` (``no device code`` when
    empty)."""
    parts = []
    sass = archs.names(DeviceCodeKind.SASS, relocatable=False)
    ptx = archs.names(DeviceCodeKind.PTX, relocatable=False)
    if code:
        parts.append(" ".join(sass) if sass else "no SASS")
        parts.append("PTX " + " ".join(ptx) if ptx else "no PTX")
        relocatable = archs.names(DeviceCodeKind.SASS, relocatable=True) + archs.names(
            DeviceCodeKind.PTX, relocatable=True
        )
        if relocatable:
            parts.append("relocatable " + " ".join(relocatable))
        lto = archs.names(DeviceCodeKind.LTOIR)
        if lto:
            parts.append("LTO-IR " + " ".join(lto))
        unknown = sum(1 for d in code if d.kind is DeviceCodeKind.UNKNOWN)
        if unknown:
            parts.append(f"{words.count(unknown, 'entry')} of unknown kind")
    else:
        parts.append("no device code")
    return parts


#: Itanium (GCC, Clang) demanglers tried in order: LLVM's also reads Rust names; binutils' the classic one.
DEMANGLERS = ("llvm-cxxfilt", "c++filt")
#: MSVC (``?name@@...``) demanglers tried in order.
MSVC_DEMANGLERS = ("llvm-undname", "undname")


def _run_filter(tools: tuple[str, ...], text: str) -> str | None:
    """stdout of the first of ``tools`` found on PATH given ``text`` on stdin (None when none ran)."""
    import subprocess  # only when a demangler runs: inspect of a library does not import it otherwise

    for tool in tools:
        exe = shutil.which(tool)
        if exe is None:
            continue
        try:
            done = subprocess.run([exe], input=text, capture_output=True, text=True, timeout=60, check=False)
        except (OSError, subprocess.SubprocessError):
            continue
        return done.stdout
    return None


def _demangle_itanium(names: list[str]) -> list[str]:
    out = _run_filter(DEMANGLERS, "\n".join(names) + "\n")
    lines = out.splitlines() if out is not None else []
    return lines if len(lines) == len(names) else list(names)


def _demangle_msvc(names: list[str]) -> list[str]:
    """llvm-undname echoes each input line, then the demangled name and a blank line (or only a blank line
    when it cannot demangle it)."""
    out = _run_filter(MSVC_DEMANGLERS, "\n".join(names) + "\n")
    if out is None:
        return list(names)
    lines = out.splitlines()
    result: list[str] = []
    i = 0
    for name in names:
        if i >= len(lines) or lines[i] != name:
            return list(names)  # not the output we know how to read
        i += 1
        if i < len(lines) and lines[i]:
            result.append(lines[i])
            i += 1
        else:
            result.append(name)
        if i < len(lines) and not lines[i]:
            i += 1
    return result


def demangle(names: list[str]) -> list[str]:
    """Demangle C++ names with the demanglers found on PATH (one subprocess per name style).

    Itanium names (``_Z...``) go to llvm-cxxfilt or c++filt, MSVC names (``?...``) to llvm-undname or
    undname. Names no demangler understands, or all names when none is installed, come back unchanged.
    """
    if not names:
        return []
    result = list(names)
    msvc = [i for i, n in enumerate(names) if n.startswith("?")]
    other = [i for i, n in enumerate(names) if not n.startswith("?")]
    for indices, how in ((other, _demangle_itanium), (msvc, _demangle_msvc)):
        if indices:
            for i, text in zip(indices, how([names[i] for i in indices]), strict=True):
                result[i] = text
    return result
