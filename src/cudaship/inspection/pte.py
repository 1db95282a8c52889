"""Reading an ExecuTorch program (``.pte``): find the named data blob that holds the compiled library.

Layout (ExecuTorch ``docs/source/pte-file-format.md`` and ``schema/program.fbs``; little-endian throughout):

- ``[0:4]`` u32 offset of the flatbuffer root table; ``[4:8]`` file identifier ``ET`` + two digits (``ET12``);
- optional extended header at 8: ``eh`` + two digits, u32 header size, u64 program (flatbuffer) size, u64
  offset of the first segment (0 when none);
- the flatbuffer ``Program`` table: field 0 ``version`` (u32), 1 ``execution_plan`` ([ExecutionPlan]),
  3 ``backend_delegate_data`` ([BackendDelegateInlineData{data: [ubyte]}]), 4 ``segments``
  ([DataSegment{offset: u64, size: u64}], offsets relative to the extended header's segment base),
  7 ``named_data`` ([NamedData{key: string, segment_index: u32}]);
- ``ExecutionPlan``: field 0 ``name``, 7 ``delegates`` ([BackendDelegate{id: string, processed:
  BackendDelegateDataReference{location: INLINE 0 | SEGMENT 1, index: u32}, compile_specs}]).

The CUDA backend stores the AOTInductor-compiled library as named data (key ``so_blob``, or
``<method>_so_blob`` in later versions); its weights go to a ``.ptd`` file (FlatTensor, identifier ``FT01``).
This reader does not rely on the key: every named data blob and every delegate blob that starts with an ELF or
PE signature is inspected as a library. What was verified: fields 0-6 and the header against the schema and
format document; ``named_data`` (field 7) against the CUDA backend's source that writes it. No real CUDA
``.pte`` could be made in this project's sessions (see docs/program.md); the tests build programs with the
layout above.
"""

from __future__ import annotations

import struct
from typing import TYPE_CHECKING

from cudaship.errors import ProgramError
from cudaship.inspection.dispatch import inspect_buffer
from cudaship.records.buffer import Buffer

if TYPE_CHECKING:
    from cudaship.inspection.program_records import ProgramInfo, ProgramMember

# The program records are imported where a program is read: ``inspect`` asks :func:`is_pte` of every input
# whose name does not say what it is (a library named ``libfoo.so.13``), and the records' import costs 7 ms.

_U16 = struct.Struct("<H")
_U32 = struct.Struct("<I")
_I32 = struct.Struct("<i")
_U64 = struct.Struct("<Q")
_NATIVE_MAGICS = (b"\x7fELF", b"MZ")
#: The most entries of one vector read (a real program has a few hundred values, not millions of delegates).
MAX_VECTOR = 1 << 20


class _Flat:
    """Bounds-checked reads of flatbuffer tables, vectors and strings in one buffer."""

    def __init__(self, buf: Buffer, limit: int) -> None:
        self.view = memoryview(buf).cast("B")
        self.limit = limit  #: end of the flatbuffer region

    def _need(self, pos: int, size: int, what: str) -> None:
        if pos < 0 or pos + size > self.limit:
            raise ProgramError(f"corrupt program: {what} at offset {pos} is outside the flatbuffer")

    def u16(self, pos: int) -> int:
        self._need(pos, 2, "u16")
        return int(_U16.unpack_from(self.view, pos)[0])

    def u32(self, pos: int) -> int:
        self._need(pos, 4, "u32")
        return int(_U32.unpack_from(self.view, pos)[0])

    def u64(self, pos: int) -> int:
        self._need(pos, 8, "u64")
        return int(_U64.unpack_from(self.view, pos)[0])

    def field(self, table: int, index: int) -> int | None:
        """Absolute position of field ``index`` of the table at ``table``, None when absent."""
        self._need(table, 4, "table")
        vtable = table - int(_I32.unpack_from(self.view, table)[0])
        self._need(vtable, 4, "vtable")
        vsize = self.u16(vtable)
        if vsize < 4 or vsize % 2:
            raise ProgramError(f"corrupt program: vtable size {vsize} at offset {vtable}")
        slot = 4 + 2 * index
        if slot + 2 > vsize:
            return None
        off = self.u16(vtable + slot)
        return table + off if off else None

    def ref(self, pos: int) -> int:
        return pos + self.u32(pos)

    def table_field(self, table: int, index: int) -> int | None:
        pos = self.field(table, index)
        return None if pos is None else self.ref(pos)

    def string(self, table: int, index: int) -> str | None:
        pos = self.field(table, index)
        if pos is None:
            return None
        start = self.ref(pos)
        length = self.u32(start)
        self._need(start + 4, length, "string")
        return bytes(self.view[start + 4 : start + 4 + length]).decode("utf-8", "replace")

    def vector(self, table: int, index: int) -> tuple[int, int] | None:
        """(position of the first element, count) of a vector field."""
        pos = self.field(table, index)
        if pos is None:
            return None
        start = self.ref(pos)
        count = self.u32(start)
        if count > MAX_VECTOR:
            raise ProgramError(f"corrupt program: vector of {count} entries at offset {start}")
        return start + 4, count

    def tables(self, table: int, index: int) -> list[int]:
        vec = self.vector(table, index)
        if vec is None:
            return []
        first, count = vec
        self._need(first, 4 * count, "vector")
        return [self.ref(first + 4 * i) for i in range(count)]

    def scalar(self, table: int, index: int, kind: struct.Struct, default: int = 0) -> int:
        pos = self.field(table, index)
        if pos is None:
            return default
        self._need(pos, kind.size, "scalar")
        return int(kind.unpack_from(self.view, pos)[0])


