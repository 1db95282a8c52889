"""Fatbin containers and entries, on fatbins nvcc 13.0 builds in the session (tests/fixtures/nvcc.py)."""

from __future__ import annotations

import contextlib
import dataclasses
import struct
from collections.abc import Callable
from pathlib import Path

import pytest

from cudaship.binary.cubin import is_cubin, read_cubin
from cudaship.binary.devicescan import find_containers
from cudaship.binary.fatbin import (
    CONTAINER_MAGIC_BYTES,
    EntryFlag,
    container_extent,
    entry_payload,
    read_container,
    read_entry_headers,
)
from cudaship.binary.ptx import read_ptx
from cudaship.errors import BinaryFormatError
from cudaship.records.binary import Compression, DeviceCode, DeviceCodeKind, FatbinContainer
from tests.fixtures.nvcc import BUILDS, NvccBuild, builds_of_kind, elf_sections

Build = Callable[[str], Path]

# Offsets inside a container / an entry header (docs/formats.md).
FAT_SIZE = 8
E_KIND, E_VERSION, E_HEADER_SIZE, E_PAYLOAD, E_COMPRESSED, E_OPTIONS = 0, 2, 4, 8, 16, 20
E_SM, E_NAME_OFFSET, E_NAME_LENGTH, E_FLAGS, E_UNCOMPRESSED = 28, 32, 36, 40, 56


def containers_of(path: Path) -> tuple[bytes, tuple[FatbinContainer, ...]]:
    data = path.read_bytes()
    if data.startswith(CONTAINER_MAGIC_BYTES):
        return data, (read_container(data, 0),)
    return data, find_containers(data, elf_sections(path))


def entries_of(path: Path) -> tuple[bytes, list[DeviceCode]]:
    data, containers = containers_of(path)
    return data, [e for c in containers for e in c.entries]


def patched(data: bytes, offset: int, fmt: str, value: int) -> bytes:
    out = bytearray(data)
    struct.pack_into(fmt, out, offset, value)
    return bytes(out)


def first_entry_of_kind(data: bytes, kind: DeviceCodeKind) -> DeviceCode:
    return next(e for e in read_container(data, 0).entries if e.kind is kind)


# --- real builds -------------------------------------------------------------------------------------------


@pytest.mark.parametrize("build", builds_of_kind("fatbin"), ids=lambda b: b.name)
def test_standalone_fatbin_entries_match_gencode(nvcc_build: Build, build: NvccBuild) -> None:
    spec = build
    _, entries = entries_of(nvcc_build(spec.name))
    assert {e.arch for e in entries if e.kind is DeviceCodeKind.SASS} == spec.sass
    assert {e.arch for e in entries if e.kind is DeviceCodeKind.PTX} == spec.ptx
    assert {e.arch for e in entries if e.kind is DeviceCodeKind.LTOIR} == spec.lto
    for entry in entries:
        assert entry.host == "linux"
        assert entry.container_offset == 0
        assert entry.section is None


@pytest.mark.parametrize(
    ("build", "sass", "ptx"),
    [
        pytest.param("compress_none", Compression.NONE, Compression.NONE, id="none"),
        pytest.param("compress_speed", Compression.NONE, Compression.LZ4, id="speed"),
        pytest.param("compress_balance", Compression.NONE, Compression.ZSTD, id="balance"),
        pytest.param("compress_size", Compression.ZSTD, Compression.ZSTD, id="size"),
    ],
)
def test_compress_mode_decides_entry_compression(
    nvcc_build: Build, build: str, sass: Compression, ptx: Compression
) -> None:
    data, entries = entries_of(nvcc_build(build))
    assert {e.compression for e in entries if e.kind is DeviceCodeKind.SASS} == {sass}
    assert {e.compression for e in entries if e.kind is DeviceCodeKind.PTX} == {ptx}
    for entry in entries:
        payload = entry_payload(data, entry)
        if entry.compression is Compression.NONE:
            assert entry.uncompressed_size is None
            assert len(payload) == entry.stored_size
        else:
            assert entry.uncompressed_size is not None
            assert len(payload) == entry.uncompressed_size
            assert entry.uncompressed_size > entry.stored_size
        if entry.kind is DeviceCodeKind.SASS:
            assert is_cubin(payload)
            assert read_cubin(payload).sm == entry.sm
        else:
            assert read_ptx(payload).target == f"sm_{entry.sm}{entry.variant}"


