"""inspect on nvcc-built libraries and device files: arch sets from the recipe, cuobjdump as an oracle."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import replace
from pathlib import Path

import pytest

from cudaship.inspection.dispatch import detect_format
from cudaship.inspection.walk import inspect_paths
from cudaship.knowledge.archs import ptx_of, sass_of
from cudaship.records.binary import Compression, DeviceCodeKind, FileFormat
from cudaship.records.files import FileReport, RuntimeLinkage
from tests.fixtures import cuobjdump_path
from tests.fixtures.nvcc import BUILDS, NvccBuild
from tests.inspection.oracle import as_cuobjdump_names, cuobjdump_listing

FORMATS = {
    "shared": FileFormat.ELF,
    "static": FileFormat.STATIC_LIBRARY,  # an `!<arch>` archive of ELF objects: no DLL, not an import library
    "cubin": FileFormat.CUBIN,
    "fatbin": FileFormat.FATBIN,
    "ptx": FileFormat.PTX,
}
NAMES = sorted(BUILDS)


def inspect_one(path: Path, *, details: bool = False) -> FileReport:
    report = inspect_paths([path], details=details)
    (f,) = report.files
    assert f.error is None, f.error
    return f


@pytest.mark.parametrize("name", NAMES, ids=NAMES)
def test_arch_sets_match_the_build(name: str, nvcc_build: Callable[[str], Path]) -> None:
    build: NvccBuild = BUILDS[name]
    path = nvcc_build(name)
    f = inspect_one(path)
    assert f.format is FORMATS[build.kind]
    assert set(sass_of(f.device_code)) == set(build.sass)
    assert set(ptx_of(f.device_code)) == set(build.ptx)
    if build.lto:
        assert {d.arch for d in f.device_code if d.kind is DeviceCodeKind.LTOIR} == set(build.lto)


@pytest.mark.parametrize("name", NAMES, ids=NAMES)
def test_detect_format_by_content_not_name(
    name: str, nvcc_build: Callable[[str], Path], tmp_path: Path
) -> None:
    build = BUILDS[name]
    renamed = tmp_path / "no_extension"
    renamed.write_bytes(nvcc_build(name).read_bytes())
    # the `!<arch>` signature only says "an archive": the reader then tells static from import library
    by_signature = FileFormat.COFF_IMPORT_LIBRARY if build.kind == "static" else FORMATS[build.kind]
    assert detect_format(renamed.read_bytes()) is by_signature
    f = inspect_one(renamed)
    assert f.format is FORMATS[build.kind]
    assert set(sass_of(f.device_code)) == set(build.sass) and set(ptx_of(f.device_code)) == set(build.ptx)


ORACLE = [n for n in NAMES if BUILDS[n].kind in ("shared", "static", "cubin", "fatbin")]


@pytest.mark.parametrize("name", ORACLE, ids=ORACLE)
def test_entry_counts_equal_cuobjdump(name: str, nvcc_build: Callable[[str], Path]) -> None:
    """Same SASS and PTX entries, counted, as ``cuobjdump -all``; cuobjdump drops the 'f' of SASS names."""
    cuobjdump = cuobjdump_path()
    if cuobjdump is None:
        pytest.skip("cuobjdump not installed (pip install nvidia-cuda-cuobjdump)")
    path = nvcc_build(name)
    listing = cuobjdump_listing(cuobjdump, path)
    assert listing.complete, listing.message
    sass, ptx = as_cuobjdump_names(inspect_one(path).device_code)
    assert sass == listing.sass
    assert ptx == listing.ptx


def test_family_variant_kept_where_cuobjdump_drops_it(nvcc_build: Callable[[str], Path]) -> None:
    f = inspect_one(nvcc_build("family_specific"))
    assert {"sm_100f", "sm_120f"} <= set(sass_of(f.device_code))
    cuobjdump = cuobjdump_path()
    if cuobjdump is not None:
        listing = cuobjdump_listing(cuobjdump, nvcc_build("family_specific"))
        assert not any(name.endswith("f") for name in listing.sass)


def test_relocatable_code_listed_and_marked(nvcc_build: Callable[[str], Path]) -> None:
    build = BUILDS["relocatable"]
    f = inspect_one(nvcc_build("relocatable"))
    relocatable = [d for d in f.device_code if d.relocatable]
    assert relocatable
    assert {d.section for d in relocatable} == {"__nv_relfatbin"}
    assert {d.arch for d in relocatable if d.kind is DeviceCodeKind.SASS} == set(build.sass)
    assert all(not d.relocatable for d in f.device_code if d.section == ".nv_fatbin")


@pytest.mark.parametrize(
    ("name", "ptx", "sass"),
    [
        ("compress_none", {Compression.NONE}, {Compression.NONE}),
        ("compress_speed", {Compression.LZ4}, {Compression.NONE}),
        ("compress_balance", {Compression.ZSTD}, {Compression.NONE}),
        ("compress_size", {Compression.ZSTD}, {Compression.ZSTD}),
    ],
    ids=["none", "speed", "balance", "size"],
)
def test_compression_per_entry(
    name: str, ptx: set[Compression], sass: set[Compression], nvcc_build: Callable[[str], Path]
) -> None:
    f = inspect_one(nvcc_build(name))
    assert {d.compression for d in f.device_code if d.kind is DeviceCodeKind.PTX} == ptx
    assert {d.compression for d in f.device_code if d.kind is DeviceCodeKind.SASS} == sass
    for d in f.device_code:
        if d.compression is not Compression.NONE:
            assert d.uncompressed_size is not None and d.uncompressed_size > 0


@pytest.mark.parametrize(
    ("name", "runtime"),
    [("cudart_shared", RuntimeLinkage.DYNAMIC), ("cudart_static", RuntimeLinkage.STATIC)],
    ids=["shared", "static"],
)
def test_runtime_linkage(name: str, runtime: RuntimeLinkage, nvcc_build: Callable[[str], Path]) -> None:
    f = inspect_one(nvcc_build(name))
    assert f.linkage is not None and f.linkage.runtime is runtime
    if runtime is RuntimeLinkage.DYNAMIC:
        assert f.linkage.cudart_major == 13
        assert any(i.library == "libcudart.so.13" for i in f.host.imports)  # type: ignore[union-attr]


def test_details_toolkit_version_only_when_asked(
    nvcc_build: Callable[[str], Path], nvcc_version: str
) -> None:
    path = nvcc_build("compress_size")
    plain = inspect_one(path)
    assert all(d.toolkit_version is None for d in plain.device_code)
    detailed = inspect_one(path, details=True)
    sass = [d for d in detailed.device_code if d.kind is DeviceCodeKind.SASS]
    assert sass and all(d.toolkit_version and d.toolkit_version.startswith(nvcc_version) for d in sass)


def test_ptx_isa_and_release(nvcc_build: Callable[[str], Path], nvcc_version: str) -> None:
    from cudaship.knowledge.releases import cuda_release_for_ptx

    f = inspect_one(nvcc_build("multi_arch"))
    ptx = [d for d in f.device_code if d.kind is DeviceCodeKind.PTX]
    assert ptx
    for d in ptx:
        assert d.version is not None
        assert cuda_release_for_ptx(d.version) == nvcc_version


def test_details_on_a_corrupt_payload_notes_it_and_reads_the_rest(
    nvcc_build: Callable[[str], Path], tmp_path: Path
) -> None:
    """A ZSTD cubin whose frame header is damaged: without --details only the kernel sample decompresses, and
    the entry it cannot read stays unread (``kernels`` None: counted as code) with no error; with it, that
    entry gets a note and keeps its header facts, every other entry is still detailed."""
    path = nvcc_build("compress_size")
    clean = inspect_one(path)
    victim = next(d for d in clean.device_code if d.kind is DeviceCodeKind.SASS)
    data = bytearray(path.read_bytes())
    header_size = int.from_bytes(data[victim.offset + 4 : victim.offset + 8], "little")
    payload = victim.offset + header_size
    assert data[payload : payload + 4] == b"\x28\xb5\x2f\xfd", "a ZSTD frame"
    data[payload : payload + 16] = bytes(16)
    broken = tmp_path / "libbroken.so"
    broken.write_bytes(bytes(data))
    sampled = inspect_one(broken)
    assert sampled.error is None and not sampled.notes
    assert [replace(d, kernels=None) for d in sampled.device_code] == [
        replace(d, kernels=None) for d in clean.device_code
    ]
    assert next(d for d in sampled.device_code if d.offset == victim.offset).kernels is None
    assert victim.kernels is not None  # the clean library's sample read it
    detailed = inspect_one(broken, details=True)
    assert any(n.startswith("--details:") for n in detailed.notes)
    assert len(detailed.device_code) == len(clean.device_code)
    others = [d for d in detailed.device_code if d.kind is DeviceCodeKind.SASS and d.offset != victim.offset]
    assert others and all(d.toolkit_version for d in others)
