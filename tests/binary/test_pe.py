"""PE reader: against the recipes of the mingw-w64 / lld-link builds, against llvm-readobj on those builds and
on real Windows wheels (bitsandbytes, the CUDA 13 runtime), plus hostile and corrupt inputs."""

from __future__ import annotations

import random
import re
import shutil
import struct
import subprocess
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path

import pytest

from cudaship.binary.pe import read_pe
from cudaship.errors import BinaryFormatError
from cudaship.records.binary import FileFormat, HostBinary, ImportKind, Machine
from tests.binary.wheel_members import extract
from tests.fixtures.mingw import MINGW_BUILDS
from tests.work import count_reads

READOBJ = shutil.which("llvm-readobj") or shutil.which("llvm-readobj-14")
needs_readobj = pytest.mark.skipif(READOBJ is None, reason="llvm-readobj is not installed")

WINDOWS_MEMBERS = [
    "bitsandbytes/libbitsandbytes_cpu.dll",
    "bitsandbytes/libbitsandbytes_cuda118.dll",
    "bitsandbytes/libbitsandbytes_cuda126.dll",
    "bitsandbytes/libbitsandbytes_cuda130.dll",
    "bitsandbytes/libbitsandbytes_cuda132.dll",
    "bitsandbytes/libbitsandbytes_xpu2026.dll",
]
CUDART_DLL = "nvidia/cu13/bin/x86_64/cudart64_13.dll"
PE_BUILDS = [name for name in MINGW_BUILDS]

# -- llvm-readobj as the oracle ----------------------------------------------------------------------------


@dataclass
class ReadobjView:
    imports: list[tuple[str, list[str | int]]] = field(default_factory=list)
    delay_imports: list[tuple[str, list[str | int]]] = field(default_factory=list)
    exports: set[str] = field(default_factory=set)
    sections: list[tuple[str, int, int, int]] = field(default_factory=list)  # name, offset, size, address


def readobj(path: Path) -> ReadobjView:
    assert READOBJ
    out = subprocess.run(
        [READOBJ, "--coff-imports", "--coff-exports", "--sections", str(path)],
        capture_output=True,
        text=True,
        check=True,
    ).stdout
    view = ReadobjView()
    block: str | None = None
    current: tuple[str, list[str | int]] | None = None
    section: dict[str, str] = {}
    for raw in out.splitlines():
        line = raw.strip()
        if line == "Import {" and block == "DelayImport":
            continue  # readobj nests one "Import { Symbol: ... }" per delay-loaded symbol
        if line in ("Import {", "DelayImport {", "Export {", "Section {"):
            block, current, section = line[:-2], None, {}
            continue
        if block in ("Import", "DelayImport"):
            if line.startswith("Name: ") and current is None:
                current = (line[6:], [])
                (view.imports if block == "Import" else view.delay_imports).append(current)
            elif line.startswith("Symbol:") and current is not None:
                match = re.match(r"Symbol: (\S*) ?\((\d+)\)", line)
                assert match, line
                current[1].append(match.group(1) or int(match.group(2)))
        elif block == "Export" and line.startswith("Name: ") and line[6:]:
            view.exports.add(line[6:])
        elif block == "Section" and ": " in line and raw.startswith("    ") and not raw.startswith("      "):
            key, _, value = line.partition(": ")
            section[key] = value
            if key == "PointerToRawData":
                name = section["Name"].split(" (")[0]
                view.sections.append(
                    (name, int(value, 16), int(section["RawDataSize"]), int(section["VirtualAddress"], 16))
                )
    return view


def assert_matches_readobj(path: Path) -> HostBinary:
    host = read_pe(path.read_bytes())
    expected = readobj(path)
    got_imports = [
        (i.library, [s.name or s.ordinal for s in i.symbols])
        for i in host.imports
        if i.kind is ImportKind.IMPORT
    ]
    got_delay = [
        (i.library, [s.name or s.ordinal for s in i.symbols])
        for i in host.imports
        if i.kind is ImportKind.DELAY
    ]
    assert got_imports == expected.imports
    assert got_delay == expected.delay_imports
    assert set(host.exports) == expected.exports
    assert [(s.name, s.offset, s.size, s.address) for s in host.sections] == expected.sections
    return host