def test_size_mode_makes_the_library_smaller(nvcc_build: Build) -> None:
    stored = {
        mode: sum(e.stored_size for e in entries_of(nvcc_build(f"compress_{mode}"))[1])
        for mode in ("none", "speed", "balance", "size")
    }
    assert stored["size"] < stored["balance"] <= stored["speed"] < stored["none"]


@pytest.mark.parametrize("build", builds_of_kind("shared", "fatbin"), ids=lambda b: b.name)
def test_ptx_header_version_is_the_ptx_isa_of_the_text(nvcc_build: Build, build: NvccBuild) -> None:
    data, entries = entries_of(nvcc_build(build.name))
    for entry in entries:
        if entry.kind is DeviceCodeKind.PTX:
            assert entry.version == read_ptx(entry_payload(data, entry)).isa_version


@pytest.mark.parametrize("build", ["arch_specific", "family_specific", "blackwell"], ids=str)
def test_variant_flags_match_requested_targets(nvcc_build: Build, build: str) -> None:
    spec = BUILDS[build]
    _, entries = entries_of(nvcc_build(build))
    for entry in entries:
        flags = EntryFlag(entry.flags)
        assert (EntryFlag.ARCH_SPECIFIC in flags) == (entry.variant == "a")
        assert (EntryFlag.FAMILY_SPECIFIC in flags) == (entry.variant == "f")
        assert entry.arch.endswith(f"_{entry.sm}{entry.variant}")
    assert {e.arch for e in entries if e.kind is DeviceCodeKind.SASS} == spec.sass


def test_ptxas_options_are_read_from_the_entry(nvcc_build: Build) -> None:
    spec = BUILDS["fatbin_ptxas_options"]
    _, entries = entries_of(nvcc_build(spec.name))
    (ptx,) = entries
    assert ptx.kind is DeviceCodeKind.PTX
    assert ptx.ptxas_options is not None
    assert ptx.ptxas_options.split() == list(spec.ptxas_options)


def test_debug_build_sets_debug_and_name(nvcc_build: Build) -> None:
    spec = BUILDS["fatbin_debug"]
    _, entries = entries_of(nvcc_build(spec.name))
    assert entries
    assert all(e.debug for e in entries)
    # the name is the source file as given to nvcc (an absolute path here)
    assert {Path(e.name).name for e in entries if e.name} == {spec.source}
    assert all(e.name for e in entries)
    _, plain = entries_of(nvcc_build("fatbin_mixed"))
    assert not any(e.debug or e.name for e in plain)


def test_container_size_spans_its_entries(nvcc_build: Build) -> None:
    data, (container,) = containers_of(nvcc_build("fatbin_mixed"))
    assert container.size == len(data)
    last = container.entries[-1]
    header_size = struct.unpack_from("<I", data, last.offset + E_HEADER_SIZE)[0]
    assert last.offset + header_size + last.stored_size == container.size


# --- hand-made damage to real fatbins -----------------------------------------------------------------------


@pytest.fixture(scope="module")
def mixed(nvcc_build: Build) -> bytes:
    return nvcc_build("fatbin_mixed").read_bytes()


@pytest.fixture(scope="module")
def compressed(nvcc_build: Build) -> bytes:
    """A fatbin whose entries are all ZSTD (the standalone twin of compress_size)."""
    data = nvcc_build("compress_size").read_bytes()
    container = find_containers(data, elf_sections(nvcc_build("compress_size")))[-1]
    return data[container.offset : container.offset + container.size]


def test_truncation_anywhere_is_a_clean_error(mixed: bytes) -> None:
    for cut in range(0, len(mixed), 8):
        with pytest.raises(BinaryFormatError):
            read_container(mixed[:cut], 0)


