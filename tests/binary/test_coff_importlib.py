"""COFF import library reader: GNU dlltool (long format) and llvm-dlltool (short format, as MSVC) libraries
built here, compared with their .def recipe and with llvm-nm / llvm-readobj; NVIDIA's Windows .lib files from
the CUDA 13 runtime wheel; hostile and corrupt archives."""

from __future__ import annotations

import random
import re
import shutil
import subprocess
from collections.abc import Callable
from pathlib import Path

import pytest

from cudaship.binary.coff_importlib import read_import_library
from cudaship.errors import BinaryFormatError
from tests.binary.wheel_members import extract
from tests.fixtures.mingw import IMPORT_LIBRARIES

NM = shutil.which("llvm-nm") or shutil.which("llvm-nm-14")
READOBJ = shutil.which("llvm-readobj") or shutil.which("llvm-readobj-14")
LIBS = list(IMPORT_LIBRARIES)
NVIDIA_LIBS = ["cuda.lib", "cudart.lib", "cudart_static.lib", "cudadevrt.lib"]


def imp_symbols(path: Path) -> set[str]:
    """Symbols the archive defines as ``__imp_X`` (what a linker can import), by llvm-nm."""
    assert NM
    out = subprocess.run([NM, str(path)], capture_output=True, text=True, check=True).stdout
    found = set()
    for line in out.splitlines():
        match = re.match(r"^[0-9a-f]*\s+([A-TV-Za-tv-z])\s+__imp_(\S+)$", line)  # any defined kind, not U
        if match:
            found.add(match.group(2))
    return found


def short_members(path: Path) -> int:
    assert READOBJ
    out = subprocess.run([READOBJ, str(path)], capture_output=True, text=True, check=True).stdout
    return sum(1 for line in out.splitlines() if line.strip() == "Format: COFF-import-file")


@pytest.mark.parametrize("name", LIBS, ids=LIBS)
def test_import_library_matches_recipe(mingw_build: Callable[[str], Path], name: str) -> None:
    expect = IMPORT_LIBRARIES[name]
    lib = read_import_library(mingw_build(name).read_bytes())
    assert lib.dlls == (expect.dll,)
    assert {m.dll for m in lib.members} == {expect.dll}
    by_name = {m.symbol for m in lib.members if m.ordinal is None}
    assert by_name == set(expect.symbols)
    by_ordinal = {m.ordinal for m in lib.members if m.ordinal is not None}
    assert by_ordinal == set(expect.ordinals.values())


@pytest.mark.skipif(NM is None or READOBJ is None, reason="needs llvm-nm and llvm-readobj")
@pytest.mark.parametrize("name", LIBS, ids=LIBS)
def test_import_library_matches_llvm_tools(mingw_build: Callable[[str], Path], name: str) -> None:
    path = mingw_build(name)
    lib = read_import_library(path.read_bytes())
    assert {m.symbol for m in lib.members} == imp_symbols(path)
    short = short_members(path)
    assert (short > 0) == IMPORT_LIBRARIES[name].short_format
    if IMPORT_LIBRARIES[name].short_format:
        assert short == len(lib.members)


@pytest.fixture(scope="module")
def nvidia_libs(cudart_windows_wheel: Path, tmp_path_factory: pytest.TempPathFactory) -> dict[str, Path]:
    root = tmp_path_factory.mktemp("nvidia-libs")
    return {name: extract(cudart_windows_wheel, f"nvidia/cu13/lib/x64/{name}", root) for name in NVIDIA_LIBS}


@pytest.mark.network
@pytest.mark.skipif(NM is None or READOBJ is None, reason="needs llvm-nm and llvm-readobj")
@pytest.mark.parametrize("name", NVIDIA_LIBS, ids=NVIDIA_LIBS)
def test_nvidia_libs_hold_no_import_members(nvidia_libs: dict[str, Path], name: str) -> None:
    """CUDA 13's cuda.lib / cudart.lib are static loader libraries (they LoadLibrary the DLL), not import
    libraries: no short import member, no __imp_ symbol defined."""
    path = nvidia_libs[name]
    lib = read_import_library(path.read_bytes())
    assert short_members(path) == 0
    assert imp_symbols(path) == set()
    assert lib.dlls == () and lib.members == ()


# -- hostile and corrupt input -----------------------------------------------------------------------------


@pytest.mark.parametrize(
    "case",
    [
        "not-ar",
        "thin",
        "bad-size",
        "size-past-end",
        "long-name-without-table",
        "short-names-past-member",
        "empty",
    ],
    ids=str,
)
def test_hostile_archives_fail_cleanly(mingw_build: Callable[[str], Path], case: str) -> None:
    data = bytearray(mingw_build("exporter_msvc.lib").read_bytes())
    first = 8  # first member header
    if case == "not-ar":
        data[:8] = b"!<arxh>\n"
    elif case == "thin":
        data[:8] = b"!<thin>\n"
    elif case == "bad-size":
        data[first + 48 : first + 58] = b"12x4      "
    elif case == "size-past-end":
        data[first + 48 : first + 58] = b"9999999999"
    elif case == "long-name-without-table":
        data = bytearray(
            b"!<arch>\n" + b"/123            " + b"0           0     0     644     4         `\n" + b"abcd"
        )
    elif case == "short-names-past-member":
        header = (
            bytes.fromhex("0000ffff00006486") + b"\x00" * 4 + (1 << 20).to_bytes(4, "little") + b"\x00" * 4
        )
        member = header + b"sym\x00dll.dll\x00"
        data = bytearray(
            b"!<arch>\n"
            + b"x.dll/          "
            + b"0           0     0     644     "
            + str(len(member)).ljust(10).encode()
            + b"`\n"
            + member
        )
    else:
        data = bytearray()
    with pytest.raises(BinaryFormatError) as info:
        read_import_library(bytes(data))
    assert "\n" not in str(info.value) and str(info.value).startswith("import library: ")


def _outcome(data: bytes) -> str | None:
    try:
        read_import_library(data)
    except BinaryFormatError as e:
        if "\n" in str(e):
            return f"multi-line message: {e!r}"
    except Exception as e:  # the point of the test: anything else is a bug
        return f"{type(e).__name__}: {e}"
    return None


@pytest.mark.parametrize("name", LIBS, ids=LIBS)
def test_truncations_and_mutations_fail_cleanly(mingw_build: Callable[[str], Path], name: str) -> None:
    data = mingw_build(name).read_bytes()
    failures: dict[str, str] = {}
    for n in sorted({*range(0, len(data), max(1, len(data) // 200)), len(data) - 1}):
        if (outcome := _outcome(data[:n])) is not None:
            failures[f"truncate {n}"] = outcome
    rng = random.Random(f"implib-{name}")
    for round_ in range(300):
        mutated = bytearray(data)
        for _ in range(rng.randint(1, 4)):
            mutated[rng.randrange(8, len(data))] = rng.choice(
                [0x00, 0xFF, 0x20, 0x39, 0x80, rng.randrange(256)]
            )
        if (outcome := _outcome(bytes(mutated))) is not None:
            failures[f"mutation {round_}"] = outcome
    assert failures == {}
