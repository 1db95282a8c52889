"""ELF host reader: compared against binutils' readelf on nvcc-built libraries and real PyPI wheels'
libraries, plus hostile and corrupt inputs."""

from __future__ import annotations

import mmap
import random
import re
import shutil
import struct
import subprocess
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

import pytest

from cudaship.binary.elf import read_elf
from cudaship.errors import BinaryFormatError
from cudaship.records.binary import FileFormat, HostBinary, Machine
from cudaship.wheel.archive import WheelArchive
from tests.binary.wheel_members import extract
from tests.work import count_reads

READELF = shutil.which("readelf")
needs_readelf = pytest.mark.skipif(READELF is None, reason="binutils readelf is not installed")

NVCC_LIBRARIES = ["cudart_shared", "cudart_static", "multi_arch", "relocatable"]
BITSANDBYTES_MEMBERS = [
    "bitsandbytes/libbitsandbytes_cpu.so",
    "bitsandbytes/libbitsandbytes_cuda118.so",
    "bitsandbytes/libbitsandbytes_cuda126.so",
    "bitsandbytes/libbitsandbytes_cuda130.so",
    "bitsandbytes/libbitsandbytes_rocm72.so",
]
CUDART_MEMBER = "nvidia/cu13/lib/libcudart.so.13"

# -- readelf as the oracle --------------------------------------------------------------------------------


@dataclass
class ReadelfView:
    machine: str
    elf_class: str
    type: str
    needed: list[str]
    soname: str | None
    runpath: list[str]
    rpath: list[str]
    sections: list[tuple[str, int, int, int]]  # name, offset, size in file, address
    exports: set[str]
    undefined: set[str]
    versioned_undefined: set[tuple[str, str]]  # (symbol, version) of undefined symbols with a version


_SECTION = re.compile(
    r"^\s*\[\s*(\d+)\]\s+(\S*)\s+(\S+)\s+([0-9a-f]+)\s+([0-9a-f]+)\s+([0-9a-f]+)\s+[0-9a-f]+\s"
)
_SYMBOL = re.compile(
    # ppc64le adds "[<localentry>: 8]" after the visibility
    r"^\s*\d+:\s+[0-9a-f]+\s+(?:\d+|0x[0-9a-f]+)\s+(\w+)\s+(\w+)\s+(\w+)(?:\s+\[[^\]]*\])?\s+(\w+)\s+(\S.*?)\s*$"
)


def readelf(path: Path) -> ReadelfView:
    assert READELF
    out = subprocess.run(
        [READELF, "-W", "-h", "-d", "-S", "--dyn-syms", str(path)], capture_output=True, text=True, check=True
    ).stdout
    header = dict(
        (key.strip(), value.strip())
        for key, _, value in (line.partition(":") for line in out.splitlines())
        if key.strip() in ("Class", "Machine", "Type")
    )
    bracket = re.compile(r"\[(.*)\]")

    def tagged(tag: str) -> list[str]:
        found = []
        for line in out.splitlines():
            if f"({tag})" in line:
                match = bracket.search(line)
                assert match, line
                found.append(match.group(1))
        return found

    sections = []
    for line in out.splitlines():
        match = _SECTION.match(line)
        if match and match.group(1) != "0":
            name, kind = match.group(2), match.group(3)
            size = 0 if kind == "NOBITS" else int(match.group(6), 16)
            sections.append((name, int(match.group(5), 16), size, int(match.group(4), 16)))
    exports: set[str] = set()
    undefined: set[str] = set()
    versioned: set[tuple[str, str]] = set()
    in_dynsym = False
    for line in out.splitlines():
        if line.startswith("Symbol table '.dynsym'"):
            in_dynsym = True
            continue
        if in_dynsym and line.startswith("Symbol table"):
            in_dynsym = False
        match = _SYMBOL.match(line) if in_dynsym else None
        if not match:
            continue
        kind, bind, vis, ndx, name = match.groups()
        name = re.sub(r" \(\d+\)$", "", name)
        base, _, version = name.replace("@@", "@").partition("@")
        if not base or kind in ("SECTION", "FILE"):
            continue
        if ndx == "UND":
            if bind == "GLOBAL":
                undefined.add(base)
            if version and bind in ("GLOBAL", "WEAK"):
                versioned.add((base, version))
        elif bind in ("GLOBAL", "WEAK", "UNIQUE") and vis in ("DEFAULT", "PROTECTED"):
            exports.add(base)
    return ReadelfView(
        machine=header["Machine"],
        elf_class=header["Class"],
        type=header["Type"],
        needed=tagged("NEEDED"),
        soname=next(iter(tagged("SONAME")), None),
        runpath=[p for entry in tagged("RUNPATH") for p in entry.split(":") if p],
        rpath=[p for entry in tagged("RPATH") for p in entry.split(":") if p],
        sections=sections,
        exports=exports,
        undefined=undefined,
        versioned_undefined=versioned,
    )


