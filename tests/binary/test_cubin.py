"""Cubins (EM_CUDA ELF): standalone ones from ``nvcc -cubin`` and those inside fatbin entries."""

from __future__ import annotations

import re
import struct
from collections.abc import Callable
from pathlib import Path

import pytest

from cudaship.binary.cubin import (
    COMPAT_ARCH_SPECIFIC,
    cubin_is_relocatable,
    entry_details,
    is_cubin,
    parse_compat,
    read_cubin,
    sm_from_flags,
)
from cudaship.binary.devicescan import find_containers
from cudaship.binary.fatbin import entry_payload
from cudaship.errors import BinaryFormatError
from cudaship.records.binary import DeviceCodeKind
from tests.fixtures.nvcc import BUILDS, NvccBuild, builds_of_kind, elf_sections, extract_members

Build = Callable[[str], Path]
E_SHOFF, E_FLAGS, E_SHENTSIZE, E_SHNUM, E_SHSTRNDX = 0x28, 0x30, 0x3A, 0x3C, 0x3E


def arch_parts(arch: str) -> tuple[int, str]:
    match = re.fullmatch(r"sm_(\d+)([af]?)", arch)
    assert match, arch
    return int(match.group(1)), match.group(2)


@pytest.mark.parametrize("build", builds_of_kind("cubin"), ids=lambda b: b.name)
def test_standalone_cubin(nvcc_build: Build, nvcc_version: str, build: NvccBuild) -> None:
    data = nvcc_build(build.name).read_bytes()
    (arch,) = build.sass
    sm, variant = arch_parts(arch)
    info = read_cubin(data)
    assert (info.sm, info.variant) == (sm, variant)
    assert info.virtual_sm == sm
    assert info.toolkit_version == nvcc_version
    assert info.tool == "ptxas"
    assert info.command_line is not None and f"sm_{sm}{variant}" in info.command_line
    assert set(info.kernels) == set(build.kernels)
    assert sm_from_flags(info.abi_version, info.e_flags) == sm
    assert cubin_is_relocatable(data) is build.relocatable


def test_e_flags_do_not_carry_the_variant(nvcc_build: Build) -> None:
    """sm_100f, sm_100a and sm_100 cubins share e_flags: the variant lives elsewhere (docs/formats.md)."""
    infos = {
        e.arch: read_cubin(entry_payload(data, e))
        for name in ("arch_specific", "family_specific", "blackwell")
        for data in [nvcc_build(name).read_bytes()]
        for c in find_containers(data)
        for e in c.entries
        if e.kind is DeviceCodeKind.SASS and e.sm == 100
    }
    assert {"sm_100", "sm_100a", "sm_100f"} <= set(infos)
    assert len({infos[a].e_flags for a in ("sm_100", "sm_100a", "sm_100f")}) == 1
    assert [infos[a].variant for a in ("sm_100", "sm_100a", "sm_100f")] == ["", "a", "f"]


def _section_span(data: bytes, wanted: str) -> tuple[int, int]:
    shoff = struct.unpack_from("<Q", data, E_SHOFF)[0]
    shentsize, shnum, shstrndx = struct.unpack_from("<HHH", data, E_SHENTSIZE)
    str_off = struct.unpack_from("<Q", data, shoff + shstrndx * shentsize + 24)[0]
    for i in range(shnum):
        base = shoff + i * shentsize
        name_off = struct.unpack_from("<I", data, base)[0]
        name = data[str_off + name_off :].split(b"\0", 1)[0].decode()
        if name == wanted:
            offset, size = struct.unpack_from("<QQ", data, base + 24)
            return offset, size
    raise AssertionError(f"no section {wanted}")