@pytest.mark.parametrize(
    ("where", "fmt", "value", "message"),
    [
        pytest.param(4, "<H", 2, "version 2", id="container-version"),
        pytest.param(6, "<H", 24, "header size 24", id="container-header-size"),
        pytest.param(FAT_SIZE, "<Q", 1 << 63, "claims 9223372036854775808 bytes", id="fat-size-2^63"),
        pytest.param(FAT_SIZE, "<Q", (1 << 64) - 1, "claims", id="fat-size-max"),
        pytest.param(16 + E_KIND, "<H", 0, "kind 0", id="entry-kind-0"),
        pytest.param(16 + E_VERSION, "<H", 0x0202, "version 0x202", id="entry-version"),
        pytest.param(16 + E_HEADER_SIZE, "<I", 60, "header size 60", id="entry-header-short"),
        pytest.param(16 + E_HEADER_SIZE, "<I", 1 << 31, "header size", id="entry-header-huge"),
        pytest.param(16 + E_HEADER_SIZE, "<I", 68, "header size 68", id="entry-header-unaligned"),
        pytest.param(16 + E_PAYLOAD, "<Q", 1 << 63, "payload bytes", id="payload-2^63"),
        pytest.param(16 + E_PAYLOAD, "<Q", 12, "not a multiple of 8", id="payload-unaligned"),
        pytest.param(16 + E_SM, "<I", 0, "SM 0", id="sm-0"),
        pytest.param(16 + E_SM, "<I", 100000, "SM 100000", id="sm-huge"),
        pytest.param(16 + E_COMPRESSED, "<I", 1 << 31, "compressed bytes", id="compressed-gt-payload"),
        pytest.param(16 + E_NAME_LENGTH, "<I", 4096, "name outside", id="name-outside"),
        pytest.param(16 + E_OPTIONS, "<I", 4096, "options descriptor outside", id="options-outside"),
        pytest.param(16 + E_FLAGS, "<Q", 0x11 | 0x2000 | 0x8000, "both LZ4 and ZSTD", id="lz4-and-zstd"),
        pytest.param(16 + E_FLAGS, "<Q", 0x11 | 0x8000, "records no", id="zstd-without-sizes"),
    ],
)
def test_bad_header_field_is_named(mixed: bytes, where: int, fmt: str, value: int, message: str) -> None:
    with pytest.raises(BinaryFormatError, match=message):
        read_container(patched(mixed, where, fmt, value), 0)


def test_legacy_and_wrong_magic(mixed: bytes) -> None:
    with pytest.raises(BinaryFormatError, match="pre-2010"):
        container_extent(patched(mixed, 0, "<I", 0x1EE55A01), 0)
    with pytest.raises(BinaryFormatError, match="magic 0x466243b1"):
        container_extent(patched(mixed, 0, "<I", 0x466243B1), 0)


def test_stray_bytes_after_the_last_entry(mixed: bytes) -> None:
    size = container_extent(mixed, 0)
    grown = patched(mixed, FAT_SIZE, "<Q", size - 16 + 8) + b"\x01" + b"\0" * 7
    with pytest.raises(BinaryFormatError, match="stray bytes"):
        read_container(grown, 0)
    garbage = patched(mixed, FAT_SIZE, "<Q", size - 16 + 64) + b"\x01" + b"\0" * 63
    with pytest.raises(BinaryFormatError, match="fatbin entry at"):
        read_container(garbage, 0)
    padded = patched(mixed, FAT_SIZE, "<Q", size - 16 + 64) + b"\0" * 64
    assert len(read_entry_headers(padded, 0)) == len(read_entry_headers(mixed, 0))


def test_unknown_entry_kind_is_kept_as_unknown(mixed: bytes) -> None:
    entry = read_container(mixed, 0).entries[0]
    (changed,) = [e for e in read_container(patched(mixed, entry.offset, "<H", 0x10), 0).entries[:1]]
    assert changed.kind is DeviceCodeKind.UNKNOWN
    assert changed.sm == entry.sm