def read_path(path: Path) -> HostBinary:
    with path.open("rb") as f, mmap.mmap(f.fileno(), 0, access=mmap.ACCESS_READ) as view:
        return read_elf(view)


@pytest.fixture(scope="module")
def wheel_libs(
    bitsandbytes_linux_wheel: Path, cudart_linux_wheel: Path, tmp_path_factory: pytest.TempPathFactory
) -> dict[str, Path]:
    root = tmp_path_factory.mktemp("elf-wheels")
    out = {member: extract(bitsandbytes_linux_wheel, member, root) for member in BITSANDBYTES_MEMBERS}
    out[CUDART_MEMBER] = extract(cudart_linux_wheel, CUDART_MEMBER, root)
    return out


# -- comparison with readelf -------------------------------------------------------------------------------


def assert_matches_readelf(path: Path) -> HostBinary:
    host = read_path(path)
    expected = readelf(path)
    assert host.format is FileFormat.ELF
    assert host.bits == (64 if expected.elf_class == "ELF64" else 32)
    if "X86-64" in expected.machine:
        assert host.machine is Machine.X86_64
    assert [i.library for i in host.imports] == expected.needed
    assert host.soname == expected.soname
    assert list(host.runpath) == expected.runpath
    assert list(host.rpath) == expected.rpath
    assert [(s.name, s.offset, s.size, s.address) for s in host.sections] == expected.sections
    assert set(host.exports) == expected.exports
    assert {s.name for s in host.undefined_symbols} == expected.undefined
    attached = {(s.name, s.version) for i in host.imports for s in i.symbols}
    assert attached == expected.versioned_undefined
    # A version named like a NEEDED library (libcudart.so.13 versions its symbols by its soname) sits there.
    for imp in host.imports:
        for symbol in imp.symbols:
            if symbol.version in expected.needed:
                assert symbol.version == imp.library
    if expected.type.startswith("DYN") and expected.soname:
        assert host.kind == "shared-library"
    return host


@needs_readelf
@pytest.mark.parametrize("name", NVCC_LIBRARIES, ids=NVCC_LIBRARIES)
def test_nvcc_library_matches_readelf(nvcc_build: Callable[[str], Path], name: str) -> None:
    assert_matches_readelf(nvcc_build(name))


@needs_readelf
@pytest.mark.network
@pytest.mark.parametrize(
    "member",
    [*BITSANDBYTES_MEMBERS, CUDART_MEMBER],
    ids=[Path(m).name for m in [*BITSANDBYTES_MEMBERS, CUDART_MEMBER]],
)
def test_wheel_library_matches_readelf(wheel_libs: dict[str, Path], member: str) -> None:
    assert_matches_readelf(wheel_libs[member])


