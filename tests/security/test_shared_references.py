"""Shared references: many records pointing at one table or one name, so that reading each record again
costs the whole shared part again (quadratic work from a linear file). Each reader holds a budget on what it
produces and visits in total (``binary/_bounded.py`` ``work_budget``: 4x the input + 1 MiB; the fatbin scan's
:class:`~cudaship.binary.fatbin.EntryBudget`); the tests count the work, never time it.
"""

from __future__ import annotations

import struct

import pytest

from cudaship.binary import fatbin
from cudaship.binary._bounded import work_budget
from cudaship.binary.devicescan import scan_containers
from cudaship.binary.elf import read_elf
from cudaship.binary.pe import read_pe
from cudaship.errors import BinaryFormatError
from cudaship.inspection.dispatch import inspect_buffer
from tests.work import count_reads


def _pe_sharing_one_lookup_table(descriptors: int, thunks: int) -> bytes:
    """A PE32+ DLL whose import directory has ``descriptors`` entries, all naming the one lookup table of
    ``thunks`` entries."""
    section_rva, section_off = 0x1000, 0x200
    desc_size = 20 * (descriptors + 1)
    ilt_rva = section_rva + desc_size
    dll_rva = ilt_rva + 8 * (thunks + 1)
    hint_rva = dll_rva + 8
    body = bytearray()
    for _ in range(descriptors):
        body += struct.pack("<IIIII", ilt_rva, 0, 0, dll_rva, ilt_rva)
    body += bytes(20)
    body += struct.pack("<Q", hint_rva) * thunks + bytes(8)
    body += b"a.dll\0\0\0" + b"\0\0f\0"
    body += bytes(-len(body) % 0x200)
    header = bytearray(section_off)
    header[0:2] = b"MZ"
    struct.pack_into("<I", header, 0x3C, 0x40)
    header[0x40:0x44] = b"PE\0\0"
    struct.pack_into("<HHIIIHH", header, 0x44, 0x8664, 1, 0, 0, 0, 240, 0x2022)
    opt = 0x58
    struct.pack_into("<H", header, opt, 0x20B)
    struct.pack_into("<Q", header, opt + 24, 0x180000000)
    struct.pack_into("<I", header, opt + 60, section_off)
    struct.pack_into("<I", header, opt + 108, 16)
    struct.pack_into("<II", header, opt + 112 + 8, section_rva, desc_size)  # import directory
    table = opt + 240
    struct.pack_into(
        "<8sIIIIIIHHI",
        header,
        table,
        b".rdata",
        len(body),
        section_rva,
        len(body),
        section_off,
        0,
        0,
        0,
        0,
        0x40000040,
    )
    return bytes(header + body)


def _elf_sharing_one_name(symbols: int, name_length: int) -> bytes:
    """An ELF64 shared object whose ``symbols`` dynamic symbols all name the one string of ``name_length``."""
    dynstr = b"\0" + b"A" * name_length + b"\0"
    shstr = b"\0.dynstr\0.dynsym\0.shstrtab\0"
    sym = struct.pack("<IBBHQQ", 1, 0x12, 0, 1, 0x1000, 0)
    dynsym = bytes(24) + sym * symbols
    off_dynstr = 64
    off_dynsym = off_dynstr + len(dynstr) + (-(off_dynstr + len(dynstr)) % 8)
    off_shstr = off_dynsym + len(dynsym)
    off_sh = off_shstr + len(shstr) + (-(off_shstr + len(shstr)) % 8)
    out = bytearray(off_sh + 4 * 64)
    out[0:16] = b"\x7fELF\x02\x01\x01" + bytes(9)
    struct.pack_into("<HHIQQQIHHHHHH", out, 16, 3, 62, 1, 0, 0, off_sh, 0, 64, 0, 0, 64, 4, 3)
    out[off_dynstr : off_dynstr + len(dynstr)] = dynstr
    out[off_dynsym : off_dynsym + len(dynsym)] = dynsym
    out[off_shstr : off_shstr + len(shstr)] = shstr
    shdr = struct.Struct("<IIQQQQIIQQ")
    shdr.pack_into(out, off_sh + 64, 1, 3, 2, 0, off_dynstr, len(dynstr), 0, 0, 1, 0)
    shdr.pack_into(out, off_sh + 128, 9, 11, 2, 0, off_dynsym, len(dynsym), 1, 1, 8, 24)
    shdr.pack_into(out, off_sh + 192, 17, 3, 0, 0, off_shstr, len(shstr), 0, 0, 1, 0)
    return bytes(out)


def _fatbin_chain(entries: int) -> bytes:
    """Containers nested at every entry of one long chain that ends in garbage: each candidate container's
    entries are the rest of the one chain, and each is walked to the garbage and rejected."""
    entry = struct.Struct("<HHIQIIHHIIIQQQ")
    total = 80 * (entries + 1) + 16
    out = bytearray(total)
    for k in range(entries):
        at = 80 * k
        struct.pack_into("<IHHQ", out, at, fatbin.CONTAINER_MAGIC, 1, 16, total - at - 16)
        entry.pack_into(out, at + 16, 2, fatbin.ENTRY_VERSION, 80, 0, 0, 0, 0, 0, 90, 0, 0, 0, 0, 0)
    # the garbage at the end of the chain: an entry header of kind 0 (not all zeros, which is padding)
    entry.pack_into(out, 80 * entries + 16, 0, fatbin.ENTRY_VERSION, 80, 0, 0, 0, 0, 0, 90, 0, 0, 0, 0, 0)
    return bytes(out)


def test_pe_import_descriptors_sharing_one_lookup_table(monkeypatch: pytest.MonkeyPatch) -> None:
    data = _pe_sharing_one_lookup_table(descriptors=3000, thunks=3000)  # 9 million thunks to walk
    read_pe(_pe_sharing_one_lookup_table(descriptors=3, thunks=3))  # the same shape, small, reads fine
    reads = count_reads(monkeypatch)
    with pytest.raises(BinaryFormatError, match="sharing one name or table"):
        read_pe(data)
    assert reads[0] <= work_budget(len(data)) // 8 + 1000, reads[0]


def test_elf_symbols_sharing_one_long_name(monkeypatch: pytest.MonkeyPatch) -> None:
    data = _elf_sharing_one_name(symbols=20_000, name_length=60_000)  # 1.2 GB of names from 540 KB
    small = read_elf(_elf_sharing_one_name(symbols=3, name_length=10))
    assert small.exports == ("A" * 10,)
    with pytest.raises(BinaryFormatError, match="sharing one name or table"):
        read_elf(data)
    report = inspect_buffer(data, "shared.so")
    assert report.error is not None and "sharing one name" in report.error


def test_fatbin_containers_sharing_one_chain(monkeypatch: pytest.MonkeyPatch) -> None:
    data = _fatbin_chain(20_000)  # 200 million entry headers if each candidate walked the chain
    small = scan_containers(_fatbin_chain(10))
    assert small.containers == () and len(small.rejected) == 10  # every candidate rejected, as expected
    reads = count_reads(monkeypatch)
    with pytest.raises(BinaryFormatError, match="sharing one chain"):
        scan_containers(data)
    assert reads[0] <= fatbin.EntryBudget(len(data)).limit + 2 * 20_000, reads[0]
    report = inspect_buffer(data, "chain.fatbin")
    assert report.error is not None and "\n" not in report.error


def test_real_sized_budget_is_far_from_real_files() -> None:
    """The budget is 4x the input: a reader that reads each name and entry once stays under 1x."""
    assert work_budget(1000) == 4000 + (1 << 20)