@pytest.fixture(scope="module")
def windows_dlls(
    bitsandbytes_windows_wheel: Path, cudart_windows_wheel: Path, tmp_path_factory: pytest.TempPathFactory
) -> dict[str, Path]:
    root = tmp_path_factory.mktemp("pe-wheels")
    out = {member: extract(bitsandbytes_windows_wheel, member, root) for member in WINDOWS_MEMBERS}
    out[CUDART_DLL] = extract(cudart_windows_wheel, CUDART_DLL, root)
    return out


# -- the builds against their recipes ---------------------------------------------------------------------


@pytest.mark.parametrize("name", PE_BUILDS, ids=PE_BUILDS)
def test_build_matches_recipe(mingw_build: Callable[[str], Path], name: str) -> None:
    expect = MINGW_BUILDS[name]
    host = read_pe(mingw_build(name).read_bytes())
    assert host.format is FileFormat.PE
    assert host.machine is Machine(expect.machine)
    assert host.bits == expect.bits
    assert host.kind == "shared-library"
    assert host.soname == name
    by_kind = {
        ImportKind.IMPORT: {i.library: i for i in host.imports if i.kind is ImportKind.IMPORT},
        ImportKind.DELAY: {i.library: i for i in host.imports if i.kind is ImportKind.DELAY},
    }
    for kind, wanted in ((ImportKind.IMPORT, expect.imports), (ImportKind.DELAY, expect.delay_imports)):
        for dll, symbols in wanted.items():
            assert dll in by_kind[kind], f"{dll} not a {kind.value} of {name}"
            got = {s.name if s.name is not None else s.ordinal for s in by_kind[kind][dll].symbols}
            assert got == set(symbols)
    assert not expect.delay_imports or set(by_kind[ImportKind.DELAY]) == set(expect.delay_imports)
    if not expect.delay_imports:
        assert by_kind[ImportKind.DELAY] == {}
    assert set(expect.exports) <= set(host.exports)
    assert set(expect.embedded_library_names) <= set(host.embedded_library_names)
    for section in expect.sections:
        assert section in {s.name for s in host.sections}
    for word in expect.no_import_matching:
        assert not any(word in i.library.lower() for i in host.imports)


def test_exporter_leaves_ordinal_only_export_out(mingw_build: Callable[[str], Path]) -> None:
    host = read_pe(mingw_build("exporter.dll").read_bytes())
    assert "shim_hidden" not in host.exports  # exported by ordinal 5 only (NONAME)


def test_wide_and_ascii_names_are_found(mingw_build: Callable[[str], Path]) -> None:
    data = mingw_build("driver_loader.dll").read_bytes()
    assert "nvcuda.dll".encode("utf-16-le") in data and b"cublasLt64_13.dll\x00" in data  # the recipe held
    host = read_pe(data)
    assert set(host.embedded_library_names) >= {"nvcuda.dll", "cublasLt64_13.dll"}


def test_import_names_are_not_taken_for_embedded_strings(mingw_build: Callable[[str], Path]) -> None:
    host = read_pe(mingw_build("delay_consumer.dll").read_bytes())
    assert host.embedded_library_names == ()  # lld-link puts the import DLL names in .rdata


@needs_readobj
@pytest.mark.parametrize("name", PE_BUILDS, ids=PE_BUILDS)
def test_build_matches_readobj(mingw_build: Callable[[str], Path], name: str) -> None:
    assert_matches_readobj(mingw_build(name))


@needs_readobj
@pytest.mark.network
@pytest.mark.parametrize(
    "member", [*WINDOWS_MEMBERS, CUDART_DLL], ids=[Path(m).name for m in [*WINDOWS_MEMBERS, CUDART_DLL]]
)
def test_wheel_dll_matches_readobj(windows_dlls: dict[str, Path], member: str) -> None:
    host = assert_matches_readobj(windows_dlls[member])
    assert host.soname == Path(member).name


