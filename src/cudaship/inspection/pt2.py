"""Reading an AOTInductor package (``.pt2``): the wrapper library, the cubins and the metadata JSON.

A ``.pt2`` is a zip. ``torch._inductor.aoti_compile_and_package`` (torch 2.6 to 2.13 seen) writes, under one
archive root (``model/`` or the package's stem):

- ``archive_format`` (``pt2``), ``archive_version``, ``byteorder``, ``.data/version``;
- ``data/aotinductor/<model>/<hash>.wrapper.so`` (the compiled model: host code only, it loads the
  kernels), and for CPU programs sometimes ``<hash>.kernel.so``; torch 2.11's Windows cross
  compile links its PE DLL to the same ``<hash>.wrapper.so`` name (its link command on the H200), so the
  format is read from the content, never the name;
- ``<hash>.cubin``, one per Triton kernel, arch-specific (``sm_90a`` on an H200), no PTX;
- ``<hash>.wrapper_metadata.json`` / ``<hash>.kernel_metadata.json``: ``AOTI_DEVICE_KEY``, ``AOTI_PLATFORM``,
  ``AOTI_MACHINE``, ``AOTI_CPU_ISA``, ``AOTI_COMPUTE_CAPABILITY`` (``"90"``);
- the generated ``wrapper.cpp`` / ``kernel.cpp`` and, for large models, weights under ``data/weights``.

No CUDA toolkit version is recorded in the package: the cubins record the ptxas that made them (Triton's), and
``provenance.json`` (written by ``program export``) records the torch and CUDA train.
"""

from __future__ import annotations

import re

from cudaship.archive.limits import DEFAULT_LIMITS
from cudaship.archive.zip import ZipArchive, ZipMember
from cudaship.errors import ArchiveError, ProgramError
from cudaship.inspection.dispatch import inspect_buffer
from cudaship.inspection.program_records import MemberRole, ProgramInfo, ProgramKind, ProgramMember
from cudaship.loaders import load_json
from cudaship.records.binary import FileFormat
from cudaship.records.buffer import Buffer
from cudaship.records.files import FileReport

#: Largest member read (bytes); a package member beyond it is reported, not read.
MAX_MEMBER_SIZE = DEFAULT_LIMITS.max_member_size
#: Members up to this size are inflated into memory; larger ones go through a temporary file and mmap.
IN_MEMORY_LIMIT = 256 << 20
#: Metadata JSON beyond this size is not parsed.
MAX_METADATA_SIZE = 1 << 20

_NATIVE_EXT = re.compile(r"\.(?:so|dll|pyd|dylib)$", re.IGNORECASE)
_DEVICE_EXT = re.compile(r"\.(?:cubin|fatbin|ptx)$", re.IGNORECASE)
_SOURCE_EXT = re.compile(r"\.(?:cpp|cc|h|hpp|cu|py)$", re.IGNORECASE)


def role_of(name: str) -> MemberRole:
    """Classify a package member by its name."""
    base = name.rsplit("/", 1)[-1]
    if _NATIVE_EXT.search(base):
        return MemberRole.WRAPPER if ".wrapper." in base or base.startswith("wrapper") else MemberRole.LIBRARY
    if _DEVICE_EXT.search(base):
        return MemberRole.CUBIN
    if base.endswith("_metadata.json"):
        return MemberRole.METADATA
    if _SOURCE_EXT.search(base):
        return MemberRole.SOURCE
    if "/data/weights/" in name or "/data/constants/" in name or base.endswith((".bin", ".safetensors")):
        return MemberRole.WEIGHTS
    return MemberRole.OTHER