def test_a_comes_from_nv_compat(nvcc_build: Build) -> None:
    data = bytearray(nvcc_build("cubin_sm90a").read_bytes())
    offset, size = _section_span(bytes(data), ".nv.compat")
    assert parse_compat(bytes(data[offset : offset + size]))[COMPAT_ARCH_SPECIFIC] == 1
    # Clear the attribute and blank the command line: nothing says 'a' any more.
    for pos in range(offset, offset + size, 4):
        if data[pos] == 2 and data[pos + 1] == COMPAT_ARCH_SPECIFIC:
            data[pos + 2] = 0
    tk_offset, tk_size = _section_span(bytes(data), ".note.nv.tkinfo")
    data[tk_offset : tk_offset + tk_size] = bytes(data[tk_offset : tk_offset + tk_size]).replace(
        b"sm_90a", b"sm_90 "
    )
    assert read_cubin(bytes(data)).variant == ""


def test_f_comes_from_the_command_line(nvcc_build: Build) -> None:
    data = nvcc_build("cubin_sm100f").read_bytes()
    assert read_cubin(data).variant == "f"
    blanked = data.replace(b"-arch sm_100f", b"-arch sm_100 ")
    assert blanked != data
    assert read_cubin(blanked).variant == ""


@pytest.mark.parametrize("build", builds_of_kind("shared"), ids=lambda b: b.name)
def test_entry_details_reads_every_sass_entry(nvcc_build: Build, nvcc_version: str, build: NvccBuild) -> None:
    path = nvcc_build(build.name)
    data = path.read_bytes()
    entries = [e for c in find_containers(data, elf_sections(path)) for e in c.entries]
    kernels_seen: set[str] = set()
    for entry in entries:
        detailed = entry_details(data, entry)
        assert detailed.arch == entry.arch and detailed.offset == entry.offset
        if entry.kind is DeviceCodeKind.SASS:
            assert detailed.toolkit_version == nvcc_version
            info = read_cubin(entry_payload(data, entry))
            assert (info.sm, info.variant) == (entry.sm, entry.variant)
            kernels_seen.update(info.kernels)
    assert kernels_seen == (set(build.kernels) if build.sass else set())


def test_device_functions_are_not_kernels(nvcc_build: Build) -> None:
    """With -rdc=true a __noinline__ device function gets its own .text section; only entries are kernels."""
    spec = BUILDS["cubin_device_function"]
    data = nvcc_build(spec.name).read_bytes()
    assert read_cubin(data).kernels == spec.kernels
    assert b".text._Z14cudaship_twicef" in data


def test_no_kernels_build_has_device_code_without_kernels(nvcc_build: Build) -> None:
    spec = BUILDS["no_kernels"]
    data = nvcc_build(spec.name).read_bytes()
    entries = [e for c in find_containers(data) for e in c.entries]
    assert {e.arch for e in entries} == spec.sass
    assert all(read_cubin(entry_payload(data, e)).kernels == () for e in entries)


@pytest.mark.network
@pytest.mark.parametrize("cuda", ["cuda118", "cuda121", "cuda124", "cuda126"], ids=str)
def test_cuda11_12_cubins_use_abi_version_7(
    bitsandbytes_linux_wheel: Path, tmp_path: Path, cuda: str
) -> None:
    """CUDA 11/12 cubins: SM in the low byte of e_flags, toolkit in e_version, no tkinfo note."""
    (lib,) = extract_members(bitsandbytes_linux_wheel, f"_{cuda}.so", tmp_path)
    data = lib.read_bytes()
    release = f"{cuda[4:-1]}.{cuda[-1]}"  # cuda124 → 12.4, the toolkit named in the file name
    entries = [e for c in find_containers(data) for e in c.entries if e.kind is DeviceCodeKind.SASS]
    assert len({e.sm for e in entries}) > 3
    for entry in entries:
        info = read_cubin(entry_payload(data, entry))
        assert info.abi_version == 7
        assert info.e_flags & 0xFF == entry.sm == info.sm
        assert info.command_line is None
        assert info.toolkit_version == release
        assert entry_details(data, entry).toolkit_version == release


