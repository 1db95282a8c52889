"""DT_NEEDED and DT_RPATH/DT_RUNPATH edits in place, when the new strings fit in the existing ``.dynstr``
(issue 31, class 6): no byte moves, the file keeps its size, and patchelf's second copy of the string table
(10.9 MB on a torch 1.x library) is not written.

The strings an edit frees are the old names it replaces (auditwheel's ``libcudart-96c42e41.so.13``, the old
search path ``$ORIGIN/../cudemo.libs``), each only when nothing else still names any of its bytes: another
dynamic entry, a symbol, a version need or definition (linkers share a string's tail between names). A new
string is placed where the table already holds it whole (the library's own name is often still there from
before auditwheel renamed it), else in the freed bytes (best fit, longest first); the rest of the freed
bytes are zeroed. The dynamic entries keep their order; one removed (``--drop-unused-cuda``, a search path
dropped) leaves a DT_NULL at the end, and a search path where there was none takes a spare DT_NULL slot.
A version need naming a renamed library is renamed with it, as patchelf does.

:func:`patches` says what to write, or why it does not fit (then :mod:`.elfedit` runs patchelf). Every offset
comes from :func:`cudaship.binary.elf.dynamic_strings`, which checks it against the file, and every write is
checked again against the table and the dynamic section it belongs to.
"""

from __future__ import annotations

import bisect
import mmap
import os
import struct
from dataclasses import dataclass

from cudaship.binary.elf import (
    DT_NEEDED,
    DT_NULL,
    DT_RPATH,
    DT_RUNPATH,
    STRING_TAGS,
    DynamicStrings,
    dynamic_strings,
)
from cudaship.errors import BinaryFormatError
from cudaship.records.buffer import Buffer

#: The most matches of a new name looked at when searching the table for it whole (a bound on the work).
MAX_MATCHES = 1000


@dataclass(frozen=True)
class Patches:
    """The writes of an edit in place: (file offset, bytes), sorted, none overlapping."""

    writes: tuple[tuple[int, bytes], ...]
    freed: int  #: bytes of the string table no longer named by anything (zeroed or reused)


class DoesNotFit(Exception):
    """The edit cannot be made in place; the message says why."""


def patches(
    buf: Buffer,
    replace_needed: tuple[tuple[str, str], ...],
    runpath: tuple[str, ...] | None,
    *,
    rpath: bool = False,
    remove_needed: tuple[str, ...] = (),
) -> Patches:
    """The writes that give ``buf`` (an ELF file) the edits :func:`cudaship.repair.elfedit.edit` makes, in
    place. Raises :class:`DoesNotFit` (why) when they cannot be made without a new string table or a new
    dynamic section, and BinaryFormatError for a file the reader refuses."""
    ds = dynamic_strings(buf)
    if ds.unsafe:
        raise DoesNotFit(ds.unsafe)
    table = bytes(buf[ds.strtab_offset : ds.strtab_offset + ds.strtab_size])

    def name(offset: int) -> bytes:
        end = table.find(b"\0", offset) if 0 <= offset < len(table) else -1
        if end < 0:
            raise BinaryFormatError(f"ELF: dynamic string {offset:#x} is outside its table or unterminated")
        return table[offset:end]

    wanted = {old.encode(): new.encode() for old, new in replace_needed}
    dropping = {n.encode() for n in remove_needed}
    #: the new entries: (tag, value) kept, or (tag, new string) to place
    out: list[tuple[int, int | bytes]] = []
    candidates: list[tuple[int, int]] = []  # byte ranges [start, end) of strings no longer named by the edit
    kept: list[int] = []  # offsets still named by a dynamic entry
    found: set[bytes] = set()
    search = [i for i, (tag, _) in enumerate(ds.entries) if tag in (DT_RPATH, DT_RUNPATH)]
    if runpath is not None and len(search) > 1:
        raise DoesNotFit("both DT_RPATH and DT_RUNPATH")
    new_path = ":".join(runpath).encode() if runpath else b""
    for index, (tag, value) in enumerate(ds.entries):
        if tag == DT_NEEDED and (text := name(value)) in wanted:
            found.add(text)
            candidates.append((value, value + len(text) + 1))
            out.append((tag, wanted[text]))
        elif tag == DT_NEEDED and (text := name(value)) in dropping:
            found.add(text)
            candidates.append((value, value + len(text) + 1))
        elif runpath is not None and index in search:
            candidates.append((value, value + len(name(value)) + 1))
            if new_path:
                out.append((DT_RPATH if rpath else DT_RUNPATH, new_path))
        else:
            if tag in STRING_TAGS:
                kept.append(value)
            out.append((tag, value))
    missing = (set(wanted) | dropping) - found
    if missing:
        raise DoesNotFit(f"no DT_NEEDED {sorted(missing)[0].decode(errors='replace')}")
    if runpath is not None and new_path and not search:
        out.append((DT_RPATH if rpath else DT_RUNPATH, new_path))
    if len(out) + 1 > ds.dynamic_slots:
        raise DoesNotFit("no spare slot in the dynamic section for a new entry")

    retarget: list[tuple[int, bytes]] = []  # (vn_file field offset, new name)
    for field, value in ds.version_files:
        text = name(value)
        if text in wanted:
            candidates.append((value, value + len(text) + 1))
            retarget.append((field, wanted[text]))
        else:
            kept.append(value)
    kept += ds.version_names

    freed = _free(table, candidates, sorted(kept), ds.symbol_names)
    strings = sorted({s for _, s in out if isinstance(s, bytes)} | {s for _, s in retarget})
    where = _place(table, strings, freed)

    fmt = struct.Struct(ds.order + ("qQ" if ds.bits == 64 else "iI"))
    dyn = bytearray()
    for tag, item in out:
        dyn += fmt.pack(tag, where[item] if isinstance(item, bytes) else item)
    dyn += fmt.pack(DT_NULL, 0) * (ds.dynamic_slots - len(out))
    word = struct.Struct(ds.order + "I")
    writes: dict[int, bytes] = {}
    for start, end in freed:  # each freed run: zeros, with the new strings placed in it
        run = bytearray(end - start)
        for text, at in where.items():
            if start <= at < end:
                run[at - start : at - start + len(text) + 1] = text + b"\0"
        writes[ds.strtab_offset + start] = bytes(run)
    for field, text in retarget:
        writes[field] = word.pack(where[text])
    original = bytes(buf[ds.dynamic_offset : ds.dynamic_offset + len(dyn)])
    if dyn != original:
        writes[ds.dynamic_offset] = bytes(dyn)
    return Patches(_checked(writes, ds, len(dyn), len(buf)), _size(freed))