def test_cudart_shared_imports_runtime_symbols(nvcc_build: Callable[[str], Path]) -> None:
    host = read_path(nvcc_build("cudart_shared"))
    cudart = next(i for i in host.imports if i.library.startswith("libcudart.so."))
    names = {s.name for s in cudart.symbols}
    assert "__cudaRegisterFatBinary" in names
    assert all(s.version == cudart.library for s in cudart.symbols)
    assert host.cuda_markers == ()
    assert not any("libcudart" in n for n in host.embedded_library_names)


def test_cudart_static_stores_driver_name(nvcc_build: Callable[[str], Path]) -> None:
    host = read_path(nvcc_build("cudart_static"))
    assert not any(i.library.startswith("libcudart") for i in host.imports)
    assert "libcuda.so.1" in host.embedded_library_names
    assert "cudaGetExportTable" in host.cuda_markers
    if READELF:  # every name found is a string readelf dumps from .rodata
        rodata = subprocess.run(
            [READELF, "-p", ".rodata", str(nvcc_build("cudart_static"))],
            capture_output=True,
            text=True,
            encoding="latin-1",
            check=True,
        ).stdout
        dumped = {line.split("]", 1)[1].strip() for line in rodata.splitlines() if "]" in line}
        assert set(host.embedded_library_names) <= dumped


@pytest.mark.parametrize("kind", ["bytes", "bytearray", "memoryview", "mmap"], ids=str)
def test_every_buffer_type_reads_the_same(nvcc_build: Callable[[str], Path], kind: str) -> None:
    path = nvcc_build("cudart_shared")
    data = path.read_bytes()
    reference = read_elf(data)
    if kind == "bytearray":
        assert read_elf(bytearray(data)) == reference
    elif kind == "memoryview":
        assert read_elf(memoryview(data)) == reference
    elif kind == "mmap":
        assert read_path(path) == reference
    else:
        assert read_elf(bytes(data)) == reference


def test_mmap_can_be_closed_after_a_failure(nvcc_build: Callable[[str], Path], tmp_path: Path) -> None:
    broken = tmp_path / "broken.so"
    broken.write_bytes(nvcc_build("cudart_shared").read_bytes()[:3000])
    with broken.open("rb") as f:
        view = mmap.mmap(f.fileno(), 0, access=mmap.ACCESS_READ)
        with pytest.raises(BinaryFormatError):
            read_elf(view)
        view.close()  # no exported buffer left behind


# -- other classes, byte orders and machines (clang + ld.lld) ------------------------------------------------

CROSS_TARGETS = {
    "i686-linux-gnu": (Machine.X86, 32),
    "armv7a-linux-gnueabihf": (Machine.ARM, 32),
    "aarch64-linux-gnu": (Machine.AARCH64, 64),
    "powerpc64le-linux-gnu": (Machine.PPC64LE, 64),
    "powerpc64-linux-gnu": (Machine.OTHER, 64),  # big-endian ppc64: not a CUDA host
}
DEP_SRC = "int dep(int x) { return x + 1; }\n"
DEP_MAP = "DEP_2 { global: dep; local: *; };\n"
PROBE_SRC = """int dep(int);
const char *probe_name(void) { return "libcuda.so.1"; }
int probe(int x) { return dep(x); }
"""
CLANG = shutil.which("clang") or shutil.which("clang-14")
LLD = shutil.which("ld.lld") or shutil.which("ld.lld-14")