@pytest.mark.network
def test_cuda128_mixes_abi_versions(bitsandbytes_linux_wheel: Path, tmp_path: Path) -> None:
    """CUDA 12.8 writes ABI version 8 (with tkinfo) for sm_100 and later, version 7 below."""
    (lib,) = extract_members(bitsandbytes_linux_wheel, "_cuda128.so", tmp_path)
    data = lib.read_bytes()
    for entry in (e for c in find_containers(data) for e in c.entries if e.kind is DeviceCodeKind.SASS):
        info = read_cubin(entry_payload(data, entry))
        assert info.abi_version == (8 if entry.sm >= 100 else 7)
        assert info.toolkit_version == "12.8"
        assert (info.tool == "ptxas" or info.tool == "nvlink") if info.abi_version == 8 else info.tool is None


# --- damage ---------------------------------------------------------------------------------


@pytest.fixture(scope="module")
def cubin(nvcc_build: Build) -> bytes:
    return nvcc_build("cubin_sm90a").read_bytes()


@pytest.mark.parametrize(
    ("where", "fmt", "value", "message"),
    [
        pytest.param(0x12, "<H", 62, "not EM_CUDA", id="x86-64-machine"),
        pytest.param(4, "<B", 3, "neither 32- nor 64-bit", id="bad-class"),
        pytest.param(5, "<B", 2, "not little-endian", id="big-endian"),
        pytest.param(E_SHOFF, "<Q", 1 << 62, "past the end", id="shoff-huge"),
        pytest.param(E_SHNUM, "<H", 0xFFF0, "runs past the end", id="shnum-huge"),
        pytest.param(E_SHSTRNDX, "<H", 0x7FFF, "out of range", id="shstrndx-out-of-range"),
        pytest.param(E_SHENTSIZE, "<H", 8, "too small", id="shentsize-small"),
        pytest.param(E_FLAGS, "<I", 0, "name no SM", id="flags-zero"),
    ],
)
def test_bad_elf_header(cubin: bytes, where: int, fmt: str, value: int, message: str) -> None:
    damaged = bytearray(cubin)
    struct.pack_into(fmt, damaged, where, value)
    with pytest.raises(BinaryFormatError, match=message):
        read_cubin(bytes(damaged))


def test_not_elf(cubin: bytes) -> None:
    assert not is_cubin(b"\0" * 64)
    with pytest.raises(BinaryFormatError, match="bad magic"):
        read_cubin(b"\0" * 64)
    with pytest.raises(BinaryFormatError, match="too short"):
        read_cubin(cubin[:10])


def test_every_truncation_is_clean(cubin: bytes) -> None:
    for cut in range(0, len(cubin), 16):
        try:
            read_cubin(cubin[:cut])
        except BinaryFormatError:
            continue


def test_every_header_byte_mutation_is_clean(cubin: bytes) -> None:
    shoff = struct.unpack_from("<Q", cubin, E_SHOFF)[0]
    spots = list(range(64)) + list(range(shoff, len(cubin)))
    for spot in spots:
        damaged = bytearray(cubin)
        damaged[spot] ^= 0xFF
        try:
            read_cubin(bytes(damaged))
        except BinaryFormatError:
            continue


def test_entry_whose_payload_is_not_its_cubin(nvcc_build: Build) -> None:
    """Swap the SM in an entry header: details notice that the cubin inside disagrees."""
    path = nvcc_build("multi_arch")
    data = bytearray(path.read_bytes())
    entry = next(
        e
        for c in find_containers(bytes(data))
        for e in c.entries
        if e.kind is DeviceCodeKind.SASS and e.sm == 80
    )
    struct.pack_into("<I", data, entry.offset + 28, 86)
    forged = next(e for c in find_containers(bytes(data)) for e in c.entries if e.offset == entry.offset)
    with pytest.raises(BinaryFormatError, match="holds a cubin for sm_80, header says sm_86"):
        entry_details(bytes(data), forged)
