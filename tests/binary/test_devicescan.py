"""Finding every fatbin container in a file, and reading standalone device-code files."""

from __future__ import annotations

import mmap
import os
import random
import shutil
import struct
import subprocess
from collections import Counter
from collections.abc import Callable
from pathlib import Path

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from cudaship.binary.devicescan import (
    RELOCATABLE_SECTIONS,
    detect_device_format,
    find_containers,
    is_device_section,
    is_relocatable_section,
    read_device_file,
    scan_containers,
)
from cudaship.binary.fatbin import CONTAINER_MAGIC_BYTES
from cudaship.binary.pe import read_pe
from cudaship.errors import BinaryFormatError
from cudaship.records.binary import DeviceCodeKind, FatbinContainer, FileFormat, Section
from cudaship.records.buffer import Buffer
from tests.fixtures.nvcc import NvccBuild, builds_of_kind, elf_sections, extract_members, pe_sections
from tests.work import count_reads

Build = Callable[[str], Path]


def arch_sets(containers: tuple[FatbinContainer, ...]) -> tuple[set[str], set[str], set[str]]:
    entries = [e for c in containers for e in c.entries]
    return (
        {e.arch for e in entries if e.kind is DeviceCodeKind.SASS},
        {e.arch for e in entries if e.kind is DeviceCodeKind.PTX},
        {e.arch for e in entries if e.kind is DeviceCodeKind.LTOIR},
    )


def container_bytes(data: bytes, container: FatbinContainer) -> bytes:
    return data[container.offset : container.offset + container.size]


# --- nvcc builds ----------------------------------------------------------------------------------


@pytest.mark.parametrize("build", builds_of_kind("shared"), ids=lambda b: b.name)
def test_library_device_code_matches_gencode(nvcc_build: Build, build: NvccBuild) -> None:
    path = nvcc_build(build.name)
    data = path.read_bytes()
    sections = elf_sections(path)
    result = scan_containers(data, sections)
    assert result.rejected == ()
    sass, ptx, _ = arch_sets(result.containers)
    assert (sass, ptx) == (set(build.sass), set(build.ptx))
    by_name = {s.name: s for s in sections}
    for container in result.containers:
        section = by_name[container.section or ""]
        assert section.offset <= container.offset
        assert container.offset + container.size <= section.offset + section.size
        assert container.relocatable == (container.section == "__nv_relfatbin")
        for entry in container.entries:
            assert (entry.section, entry.relocatable) == (container.section, container.relocatable)
            assert entry.container_offset == container.offset
            assert container.offset < entry.offset < container.offset + container.size
    relocatable = [c for c in result.containers if c.relocatable]
    assert bool(relocatable) == build.relocatable
    if build.relocatable:
        # the relocatable fatbin keeps what was compiled; the device-linked one holds SASS only
        assert arch_sets(tuple(relocatable))[:2] == (set(build.sass), set(build.ptx))
    assert {c.section for c in result.containers} <= {".nv_fatbin", "__nv_relfatbin"}


def test_without_sections_the_same_containers_are_found(nvcc_build: Build) -> None:
    path = nvcc_build("relocatable")
    data = path.read_bytes()
    with_sections = find_containers(data, elf_sections(path))
    bare = find_containers(data)
    assert [(c.offset, c.size, len(c.entries)) for c in bare] == [
        (c.offset, c.size, len(c.entries)) for c in with_sections
    ]
    assert {c.section for c in bare} == {None}
    assert not any(c.relocatable for c in bare)


@pytest.mark.parametrize("kind", ["bytes", "bytearray", "memoryview", "mmap"], ids=str)
def test_every_buffer_type_gives_the_same_answer(nvcc_build: Build, kind: str) -> None:
    path = nvcc_build("multi_arch")
    data = path.read_bytes()
    expected = find_containers(data, elf_sections(path))
    with path.open("rb") as fh:
        mapped = mmap.mmap(fh.fileno(), 0, access=mmap.ACCESS_READ)
        try:
            buf: Buffer = {  # type: ignore[assignment]
                "bytes": data,
                "bytearray": bytearray(data),
                "memoryview": memoryview(data),
                "mmap": mapped,
            }[kind]
            assert find_containers(buf, elf_sections(path)) == expected
        finally:
            mapped.close()