@pytest.fixture(scope="module")
def cross_libraries(tmp_path_factory: pytest.TempPathFactory) -> dict[str, Path]:
    if not (CLANG and LLD):
        pytest.skip("needs clang and ld.lld (Debian: clang lld)")
    root = tmp_path_factory.mktemp("elf-cross")
    (root / "dep.c").write_text(DEP_SRC)
    (root / "dep.map").write_text(DEP_MAP)
    (root / "probe.c").write_text(PROBE_SRC)
    out = {}
    for target in CROSS_TARGETS:

        def run(*args: str) -> None:
            subprocess.run(args, cwd=root, check=True, capture_output=True)

        run(CLANG, f"--target={target}", "-fPIC", "-O1", "-c", "dep.c", "-o", f"dep-{target}.o")
        run(
            LLD,
            "-shared",
            "-soname",
            "libdep.so.2",
            "--version-script",
            "dep.map",
            f"dep-{target}.o",
            "-o",
            f"libdep-{target}.so",
        )
        run(CLANG, f"--target={target}", "-fPIC", "-O1", "-c", "probe.c", "-o", f"probe-{target}.o")
        run(
            LLD,
            "-shared",
            "-soname",
            "libprobe.so.1",
            "--enable-new-dtags",
            "-rpath",
            "$ORIGIN/../lib:/opt/x",
            f"probe-{target}.o",
            f"libdep-{target}.so",
            "-o",
            f"libprobe-{target}.so",
        )
        out[target] = root / f"libprobe-{target}.so"
    return out


@needs_readelf
@pytest.mark.parametrize("target", list(CROSS_TARGETS), ids=list(CROSS_TARGETS))
def test_cross_built_library(cross_libraries: dict[str, Path], target: str) -> None:
    host = assert_matches_readelf(cross_libraries[target])
    machine, bits = CROSS_TARGETS[target]
    assert (host.machine, host.bits, host.kind) == (machine, bits, "shared-library")
    assert host.soname == "libprobe.so.1"
    assert host.runpath == ("$ORIGIN/../lib", "/opt/x") and host.rpath == ()
    assert [(i.library, [(s.name, s.version) for s in i.symbols]) for i in host.imports] == [
        ("libdep.so.2", [("dep", "DEP_2")])
    ]
    assert {"probe", "probe_name"} <= set(host.exports)
    assert host.embedded_library_names == ("libcuda.so.1",)


# -- hostile and corrupt input -----------------------------------------------------------------------------


def _set_section_field(data: bytearray, index: int, field_offset: int, fmt: str, value: int) -> None:
    (shoff,) = struct.unpack_from("<Q", data, 0x28)
    (shentsize,) = struct.unpack_from("<H", data, 0x3A)
    struct.pack_into(fmt, data, shoff + index * shentsize + field_offset, value)


def _section_index(path: Path, name: str) -> int:
    host = read_path(path)
    return next(k for k, s in enumerate(host.sections, start=1) if s.name == name)


