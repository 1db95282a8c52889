"""The hostile inputs the issue names, built by patching real nvcc output: a length field claiming 2^63
bytes, a symbol table of a billion entries, fatbin containers that overlap and point into each other, and a
hundred thousand containers in one file. Each must end in a one-line error or a record, inside the memory
ceiling of fuzz._harness (10x the input + 16 MiB, or 256x for targets that decompress), and with work linear
in the input: counted, never timed (every bounds-checked read, container header and entry header the readers
make is counted, and the count held to :data:`WORK_PER_BYTE` per input byte plus a constant)."""

from __future__ import annotations

import struct
from collections.abc import Callable
from pathlib import Path

import pytest
from elftools.elf.elffile import ELFFile
from fuzz._harness import Finding, load_target, outcome, peak_allocation

from tests.work import count_reads

CONTAINER = struct.Struct("<IHHQ")  # magic, version, header size, size of what follows
MAGIC = 0xBA55ED50


def _section_header(data: bytes, name: str) -> int:
    """File offset of the section header of ``name`` (ELF64 little-endian)."""
    import io

    elf = ELFFile(io.BytesIO(data))
    index = next(i for i, s in enumerate(elf.iter_sections()) if s.name == name)
    return int(elf["e_shoff"]) + index * int(elf["e_shentsize"])


def _patched(data: bytes, offset: int, fmt: str, value: int) -> bytes:
    out = bytearray(data)
    struct.pack_into(fmt, out, offset, value)
    return bytes(out)


def _billion_symbols(so: bytes) -> bytes:
    return _patched(so, _section_header(so, ".dynsym") + 0x20, "<Q", 24 * 10**9)


def _symbol_entry_size_zero(so: bytes) -> bytes:
    return _patched(so, _section_header(so, ".dynsym") + 0x38, "<Q", 0)


def _section_table_at_2_63(so: bytes) -> bytes:
    return _patched(so, 0x28, "<Q", 1 << 63)


def _section_count_max(so: bytes) -> bytes:
    return _patched(so, 0x3C, "<H", 0xFFFF)


def _fatbin_size_2_63(fatbin: bytes) -> bytes:
    return _patched(fatbin, 8, "<Q", 1 << 63)


def _entry_payload_2_63(fatbin: bytes) -> bytes:
    return _patched(fatbin, 16 + 8, "<Q", 1 << 63)  # first entry header: kind, version, header size, payload


def _overlapping_containers(fatbin: bytes) -> bytes:
    """64 Ki container headers, each claiming everything after it: every container holds all the others."""
    n = 1 << 16
    out = bytearray()
    for i in range(n):
        out += CONTAINER.pack(MAGIC, 1, 16, (n - i - 1) * 16)
    return bytes(out)


def _containers_in_a_payload(fatbin: bytes) -> bytes:
    """The real fatbin with a copy of itself written into its first entry's payload, again and again."""
    out = bytearray(fatbin)
    header_size = struct.unpack_from("<I", fatbin, 16 + 4)[0]
    start = 16 + header_size
    chunk = fatbin[: min(len(fatbin), 4096)]
    for at in range(start, len(out) - len(chunk), len(chunk)):
        out[at : at + len(chunk)] = chunk
    return bytes(out)


def _many_empty_containers(fatbin: bytes) -> bytes:
    """A hundred thousand empty containers back to back (1.6 MB): a record each, in linear time."""
    return CONTAINER.pack(MAGIC, 1, 16, 0) * 100_000


CASES: dict[str, tuple[str, str, Callable[[bytes], bytes]]] = {
    "elf-billion-symbols": ("elf", "cudart_shared", _billion_symbols),
    "elf-symbol-entry-size-0": ("elf", "cudart_shared", _symbol_entry_size_zero),
    "elf-section-table-at-2^63": ("elf", "cudart_shared", _section_table_at_2_63),
    "elf-65535-sections": ("elf", "cudart_shared", _section_count_max),
    "inspect-billion-symbols": ("inspect", "cudart_shared", _billion_symbols),
    "fatbin-size-2^63": ("fatbin", "fatbin_mixed", _fatbin_size_2_63),
    "fatbin-entry-payload-2^63": ("fatbin", "fatbin_mixed", _entry_payload_2_63),
    "fatbin-overlapping-containers": ("fatbin", "fatbin_mixed", _overlapping_containers),
    "fatbin-containers-in-a-payload": ("fatbin", "fatbin_mixed", _containers_in_a_payload),
    "fatbin-100k-empty-containers": ("fatbin", "fatbin_mixed", _many_empty_containers),
    "inspect-overlapping-containers": ("inspect", "fatbin_mixed", _overlapping_containers),
}


#: Reads (bounds checks, container headers, entry headers) allowed per byte of input, plus a constant: one
#: per 8-byte aligned position would already be a scan that reads every candidate once.
WORK_PER_BYTE = 1 / 4
WORK_CONSTANT = 100_000


@pytest.mark.parametrize("case", sorted(CASES), ids=sorted(CASES))
def test_hostile_field(case: str, nvcc_build: Callable[[str], Path], monkeypatch: pytest.MonkeyPatch) -> None:
    name, build, make = CASES[case]
    data = make(nvcc_build(build).read_bytes())
    target = load_target(name)
    reads = count_reads(monkeypatch)
    try:
        outcome(target, data)
    except Finding as e:
        pytest.fail(f"{case}: {e}")
    bound = WORK_PER_BYTE * len(data) + WORK_CONSTANT
    assert reads[0] <= bound, f"{case}: {reads[0]} reads for {len(data)} bytes"
    monkeypatch.undo()
    peak = peak_allocation(target, data)
    assert peak <= target.memory.bound(len(data)), f"{case}: peak {peak} bytes for {len(data)} bytes of input"