@pytest.mark.network
def test_static_runtime_dll_stores_driver_name(windows_dlls: dict[str, Path]) -> None:
    host = read_pe(windows_dlls["bitsandbytes/libbitsandbytes_cuda130.dll"].read_bytes())
    assert not any(i.library.lower().startswith("cudart") for i in host.imports)
    assert "nvcuda.dll" in host.embedded_library_names
    assert ".nv_fatb" in {s.name for s in host.sections}


# -- hostile and corrupt input -----------------------------------------------------------------------------


def _pe_offsets(data: bytes | bytearray) -> tuple[int, int, int]:
    (lfanew,) = struct.unpack_from("<I", data, 0x3C)
    (opt_size,) = struct.unpack_from("<H", data, lfanew + 20)
    return lfanew, lfanew + 24, lfanew + 24 + opt_size


@pytest.mark.parametrize(
    "case",
    [
        "huge-section-count",
        "section-past-end",
        "import-rva-nowhere",
        "export-billion-names",
        "not-pe",
        "mz-only",
        "empty",
    ],
    ids=str,
)
def test_hostile_headers_fail_cleanly(
    mingw_build: Callable[[str], Path], case: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    data = bytearray(mingw_build("cuda_consumer.dll").read_bytes())
    lfanew, opt, table = _pe_offsets(data)
    if case == "huge-section-count":
        struct.pack_into("<H", data, lfanew + 6, 0xFFFF)
    elif case == "section-past-end":
        struct.pack_into("<I", data, table + 20, len(data) + 100)  # PointerToRawData of the first section
    elif case == "import-rva-nowhere":
        struct.pack_into("<I", data, opt + 112 + 8, 0x7FFF0000)
    elif case == "export-billion-names":
        rva, _ = struct.unpack_from("<II", data, opt + 112)
        host = read_pe(bytes(data))
        edata = next(s for s in host.sections if s.address <= rva < s.address + max(s.size, 1))
        struct.pack_into("<I", data, edata.offset + (rva - edata.address) + 24, 1_000_000_000)
    elif case == "not-pe":
        data[lfanew : lfanew + 4] = b"NE\x00\x00"
    elif case == "mz-only":
        data = data[:0x40]
    else:
        data = bytearray()
    reads = count_reads(monkeypatch)
    with pytest.raises(BinaryFormatError) as info:
        read_pe(bytes(data))
    assert reads[0] < 1000, f"{reads[0]} reads to refuse a header"  # counted, not timed
    assert "\n" not in str(info.value) and str(info.value).startswith("PE: ")


def _outcome(data: bytes) -> str | None:
    try:
        read_pe(data)
    except BinaryFormatError as e:
        if "\n" in str(e):
            return f"multi-line message: {e!r}"
    except Exception as e:  # the point of the test: anything else is a bug
        return f"{type(e).__name__}: {e}"
    return None


@pytest.mark.parametrize("name", ["cuda_consumer.dll", "delay_consumer.dll"], ids=str)
def test_truncations_fail_cleanly(mingw_build: Callable[[str], Path], name: str) -> None:
    data = mingw_build(name).read_bytes()
    offsets = sorted({*range(0, 0x200, 3), *range(0, len(data), max(1, len(data) // 150)), len(data) - 1})
    failures = {n: r for n in offsets if (r := _outcome(data[:n])) is not None}
    assert failures == {}


@pytest.mark.parametrize("name", ["cuda_consumer.dll", "delay_consumer.dll", "exporter.dll"], ids=str)
def test_mutations_fail_cleanly(mingw_build: Callable[[str], Path], name: str) -> None:
    data = mingw_build(name).read_bytes()
    host = read_pe(data)
    _lfanew, _opt, table = _pe_offsets(data)
    targets = [(0, table + 40 * len(host.sections))]
    targets += [
        (s.offset, s.size) for s in host.sections if s.name in (".idata", ".edata", ".rdata") and s.size
    ]
    rng = random.Random(f"pe-{name}")
    failures = {}
    for round_ in range(300):
        start, size = rng.choice(targets)
        mutated = bytearray(data)
        for _ in range(rng.randint(1, 4)):
            mutated[start + rng.randrange(size)] = rng.choice([0x00, 0xFF, 0x7F, 0x80, rng.randrange(256)])
        outcome = _outcome(bytes(mutated))
        if outcome is not None:
            failures[round_] = outcome
    assert failures == {}