def test_empty_container_of_a_ptx_only_library(nvcc_build: Build) -> None:
    """nvcc's device-link step writes an empty container (fat_size 0) when there is no SASS to link."""
    path = nvcc_build("ptx_only")
    containers = find_containers(path.read_bytes(), elf_sections(path))
    assert [len(c.entries) for c in containers].count(0) == 1
    assert min(c.size for c in containers) == 16


# --- real libraries -------------------------------------------------------------------------------


@pytest.fixture(scope="module")
def bnb_linux(bitsandbytes_linux_wheel: Path, tmp_path_factory: pytest.TempPathFactory) -> dict[str, Path]:
    libs = extract_members(bitsandbytes_linux_wheel, ".so", tmp_path_factory.mktemp("bnb-linux"))
    return {p.stem.removeprefix("libbitsandbytes_"): p for p in libs}


@pytest.fixture(scope="module")
def bnb_windows(
    bitsandbytes_windows_wheel: Path, tmp_path_factory: pytest.TempPathFactory
) -> dict[str, Path]:
    libs = extract_members(bitsandbytes_windows_wheel, ".dll", tmp_path_factory.mktemp("bnb-win"))
    return {p.stem.removeprefix("libbitsandbytes_"): p for p in libs}


CUDA_BUILDS = ["cuda118", "cuda121", "cuda124", "cuda126", "cuda128", "cuda130", "cuda132"]


@pytest.mark.network
@pytest.mark.parametrize("cuda", CUDA_BUILDS, ids=str)
def test_windows_and_linux_builds_carry_the_same_archs(
    bnb_linux: dict[str, Path], bnb_windows: dict[str, Path], cuda: str
) -> None:
    so, dll = bnb_linux[cuda], bnb_windows[cuda]
    linux = scan_containers(so.read_bytes(), elf_sections(so))
    windows = scan_containers(dll.read_bytes(), pe_sections(dll))
    assert linux.rejected == windows.rejected == ()
    assert arch_sets(linux.containers) == arch_sets(windows.containers)
    assert {c.section for c in windows.containers} == {".nv_fatb", "__nv_rel"}
    assert {c.section for c in linux.containers} == {".nv_fatbin", "__nv_relfatbin"}
    for container in windows.containers:
        assert container.relocatable == (container.section == "__nv_rel")
        assert {e.host for e in container.entries} == {"windows"}
    for container in linux.containers:
        assert {e.host for e in container.entries} == {"linux"}
    # relocatable and whole-program code: both kinds present on both platforms, in the same proportion
    count = Counter((c.relocatable, e.kind) for c in linux.containers for e in c.entries)
    assert count == Counter((c.relocatable, e.kind) for c in windows.containers for e in c.entries)


@pytest.mark.network
def test_host_code_without_cuda_has_no_containers(
    bnb_linux: dict[str, Path], bnb_windows: dict[str, Path]
) -> None:
    for path in (bnb_linux["cpu"], bnb_windows["cpu"], bnb_linux["rocm72"]):
        assert scan_containers(path.read_bytes()) == scan_containers(b"")


@pytest.mark.network
def test_section_names_as_cudaship_pe_reader_gives_them(bnb_windows: dict[str, Path]) -> None:
    dll = bnb_windows["cuda130"]
    data = dll.read_bytes()
    via_reader = find_containers(data, read_pe(data).sections)
    assert via_reader == find_containers(data, pe_sections(dll))


MINGW_SOURCE = """
__attribute__((section("__nv_relfatbin"), used, aligned(8))) const unsigned char relocatable_fatbin[] = {%s};
__attribute__((section(".nv_fatbin"), used, aligned(8))) const unsigned char whole_fatbin[] = {%s};
__declspec(dllexport) int cudaship_probe(void) { return relocatable_fatbin[0] + whole_fatbin[0]; }
"""