@pytest.mark.parametrize(
    "case",
    [
        "billion-symbols",
        "section-past-end",
        "huge-shnum",
        "strtab-offset-past-end",
        "bad-shentsize",
        "not-elf",
        "empty",
    ],
    ids=str,
)
def test_hostile_headers_fail_cleanly(
    nvcc_build: Callable[[str], Path], case: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    path = nvcc_build("cudart_shared")
    data = bytearray(path.read_bytes())
    if case == "billion-symbols":
        _set_section_field(data, _section_index(path, ".dynsym"), 0x20, "<Q", 24 * 1_000_000_000)
    elif case == "section-past-end":
        _set_section_field(data, _section_index(path, ".dynstr"), 0x18, "<Q", len(data) + 4096)
    elif case == "huge-shnum":
        struct.pack_into("<H", data, 0x3C, 0xFFFE)
    elif case == "strtab-offset-past-end":
        _set_section_field(data, _section_index(path, ".dynstr"), 0x20, "<Q", 1 << 40)
    elif case == "bad-shentsize":
        struct.pack_into("<H", data, 0x3A, 8)
    elif case == "not-elf":
        data[:4] = b"\x7fELG"
    else:
        data = bytearray()
    reads = count_reads(monkeypatch)
    with pytest.raises(BinaryFormatError) as info:
        read_elf(bytes(data))
    assert reads[0] < 1000, f"{reads[0]} reads to refuse a header"  # counted, not timed
    message = str(info.value)
    assert "\n" not in message and message.startswith("ELF: ")


def _outcome(reader: Callable[[bytes], object], data: bytes) -> str | None:
    """None when the reader returned or raised BinaryFormatError with one line; else what went wrong."""
    try:
        reader(data)
    except BinaryFormatError as e:
        if "\n" in str(e):
            return f"multi-line message: {e!r}"
    except Exception as e:  # the point of the test: anything else is a bug
        return f"{type(e).__name__}: {e}"
    return None


def test_truncations_fail_cleanly(nvcc_build: Callable[[str], Path]) -> None:
    data = nvcc_build("cudart_shared").read_bytes()
    offsets = sorted({*range(0, 128), *range(0, len(data), max(1, len(data) // 150)), len(data) - 1})
    failures = {n: r for n in offsets if (r := _outcome(read_elf, data[:n])) is not None}
    assert failures == {}


def test_mutations_fail_cleanly(nvcc_build: Callable[[str], Path]) -> None:
    path = nvcc_build("cudart_shared")
    data = path.read_bytes()
    host = read_path(path)
    # Aim at the structures the reader walks: headers, the section table, .dynamic, .dynsym, versions.
    (shoff,) = struct.unpack_from("<Q", data, 0x28)
    targets = [(0, 64), (shoff, len(data) - shoff)]
    targets += [
        (s.offset, s.size)
        for s in host.sections
        if s.name in (".dynamic", ".dynsym", ".dynstr", ".gnu.version", ".gnu.version_r")
    ]
    rng = random.Random(20261202)
    failures = {}
    for round_ in range(400):
        start, size = rng.choice(targets)
        mutated = bytearray(data)
        for _ in range(rng.randint(1, 4)):
            at = start + rng.randrange(max(1, size))
            mutated[at] = rng.choice([0x00, 0xFF, 0x7F, 0x80, rng.randrange(256)])
        outcome = _outcome(read_elf, bytes(mutated))
        if outcome is not None:
            failures[round_] = outcome
    assert failures == {}


@pytest.mark.slow
@pytest.mark.network
def test_big_library_read_in_place(cublas_linux_wheel: Path) -> None:
    """libcublasLt.so.13 (546 MB), read through a mapped wheel member: headers, dynamic section and .rodata.

    How fast, and in how much memory, is measured in benchmarks/host_readers.py, not asserted here."""
    with WheelArchive(cublas_linux_wheel) as archive:
        member = next(m for m in archive.members() if re.search(r"/libcublasLt\.so\.\d+$", m.name))
        with archive.member_buffer(member) as buf:
            host = read_elf(buf)
    assert host.soname is not None and host.soname.startswith("libcublasLt.so.")
    assert host.machine is Machine.X86_64 and host.kind == "shared-library"
    assert "libcuda.so.1" in host.embedded_library_names
    assert {s.name for s in host.sections} >= {".text", ".rodata", ".nv_fatbin", ".cask_resource"}


@pytest.mark.slow
@pytest.mark.network
def test_nccl_library_names_are_whole_strings(nccl_linux_wheel: Path) -> None:
    """libnccl.so.2 dlopens the driver, NVML and the InfiniBand libraries by name; the string scan reports
    exactly those, not the constants and format strings around them (``4Blibmlx5.so``, ``s.so``)."""
    with WheelArchive(nccl_linux_wheel) as archive:
        member = next(m for m in archive.members() if m.name.endswith("/libnccl.so.2"))
        with archive.member_buffer(member) as buf:
            host = read_elf(buf)
    names = host.embedded_library_names
    assert set(names) >= {"libcuda.so.1", "libnvidia-ml.so.1", "libibverbs.so.1", "libmlx5.so.1"}
    for name in names:
        stem = name.rsplit("/", 1)[-1].split(".so")[0]
        assert len(stem) >= 2 and (stem[0].isalpha() or stem[0] == "_"), name
    assert "s.so" not in names and not any(n.startswith("4B") for n in names)