def read_pt2(buf: Buffer, path: str = "<buffer>", *, details: bool = False) -> ProgramInfo:
    """Read an AOTInductor package held in ``buf``; ``path`` names it in the report and in errors.

    Raises :class:`ProgramError` (naming ``path``) when the buffer is not a zip or holds no AOTInductor model.
    A member that cannot be read becomes a member with an error report and a note, not an exception.
    ``details`` reads the members' device code as ``inspect --details`` does.
    """
    try:
        archive = ZipArchive(buf)
    except ArchiveError as e:
        message = e.message.replace("not a readable zip archive", "not a zip archive", 1)
        raise ProgramError(f"not an AOTInductor package: {message}", path=path) from None
    infos = archive.files()
    names = [i.name for i in infos]
    model_dirs = sorted({m.group(1) for n in names if (m := re.search(r"data/aotinductor/([^/]+)/", n))})
    if not model_dirs:
        raise ProgramError(
            "not an AOTInductor package: no data/aotinductor/<model>/ directory in the zip", path=path
        )
    members: list[ProgramMember] = []
    metadata: dict[str, str] = {}
    notes: list[str] = []
    for info in infos:
        role = role_of(info.name)
        report: FileReport | None = None
        if role in (MemberRole.WRAPPER, MemberRole.LIBRARY, MemberRole.CUBIN):
            report = _inspect_member(archive, info, details)
        elif role is MemberRole.METADATA:
            _read_metadata(archive, info, metadata, notes)
        members.append(ProgramMember(info.name, role, info.size, report))
    for member in members:
        if member.report is not None and member.report.error:
            notes.append(f"{member.name}: {member.report.error}")
    if not any(m.role is MemberRole.WRAPPER for m in members):
        notes.append("no compiled wrapper library in the package (a C++-only package must be built first)")
    capability = metadata.get("AOTI_COMPUTE_CAPABILITY")
    if capability and capability.isdigit() and len(capability) >= 2:
        capability = f"{capability[:-1]}.{capability[-1]}"
    # the wrapper's own format decides: torch 2.11's Windows cross compile records the exporting host's
    # AOTI_PLATFORM ("linux") beside a PE wrapper (seen on the H200, issue 33)
    recorded = metadata.get("AOTI_PLATFORM")
    built = _platform_from_libraries(members)
    platform = built or recorded
    if built and recorded and built != recorded:
        kind = "a PE DLL" if built == "windows" else "ELF"
        notes.append(
            f"AOTI_PLATFORM says {recorded}, but the wrapper is {kind}: "
            f"a program for {built} (a cross compile records the exporting machine's platform)"
        )
    machine = metadata.get("AOTI_MACHINE") or _machine_from_libraries(members)
    return ProgramInfo(
        path=path,
        kind=ProgramKind.PT2,
        members=tuple(sorted(members, key=lambda m: m.name)),  # by path, not the zip's order
        device=metadata.get("AOTI_DEVICE_KEY"),
        platform=platform,
        machine=machine,
        cpu_isa=metadata.get("AOTI_CPU_ISA"),
        compute_capability=capability or None,
        models=tuple(model_dirs),
        metadata=tuple(sorted(metadata.items())),
        notes=tuple(notes),
    )


def _read_metadata(archive: ZipArchive, info: ZipMember, into: dict[str, str], notes: list[str]) -> None:
    if info.size > MAX_METADATA_SIZE:
        notes.append(f"{info.name}: metadata of {info.size} bytes not read")
        return
    try:
        data = load_json(archive.read(info, MAX_METADATA_SIZE), error=ProgramError)
    except ArchiveError as e:
        notes.append(f"{info.name}: unreadable metadata ({e.message.removeprefix(f'member {info.name}: ')})")
        return
    except ProgramError as e:
        notes.append(f"{info.name}: unreadable metadata ({e.message})")
        return
    if not isinstance(data, dict):
        notes.append(f"{info.name}: metadata is not a JSON object")
        return
    for key, value in data.items():
        if isinstance(value, (str, int, float)) and key not in into:
            into[str(key)] = str(value)


def _inspect_member(archive: ZipArchive, info: ZipMember, details: bool) -> FileReport:
    try:
        with archive.buffer(info, memory_limit=IN_MEMORY_LIMIT) as buf:
            return inspect_buffer(buf, info.name, details=details)
    except ArchiveError as e:
        message = e.message.removeprefix(f"member {info.name}: ")
        return FileReport(path=info.name, format=None, size=info.size, error=message)


def _platform_from_libraries(members: list[ProgramMember]) -> str | None:
    """The platform the host libraries are built for (cubins are ELF files too: not host libraries)."""
    for m in members:
        if m.role not in (MemberRole.WRAPPER, MemberRole.LIBRARY):
            continue
        if m.report is not None and m.report.format is FileFormat.ELF:
            return "linux"
        if m.report is not None and m.report.format is FileFormat.PE:
            return "windows"
    return None


def _machine_from_libraries(members: list[ProgramMember]) -> str | None:
    for m in members:
        if m.role in (MemberRole.WRAPPER, MemberRole.LIBRARY) and m.report is not None and m.report.host:
            return m.report.host.machine.value
    return None