def test_mingw_dll_keeps_long_section_names(nvcc_build: Build, tmp_path: Path) -> None:
    """mingw-w64's ld keeps long section names (through the COFF string table); MSVC cuts them to 8."""
    gcc = shutil.which("x86_64-w64-mingw32-gcc")
    if gcc is None:
        pytest.skip("x86_64-w64-mingw32-gcc is not installed")
    blob = nvcc_build("fatbin_mixed").read_bytes()
    array = ",".join(str(b) for b in blob)
    (tmp_path / "probe.c").write_text(MINGW_SOURCE % (array, array))
    dll = tmp_path / "probe.dll"
    subprocess.run(
        [gcc, "-shared", "-o", str(dll), str(tmp_path / "probe.c")], check=True, capture_output=True
    )
    data = dll.read_bytes()
    stored = {s.name for s in pe_sections(dll)}
    assert "__nv_relfatbin" not in stored  # pefile shows the "/N" string-table reference
    containers = find_containers(data, read_pe(data).sections)
    assert [(c.section, c.relocatable) for c in containers] == [
        ("__nv_relfatbin", True),
        (".nv_fatbin", False),
    ]
    assert {len(c.entries) for c in containers} == {len(read_device_file(blob).entries)}
    assert set(RELOCATABLE_SECTIONS) == {"__nv_relfatbin", "__nv_rel"}


@pytest.mark.parametrize(
    ("name", "relocatable"),
    [
        pytest.param("__nv_relfatbin", True, id="elf"),
        pytest.param("__nv_rel", True, id="pe-msvc"),
        pytest.param("__NV_CUDA,__nv_relfatbin", True, id="macho"),
        pytest.param(".nv_fatbin", False, id="elf-whole"),
        pytest.param(".nv_fatb", False, id="pe-whole"),
        pytest.param("__NV_CUDA,__nv_fatbin", False, id="macho-whole"),
        pytest.param("/4", False, id="pe-unresolved-long-name"),
        pytest.param(None, False, id="no-section"),
    ],
)
def test_relocatable_section_names(name: str | None, relocatable: bool) -> None:
    assert is_relocatable_section(name) is relocatable


# --- layouts that must not fool the scanner -------------------------------------------------------


@pytest.fixture(scope="module")
def blob(nvcc_build: Build) -> bytes:
    return nvcc_build("fatbin_mixed").read_bytes()


def test_back_to_back_containers_with_padding(blob: bytes) -> None:
    assert len(blob) % 8 == 0
    parts = [b"\0" * 8, blob, blob, b"\0" * 16, blob, b"\0" * 8, blob, b"\0" * 3]
    data = b"".join(parts)
    found = find_containers(data)
    assert [c.offset for c in found] == [8, 8 + len(blob), 24 + 2 * len(blob), 32 + 3 * len(blob)]


def test_unaligned_containers_are_found_but_unaligned_failures_are_quiet(blob: bytes) -> None:
    """Archive members start at even offsets, so a valid container at any offset counts; a failed unaligned
    candidate (typically the magic as an immediate operand in host code) is not reported."""
    assert [c.offset for c in find_containers(b"\0" * 4 + blob)] == [4]
    assert [c.offset for c in find_containers(b"\0" * 2 + blob + b"\0" * 6 + blob)] == [2, 8 + len(blob)]
    noise = b"\x48\x3d" + CONTAINER_MAGIC_BYTES + b"\x75\x10" * 20  # cmp rax, 0xba55ed50; jne ...
    assert scan_containers(noise + b"\0" * 8) == scan_containers(b"")
    aligned_noise = CONTAINER_MAGIC_BYTES + b"\x75\x10" * 20
    assert [r.offset for r in scan_containers(aligned_noise).rejected] == [0]


@pytest.mark.parametrize("build", builds_of_kind("static"), ids=lambda b: b.name)
def test_static_archive(nvcc_build: Build, build: NvccBuild) -> None:
    data = nvcc_build(build.name).read_bytes()
    assert data.startswith(b"!<arch>\n")
    result = scan_containers(data)
    assert result.rejected == ()
    sass, ptx, _ = arch_sets(result.containers)
    assert (sass, ptx) == (set(build.sass), set(build.ptx))