def is_pte(head: bytes) -> bool:
    """Whether the first bytes are an ExecuTorch program's (``ET`` + two digits at offset 4)."""
    return len(head) >= 8 and head[4:6] == b"ET" and head[6:8].isdigit()


def read_pte(buf: Buffer, path: str = "<buffer>", *, details: bool = False) -> ProgramInfo:
    """Read an ExecuTorch program in ``buf``; :class:`ProgramError` naming ``path`` when it is not one."""
    try:
        return _read(buf, path, details)
    except ProgramError as e:
        raise e.with_path(path) from None


def _read(buf: Buffer, path: str, details: bool) -> ProgramInfo:
    from cudaship.inspection.program_records import MemberRole, ProgramInfo, ProgramKind

    size = len(buf)
    head = bytes(memoryview(buf)[:32])
    if not is_pte(head):
        raise ProgramError("not an ExecuTorch program: no ET?? identifier at offset 4")
    program_size, segment_base = size, 0
    notes: list[str] = []
    if head[8:10] == b"eh" and head[10:12].isdigit() and len(head) >= 32:
        header_size = _U32.unpack_from(head, 12)[0]
        if header_size < 24:
            raise ProgramError(f"corrupt program: extended header size {header_size}")
        program_size = _U64.unpack_from(head, 16)[0]
        segment_base = _U64.unpack_from(head, 24)[0]
        if program_size > size or segment_base > size:
            raise ProgramError(
                f"truncated program: header says {max(program_size, segment_base)} bytes, file has {size}"
            )
    flat = _Flat(buf, program_size)
    root = flat.ref(0)
    identifier = head[4:8].decode("ascii")
    version = flat.scalar(root, 0, _U32)
    segments: list[tuple[int, int]] = []
    for seg in flat.tables(root, 4):
        segments.append((flat.scalar(seg, 0, _U64), flat.scalar(seg, 1, _U64)))

    def segment_bytes(index: int, label: str) -> memoryview:
        if index >= len(segments):
            raise ProgramError(f"corrupt program: {label} names segment {index} of {len(segments)}")
        offset, length = segments[index]
        start = segment_base + offset
        if start + length > size:
            raise ProgramError(f"truncated program: {label} (segment {index}) ends past the end of the file")
        return memoryview(buf)[start : start + length]

    members: list[ProgramMember] = []
    methods: list[str] = []
    backends: list[str] = []
    inline = flat.tables(root, 3)
    for plan in flat.tables(root, 1):
        method = flat.string(plan, 0) or "?"
        methods.append(method)
        for delegate in flat.tables(plan, 7):
            backend = flat.string(delegate, 0) or "?"
            backends.append(backend)
            ref = flat.table_field(delegate, 1)
            if ref is None:
                continue
            location = flat.scalar(ref, 0, struct.Struct("<b"))
            index = flat.scalar(ref, 1, _U32)
            label = f"{method}/{backend} delegate data"
            if location == 1:
                data = segment_bytes(index, label)
            elif index < len(inline):
                vec = flat.vector(inline[index], 0)
                if vec is None:
                    continue
                first, count = vec
                flat._need(first, count, "delegate data")
                data = flat.view[first : first + count]
            else:
                raise ProgramError(f"corrupt program: {label} names inline blob {index} of {len(inline)}")
            members.append(_member(f"delegate:{method}/{backend}", data, details))
    for entry in flat.tables(root, 7):
        key = flat.string(entry, 0) or "?"
        index = flat.scalar(entry, 1, _U32)
        members.append(_member(f"named:{key}", segment_bytes(index, f"named data {key!r}"), details))
    if not any(m.role is MemberRole.WRAPPER for m in members):
        notes.append("no compiled library in the program's named data or delegate data")
    platform = None
    machine = None
    for m in members:
        if m.report is not None and m.report.host is not None:
            platform = (
                "linux" if m.report.format is not None and m.report.format.value == "elf" else "windows"
            )
            machine = m.report.host.machine.value
            break
    device = "cuda" if any("cuda" in b.lower() or "aoti" in b.lower() for b in backends) else None
    return ProgramInfo(
        path=path,
        kind=ProgramKind.PTE,
        members=tuple(members),
        device=device,
        platform=platform,
        machine=machine,
        models=tuple(methods),
        backends=tuple(dict.fromkeys(backends)),
        metadata=(("file_identifier", identifier), ("schema_version", str(version))),
        notes=tuple(notes),
    )


def _member(name: str, data: memoryview, details: bool) -> ProgramMember:
    from cudaship.inspection.program_records import MemberRole, ProgramMember

    head = bytes(data[:4])
    if any(head.startswith(m) for m in _NATIVE_MAGICS):
        report = inspect_buffer(data, name, details=details)
        return ProgramMember(name, MemberRole.WRAPPER, len(data), report)
    return ProgramMember(
        name, MemberRole.WEIGHTS if name.startswith("named:") else MemberRole.OTHER, len(data)
    )