def _size(ranges: list[tuple[int, int]]) -> int:
    return sum(end - start for start, end in ranges)


def _free(
    table: bytes, candidates: list[tuple[int, int]], kept: list[int], symbols: tuple[int, ...]
) -> list[tuple[int, int]]:
    """The candidate ranges nothing else names, merged where they touch. A name at ``s`` covers the bytes
    from ``s`` to its NUL, so it overlaps ``[start, end)`` exactly when it starts at or after the first byte
    of the whole string holding ``start`` (the previous NUL + 1) and before ``end``."""
    free: list[tuple[int, int]] = []
    for start, end in sorted(set(candidates)):
        head = table.rfind(b"\0", 0, start) + 1
        if _any_in(kept, head, end) or _any_in(symbols, head, end):
            continue
        if free and free[-1][1] >= start:
            free[-1] = (free[-1][0], max(free[-1][1], end))
        else:
            free.append((start, end))
    return free


def _any_in(offsets: tuple[int, ...] | list[int], low: int, high: int) -> bool:
    """Whether the sorted ``offsets`` hold one in ``[low, high)``."""
    at = bisect.bisect_left(offsets, low)
    return at < len(offsets) and offsets[at] < high


def _place(table: bytes, strings: list[bytes], freed: list[tuple[int, int]]) -> dict[bytes, int]:
    """An offset for each new string: where the table holds it whole outside the freed bytes, else in the
    freed bytes (longest first, each in the smallest run it fits, the lowest then). Raises DoesNotFit."""
    where: dict[bytes, int] = {}
    rest: list[bytes] = []
    for text in strings:
        at = _existing(table, text, freed)
        if at is None:
            rest.append(text)
        else:
            where[text] = at
    runs = [list(r) for r in freed]
    for text in sorted(rest, key=lambda t: (-len(t), t)):
        need = len(text) + 1
        fits = [r for r in runs if r[1] - r[0] >= need]
        if not fits:
            wants = sum(len(t) + 1 for t in rest)
            raise DoesNotFit(f"the new strings need {wants} bytes; the edit frees {_size(freed)}")
        run = min(fits, key=lambda r: (r[1] - r[0], r[0]))
        where[text] = run[0]
        run[0] += need
    return where


def _existing(table: bytes, text: bytes, freed: list[tuple[int, int]]) -> int | None:
    """An offset where ``text`` stands whole in ``table`` (NUL-terminated, possibly the tail of a longer
    string), none of its bytes freed."""
    at = -1
    for _ in range(MAX_MATCHES):
        at = table.find(text + b"\0", at + 1)
        if at < 0:
            return None
        end = at + len(text) + 1
        if not any(start < end and at < stop for start, stop in freed):
            return at
    return None


def _checked(
    writes: dict[int, bytes], ds: DynamicStrings, dynsize: int, size: int
) -> tuple[tuple[int, bytes], ...]:
    """The writes sorted, each inside the string table, the dynamic section or a ``vn_file`` field, and
    none overlapping another."""
    strtab, strsz, dynamic = ds.strtab_offset, ds.strtab_size, ds.dynamic_offset
    fields = {f for f, _ in ds.version_files}
    out = sorted(writes.items())
    last = 0
    for at, data in out:
        inside = (
            (strtab <= at and at + len(data) <= strtab + strsz)
            or (at == dynamic and len(data) == dynsize)
            or (at in fields and len(data) == 4)
        )
        if not inside or at < last or at + len(data) > size:
            raise BinaryFormatError(f"ELF: an in-place write at {at:#x} ({len(data)} bytes) is out of bounds")
        last = at + len(data)
    return tuple(out)


def apply(path: os.PathLike[str] | str, edit: Patches) -> None:
    """Write ``edit`` into the file at ``path`` (its size unchanged)."""
    with open(path, "r+b") as f:
        size = os.fstat(f.fileno()).st_size
        if edit.writes and edit.writes[-1][0] + len(edit.writes[-1][1]) > size:
            raise BinaryFormatError("ELF: an in-place write runs past the end of the file")
        with mmap.mmap(f.fileno(), 0) as m:
            for at, data in edit.writes:
                m[at : at + len(data)] = data
            m.flush()


def edit_bytes(
    data: bytes,
    replace_needed: tuple[tuple[str, str], ...],
    runpath: tuple[str, ...] | None,
    *,
    rpath: bool = False,
    remove_needed: tuple[str, ...] = (),
) -> bytes:
    """``data`` with the edits made in place (raises :class:`DoesNotFit`): for tests and small files."""
    edit = patches(data, replace_needed, runpath, rpath=rpath, remove_needed=remove_needed)
    out = bytearray(data)
    for at, chunk in edit.writes:
        out[at : at + len(chunk)] = chunk
    return bytes(out)