def test_container_swallowing_its_neighbour_is_rejected_then_the_neighbour_found(blob: bytes) -> None:
    data = bytearray(blob + blob)
    struct.pack_into("<Q", data, 8, len(blob) - 16 + 64)  # first now claims 64 bytes of the second
    result = scan_containers(bytes(data))
    assert [c.offset for c in result.containers] == [len(blob)]
    assert [r.offset for r in result.rejected] == [0]
    assert "fatbin entry at" in result.rejected[0].reason


def test_container_running_past_its_section_is_rejected(blob: bytes) -> None:
    data = b"\0" * 64 + blob + b"\0" * 64
    inside = Section(".nv_fatbin", 64, len(blob))
    short = Section(".nv_fatbin", 64, len(blob) - 8)
    assert len(find_containers(data, [inside])) == 1
    result = scan_containers(data, [short])
    assert result.containers == ()
    assert "remain" in result.rejected[0].reason


@pytest.mark.parametrize("size", [1 << 63, (1 << 64) - 1, 1 << 40], ids=["2^63", "2^64-1", "2^40"])
def test_huge_sizes_are_rejected_without_allocating(
    blob: bytes, size: int, monkeypatch: pytest.MonkeyPatch
) -> None:
    data = bytearray(blob)
    struct.pack_into("<Q", data, 8, size)
    reads = count_reads(monkeypatch)
    result = scan_containers(bytes(data))
    assert result.containers == ()
    assert reads[0] <= len(data) // 8 + 16, f"{reads[0]} header reads"  # counted, not timed
    with pytest.raises(BinaryFormatError, match="claims"):
        read_device_file(bytes(data))


def test_random_bytes_with_planted_magics_yield_nothing() -> None:
    rng = random.Random(20261202)
    data = bytearray(rng.randbytes(4 << 20))
    for _ in range(5000):
        at = rng.randrange(0, len(data) - 64) & ~7
        data[at : at + 4] = CONTAINER_MAGIC_BYTES
        if rng.random() < 0.5:  # a plausible container header in front of random entry bytes
            struct.pack_into("<HHQ", data, at + 4, 1, 16, rng.randrange(64, 4096))
    result = scan_containers(bytes(data))
    assert result.containers == ()
    assert len(result.rejected) >= 4900