def test_recorded_size_too_small_is_a_bomb(compressed: bytes) -> None:
    entry = first_entry_of_kind(compressed, DeviceCodeKind.SASS)
    assert entry.uncompressed_size
    lying = patched(compressed, entry.offset + E_UNCOMPRESSED, "<Q", entry.uncompressed_size // 2)
    with pytest.raises(BinaryFormatError, match="inflates past"):
        entry_payload(lying, read_container(lying, 0).entries[0])


def test_absurd_recorded_size_is_refused_before_allocating(compressed: bytes) -> None:
    entry = first_entry_of_kind(compressed, DeviceCodeKind.SASS)
    lying = patched(compressed, entry.offset + E_UNCOMPRESSED, "<Q", 1 << 40)
    with pytest.raises(BinaryFormatError, match="claims 1099511627776 bytes"):
        entry_payload(lying, read_container(lying, 0).entries[0])


def test_corrupt_compressed_payload(compressed: bytes) -> None:
    entry = first_entry_of_kind(compressed, DeviceCodeKind.SASS)
    header_size = struct.unpack_from("<I", compressed, entry.offset + E_HEADER_SIZE)[0]
    start = entry.offset + header_size
    broken = bytearray(compressed)
    broken[start : start + 4] = b"\0\0\0\0"
    with pytest.raises(BinaryFormatError, match="frame magic"):
        entry_payload(bytes(broken), entry)
    broken = bytearray(compressed)
    broken[start + 8 : start + entry.stored_size] = bytes(range(256)) * (entry.stored_size // 256) + bytes(
        (entry.stored_size - 8) % 256
    )
    with pytest.raises(BinaryFormatError):
        entry_payload(bytes(broken[: len(compressed)]), entry)


def test_corrupt_lz4_payload(nvcc_build: Build) -> None:
    path = nvcc_build("compress_speed")
    data, entries = entries_of(path)
    (entry,) = [e for e in entries if e.compression is Compression.LZ4]
    header_size = struct.unpack_from("<I", data, entry.offset + E_HEADER_SIZE)[0]
    start = entry.offset + header_size
    broken = bytearray(data)
    broken[start : start + entry.stored_size] = b"\xff" * entry.stored_size
    with pytest.raises(BinaryFormatError, match="LZ4"):
        entry_payload(bytes(broken), entry)


def test_stale_record_is_revalidated(mixed: bytes) -> None:
    entry = read_container(mixed, 0).entries[0]
    with pytest.raises(BinaryFormatError):
        entry_payload(mixed, DeviceCode(**{**entry.__dict__, "offset": entry.offset + 8}))


def test_every_single_byte_mutation_of_headers_is_clean(mixed: bytes) -> None:
    """Flip each byte of the container and entry headers: a clean error or a valid reading, nothing else."""
    headers = read_entry_headers(mixed, 0)
    spots = list(range(16)) + [h.offset + i for h in headers for i in range(h.header_size)]
    for spot in spots:
        for value in (0x00, 0xFF, mixed[spot] ^ 0x80):
            damaged = bytearray(mixed)
            damaged[spot] = value
            try:
                container = read_container(bytes(damaged), 0)
            except BinaryFormatError:
                continue
            for entry in container.entries:
                with contextlib.suppress(BinaryFormatError):
                    entry_payload(bytes(damaged), entry)


def test_entry_records_are_the_dataclass_own(mixed: bytes, nvcc_build: Build) -> None:
    """:func:`device_code` fills the record's ``__dict__`` directly (the frozen ``__init__`` is slow): the
    result must be the record ``DeviceCode(...)`` makes, field for field, and stay frozen."""
    _, library = entries_of(nvcc_build("multi_arch"))
    entries = [*read_container(mixed, 0).entries, *library]
    assert {e.kind for e in entries} >= {DeviceCodeKind.SASS, DeviceCodeKind.PTX}
    for entry in entries:
        made = DeviceCode(**{f.name: getattr(entry, f.name) for f in dataclasses.fields(DeviceCode)})
        assert entry == made and hash(entry) == hash(made) and repr(entry) == repr(made)
        assert vars(entry) == vars(made) and list(vars(entry)) == list(vars(made))
        assert dataclasses.replace(entry, offset=1) == dataclasses.replace(made, offset=1)
        with pytest.raises(dataclasses.FrozenInstanceError):
            entry.offset = 0  # type: ignore[misc]


def test_container_records_are_the_dataclass_own(mixed: bytes) -> None:
    container = read_container(mixed, 0)
    made = FatbinContainer(
        **{f.name: getattr(container, f.name) for f in dataclasses.fields(FatbinContainer)}
    )
    assert container == made and hash(container) == hash(made) and repr(container) == repr(made)
    assert list(vars(container)) == list(vars(made))
    with pytest.raises(dataclasses.FrozenInstanceError):
        container.size = 0  # type: ignore[misc]