@settings(max_examples=300, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(st.data())
def test_random_damage_to_a_real_library_never_escapes(nvcc_build: Build, data: st.DataObject) -> None:
    original = nvcc_build("compress_size").read_bytes()
    base = find_containers(original)[0].offset
    damaged = bytearray(original)
    for _ in range(data.draw(st.integers(1, 8))):
        spot = data.draw(st.integers(base, min(len(damaged) - 1, base + 6000)))
        damaged[spot] = data.draw(st.integers(0, 255))
    result = scan_containers(bytes(damaged))
    for container in result.containers:
        assert container.offset + container.size <= len(damaged)


_PREFIXES = [
    b"",
    CONTAINER_MAGIC_BYTES + b"\x01\x00\x10\x00",
    b"\x7fELF\x02\x01\x01\x41\x08" + b"\0" * 7 + b"\x02\x00\xbe\x00",
    b".version 9.0\n.target ",
]


@settings(max_examples=400, deadline=None)
@given(st.sampled_from(_PREFIXES), st.binary(max_size=2048))
def test_arbitrary_bytes_are_read_or_refused_cleanly(prefix: bytes, tail: bytes) -> None:
    data = prefix + tail
    try:
        device = read_device_file(data)
    except BinaryFormatError as e:
        assert "\n" not in str(e)
    else:
        assert device.entries or device.containers
    for container in scan_containers(data).containers:
        assert container.offset + container.size <= len(data)


@pytest.mark.slow
def test_scan_of_a_600_mib_library(nvcc_build: Build, monkeypatch: pytest.MonkeyPatch) -> None:
    """100 MiB of random host bytes with 2,000 planted magics, then 500 MiB of real containers back to back:
    every container found, every planted magic rejected.

    Speed is measured in benchmarks/inspect.py (1.2-1.4 s of CPU here); the bound below guards against a
    scan that degrades to quadratic work or loops by counting its header reads, not by timing it.
    """
    lib = nvcc_build("multi_arch").read_bytes()
    containers = find_containers(lib)
    fatbin = b"".join(container_bytes(lib, c) + b"\0" * (-c.size % 8) for c in containers)
    rng = random.Random(7)
    data = bytearray(os.urandom(100 << 20))
    for _ in range(2000):
        at = rng.randrange(0, len(data) - 16) & ~7
        data[at : at + 4] = CONTAINER_MAGIC_BYTES
    copies = (500 << 20) // len(fatbin) + 1
    data += fatbin * copies
    sections = [Section(".text", 0, 100 << 20), Section(".nv_fatbin", 100 << 20, copies * len(fatbin))]
    reads = count_reads(monkeypatch)
    result = scan_containers(data, sections)
    assert len(result.containers) == copies * len(containers)
    assert len(result.rejected) == 2000
    entries = sum(len(c.entries) for c in result.containers)
    # each container header and entry header read once, each planted magic tried once
    assert reads[0] <= len(result.containers) + entries + 2 * 2000, f"{reads[0]} header reads"


# --- standalone files -----------------------------------------------------------------------------


@pytest.mark.parametrize("build", builds_of_kind("fatbin", "cubin", "ptx"), ids=lambda b: b.name)
def test_read_device_file(nvcc_build: Build, build: NvccBuild) -> None:
    data = nvcc_build(build.name).read_bytes()
    device = read_device_file(data)
    assert (
        device.format
        is {"fatbin": FileFormat.FATBIN, "cubin": FileFormat.CUBIN, "ptx": FileFormat.PTX}[build.kind]
    )
    assert detect_device_format(data) is device.format
    assert arch_sets((FatbinContainer(0, len(data), None, False, device.entries),)) == (
        set(build.sass),
        set(build.ptx),
        set(build.lto),
    )
    assert len(device.containers) == (1 if build.kind == "fatbin" else 0)
    if build.kind == "cubin":
        (entry,) = device.entries
        assert entry.relocatable is build.relocatable
        assert entry.stored_size == len(data)


def test_several_containers_in_one_fatbin_file(blob: bytes, nvcc_build: Build) -> None:
    other = nvcc_build("fatbin_debug").read_bytes()
    device = read_device_file(blob + other + b"\0" * 8 + blob + b"\0" * 5)
    assert [c.offset for c in device.containers] == [0, len(blob), len(blob) + len(other) + 8]
    assert len(device.entries) == 2 * len(read_device_file(blob).entries) + len(
        read_device_file(other).entries
    )


@pytest.mark.parametrize(
    ("tail", "message"),
    [
        pytest.param(b"\0\0\0\0junk", "unexpected bytes at", id="junk"),
        pytest.param(b"\0" * 8 + CONTAINER_MAGIC_BYTES + b"\1\0\x10\0", "truncated", id="truncated-second"),
    ],
)
def test_fatbin_file_with_trailing_garbage(blob: bytes, tail: bytes, message: str) -> None:
    with pytest.raises(BinaryFormatError, match=message):
        read_device_file(blob + tail)


@pytest.mark.parametrize(
    "data",
    [
        pytest.param(b"", id="empty"),
        pytest.param(b"hello world\n", id="text"),
        pytest.param(b"\x7fELF\x02\x01\x01" + b"\0" * 57, id="host-elf"),
        pytest.param(b"MZ" + b"\0" * 62, id="pe"),
    ],
)
def test_not_a_device_file(data: bytes) -> None:
    assert detect_device_format(data) is None
    with pytest.raises(BinaryFormatError, match="not a fatbin, cubin or PTX file"):
        read_device_file(data)


@pytest.mark.parametrize(
    ("name", "expected"),
    [
        (".nv_fatbin", True),
        ("__nv_relfatbin", True),
        (".nv_fatb", True),
        ("__nv_rel", True),
        ("__NV_CUDA,__nv_fatbin", True),
        ("__NV_CUDA,__nv_relfatbin", True),
        (".rodata", False),
        ("__TEXT,__text", False),
        (None, False),
    ],
    ids=["elf", "elf-rdc", "pe", "pe-rdc", "macho", "macho-rdc", "rodata", "macho-text", "none"],
)
def test_device_sections_in_every_format(name: str | None, expected: bool) -> None:
    """Mach-O sections are named SEGMENT,section: a corrupt container there is reported like in ELF and PE."""
    assert is_device_section(name) is expected
