"""Mach-O reader: against dylibs built here with clang + ld64.lld (thin arm64, thin x86_64, universal via
llvm-lipo), against llvm-objdump / llvm-nm on a real macOS wheel's dylib, plus hostile and corrupt inputs."""

from __future__ import annotations

import random
import shutil
import struct
import subprocess
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path

import pytest

from cudaship.binary.macho import read_macho, read_macho_slices
from cudaship.errors import BinaryFormatError
from cudaship.records.binary import FileFormat, ImportKind, Machine
from tests.binary.wheel_members import extract
from tests.work import count_reads


def _tool(*names: str) -> str | None:
    return next((found for name in names if (found := shutil.which(name))), None)


CLANG = _tool("clang", "clang-14", "clang-15")
LD64 = _tool("ld64.lld", "ld64.lld-14", "ld64.lld-15")
LIPO = _tool("llvm-lipo", "llvm-lipo-14", "llvm-lipo-15")
OBJDUMP = _tool("llvm-objdump", "llvm-objdump-14")
NM = _tool("llvm-nm", "llvm-nm-14")

DEP_C = "int dep_value(int x) { return x + 1; }\n"
PROBE_C = r"""
int dep_value(int x);
static const char *const cudaship_names[] = { "libcuda.dylib", "libcudart.13.dylib" };
int cudaship_probe(int i) { return dep_value(i) + (int)cudaship_names[i & 1][0]; }
int cudaship_counter = 3;
"""
#: What the probe dylib must contain, from its recipe.
INSTALL_NAME = "@rpath/libprobe.dylib"
DEP_NAME = "@rpath/libdep.1.dylib"
RPATHS = ("@loader_path/../lib", "/opt/cuda/lib")
EXPORTS = {"_cudaship_probe", "_cudaship_counter"}
EMBEDDED = {"libcuda.dylib", "libcudart.13.dylib"}
ARCHS = {"arm64": Machine.AARCH64, "x86_64": Machine.X86_64}


def _run(args: list[str], cwd: Path) -> None:
    done = subprocess.run(args, cwd=cwd, capture_output=True, text=True, check=False)
    if done.returncode != 0:
        raise RuntimeError(f"{' '.join(args)} failed:\n{done.stdout}\n{done.stderr}")


@pytest.fixture(scope="module")
def dylibs(tmp_path_factory: pytest.TempPathFactory) -> dict[str, Path]:
    """libprobe.dylib per arch and a universal one (skipped without clang, ld64.lld and llvm-lipo)."""
    if not (CLANG and LD64 and LIPO):
        pytest.skip("needs clang, ld64.lld and llvm-lipo (Debian: clang lld llvm)")
    root = tmp_path_factory.mktemp("macho")
    (root / "dep.c").write_text(DEP_C)
    (root / "probe.c").write_text(PROBE_C)
    out: dict[str, Path] = {}
    for arch in ARCHS:
        target = f"--target={arch}-apple-macos11"
        link = [
            LD64,
            "-arch",
            arch,
            "-platform_version",
            "macos",
            "11.0",
            "11.0",
            "-dylib",
            "-undefined",
            "dynamic_lookup",
        ]
        _run([CLANG, target, "-O1", "-c", "dep.c", "-o", f"dep_{arch}.o"], root)
        _run([*link, "-install_name", DEP_NAME, f"dep_{arch}.o", "-o", f"libdep_{arch}.dylib"], root)
        _run([CLANG, target, "-O1", "-c", "probe.c", "-o", f"probe_{arch}.o"], root)
        rpaths = [arg for path in RPATHS for arg in ("-rpath", path)]
        _run(
            [
                *link,
                "-install_name",
                INSTALL_NAME,
                *rpaths,
                f"probe_{arch}.o",
                f"libdep_{arch}.dylib",
                "-o",
                f"libprobe_{arch}.dylib",
            ],
            root,
        )
        out[arch] = root / f"libprobe_{arch}.dylib"
    _run([LIPO, "-create", str(out["arm64"]), str(out["x86_64"]), "-output", "libprobe_fat.dylib"], root)
    out["universal"] = root / "libprobe_fat.dylib"
    return out


@pytest.mark.parametrize("arch", list(ARCHS), ids=list(ARCHS))
def test_thin_dylib_matches_recipe(dylibs: dict[str, Path], arch: str) -> None:
    host = read_macho(dylibs[arch].read_bytes())
    assert host.format is FileFormat.MACHO
    assert host.machine is ARCHS[arch]
    assert host.bits == 64
    assert host.kind == "shared-library"
    assert host.soname == INSTALL_NAME
    assert host.rpath == RPATHS
    assert [(i.library, i.kind) for i in host.imports] == [(DEP_NAME, ImportKind.DYLIB)]
    assert {s.name for s in host.imports[0].symbols} == {"_dep_value"}
    assert set(host.exports) >= EXPORTS
    assert set(host.embedded_library_names) >= EMBEDDED
    assert "__TEXT,__cstring" in {s.name for s in host.sections}


def _symtab_entry(data: bytes, name: bytes) -> int:
    """The file offset of the 64-bit nlist entry named ``name`` in a thin Mach-O file."""
    ncmds = struct.unpack_from("<I", data, 16)[0]
    at = 32
    for _ in range(ncmds):
        cmd, size = struct.unpack_from("<II", data, at)
        if cmd == 0x2:  # LC_SYMTAB
            symoff, nsyms, stroff, _strsize = struct.unpack_from("<IIII", data, at + 8)
            for k in range(nsyms):
                strx = struct.unpack_from("<I", data, symoff + 16 * k)[0]
                if data[stroff + strx : data.index(b"\0", stroff + strx)] == name:
                    return symoff + 16 * k
        at += size
    raise AssertionError(f"{name!r} not in the symbol table")


def _name_index(data: bytes, entry: int) -> int:
    """The string-table index of an nlist entry's name."""
    return int(struct.unpack_from("<I", data, entry)[0])


@pytest.mark.skipif(NM is None, reason="needs llvm-nm")
def test_reexported_symbols_are_exports(dylibs: dict[str, Path], tmp_path: Path) -> None:
    """A symbol a dylib re-exports from another (N_INDR | N_EXT in its symbol table: what delocate's vendored
    libc++.1.0.dylib holds for the libc++abi functions it re-exports, __ZNKSt13runtime_error4whatEv ...) is
    one of its exports, as llvm-nm --defined-only and dyld see it."""
    data = bytearray(dylibs["arm64"].read_bytes())
    entry = _symtab_entry(bytes(data), b"_cudaship_counter")
    assert data[entry + 4] == 0x0F  # N_SECT | N_EXT, as the linker wrote it
    data[entry + 4] = 0x0B  # N_INDR | N_EXT
    data[entry + 5] = 0  # NO_SECT
    struct.pack_into("<Q", data, entry + 8, _name_index(bytes(data), entry))  # indirect for itself, as libc++
    mutated = tmp_path / "libindirect.dylib"
    mutated.write_bytes(bytes(data))
    assert "_cudaship_counter" in nm(mutated, "-g", "--defined-only")
    host = read_macho(bytes(data))
    assert "_cudaship_counter" in host.exports
    assert set(host.exports) == nm(mutated, "-g", "--defined-only")


def test_universal_dylib_has_every_slice(dylibs: dict[str, Path]) -> None:
    data = dylibs["universal"].read_bytes()
    slices = read_macho_slices(data)
    assert sorted(s.machine.value for s in slices) == sorted(m.value for m in ARCHS.values())
    assert read_macho(data) == slices[0]
    arch_of = {machine: arch for arch, machine in ARCHS.items()}
    for host in slices:
        thin = read_macho(dylibs[arch_of[host.machine]].read_bytes())
        assert (host.soname, host.rpath, host.exports) == (thin.soname, thin.rpath, thin.exports)
        cstring = next(s for s in host.sections if s.name == "__TEXT,__cstring")
        assert b"libcuda.dylib\x00" in data[cstring.offset : cstring.offset + cstring.size]  # file offsets


# -- a real macOS wheel --------------------------------------------------------------------------------------


@dataclass
class ObjdumpView:
    dylib_id: str | None = None
    dylibs: list[str] = field(default_factory=list)
    rpaths: list[str] = field(default_factory=list)
    sections: list[tuple[str, int, int, int]] = field(default_factory=list)


def objdump(path: Path) -> ObjdumpView:
    assert OBJDUMP
    out = subprocess.run(
        [OBJDUMP, "--macho", "--private-headers", str(path)], capture_output=True, text=True, check=True
    ).stdout
    view = ObjdumpView()
    command = ""
    section: dict[str, str] = {}
    for raw in out.splitlines():
        words = raw.split()
        if not words:
            continue
        key, value = words[0], " ".join(words[1:])
        if key == "cmd":
            command = value
        elif key == "name" and command in ("LC_LOAD_DYLIB", "LC_LOAD_WEAK_DYLIB", "LC_REEXPORT_DYLIB"):
            view.dylibs.append(value.rsplit(" (offset", 1)[0])
        elif key == "name" and command == "LC_ID_DYLIB":
            view.dylib_id = value.rsplit(" (offset", 1)[0]
        elif key == "path" and command == "LC_RPATH":
            view.rpaths.append(value.rsplit(" (offset", 1)[0])
        elif key == "Section":
            section = {}
        elif key in ("sectname", "segname", "addr", "size", "offset"):
            section[key] = value
        elif key.startswith("type") and "sectname" in section:  # "type S_ZEROFILL" or "type0x00000016"
            zerofill = "ZEROFILL" in raw
            view.sections.append(
                (
                    f"{section['segname']},{section['sectname']}",
                    int(section["offset"]),
                    0 if zerofill else int(section["size"].split()[0], 16),
                    int(section["addr"], 16),
                )
            )
            section = {}
    return view


def nm(path: Path, *flags: str) -> set[str]:
    assert NM
    out = subprocess.run([NM, *flags, str(path)], capture_output=True, text=True, check=True).stdout
    # "ADDRESS T name", "U name", "I name (indirect for other)": the name follows the one-letter type
    names = set()
    for line in out.splitlines():
        words = line.split()
        if not words:
            continue
        at = next((k for k, w in enumerate(words) if len(w) == 1), None)
        names.add(words[-1] if at is None else words[at + 1])  # ``nm -u`` may print the bare name
    return names


@pytest.fixture(scope="module")
def mac_dylib(bitsandbytes_macos_wheel: Path, tmp_path_factory: pytest.TempPathFactory) -> Path:
    member = "bitsandbytes/libbitsandbytes_cpu.dylib"
    return extract(bitsandbytes_macos_wheel, member, tmp_path_factory.mktemp("mac-wheel"))


@pytest.mark.network
@pytest.mark.skipif(OBJDUMP is None or NM is None, reason="needs llvm-objdump and llvm-nm")
def test_wheel_dylib_matches_llvm_tools(mac_dylib: Path) -> None:
    host = read_macho(mac_dylib.read_bytes())
    expected = objdump(mac_dylib)
    assert host.machine is Machine.AARCH64
    assert host.soname == expected.dylib_id
    assert [i.library for i in host.imports] == expected.dylibs
    assert list(host.rpath) == expected.rpaths
    assert [(s.name, s.offset, s.size, s.address) for s in host.sections] == expected.sections
    assert set(host.exports) == nm(mac_dylib, "-g", "--defined-only")
    assert {s.name for s in host.undefined_symbols} == nm(mac_dylib, "-u")
    attached = {s.name for i in host.imports for s in i.symbols}
    assert attached == {s.name for s in host.undefined_symbols}  # two-level namespace: each has its dylib


# -- hostile and corrupt input -----------------------------------------------------------------------------


@pytest.mark.parametrize(
    "case",
    [
        "huge-ncmds",
        "sizeofcmds-past-end",
        "billion-symbols",
        "fat-billion-slices",
        "fat-slice-past-end",
        "bad-magic",
        "empty",
    ],
    ids=str,
)
def test_hostile_headers_fail_cleanly(
    dylibs: dict[str, Path], case: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    data = bytearray(dylibs["arm64" if not case.startswith("fat") else "universal"].read_bytes())
    if case == "huge-ncmds":
        struct.pack_into("<I", data, 16, 0xFFFFFFF)
    elif case == "sizeofcmds-past-end":
        struct.pack_into("<I", data, 20, len(data) * 2)
    elif case == "billion-symbols":
        at = data.find(struct.pack("<II", 0x2, 24))  # LC_SYMTAB, cmdsize 24
        assert at > 0
        struct.pack_into("<I", data, at + 12, 1_000_000_000)
    elif case == "fat-billion-slices":
        struct.pack_into(">I", data, 4, 1_000_000_000)
    elif case == "fat-slice-past-end":
        struct.pack_into(">I", data, 8 + 8, len(data))  # first slice's offset
    elif case == "bad-magic":
        data[:4] = b"\xfe\xed\xfa\xcc"
    else:
        data = bytearray()
    reads = count_reads(monkeypatch)
    with pytest.raises(BinaryFormatError) as info:
        read_macho_slices(bytes(data))
    assert reads[0] < 1000, f"{reads[0]} reads to refuse a header"  # counted, not timed
    assert "\n" not in str(info.value) and str(info.value).startswith("Mach-O: ")


def _outcome(reader: Callable[[bytes], object], data: bytes) -> str | None:
    try:
        reader(data)
    except BinaryFormatError as e:
        if "\n" in str(e):
            return f"multi-line message: {e!r}"
    except Exception as e:  # the point of the test: anything else is a bug
        return f"{type(e).__name__}: {e}"
    return None


@pytest.mark.parametrize("which", ["arm64", "universal"], ids=str)
def test_truncations_and_mutations_fail_cleanly(dylibs: dict[str, Path], which: str) -> None:
    data = dylibs[which].read_bytes()
    failures: dict[str, str] = {}
    for n in sorted({*range(0, 256, 2), *range(0, len(data), max(1, len(data) // 100))}):
        if (outcome := _outcome(read_macho_slices, data[:n])) is not None:
            failures[f"truncate {n}"] = outcome
    host = read_macho_slices(data)[0]
    symtab = [(s.offset, s.size) for s in host.sections if s.size]
    rng = random.Random(f"macho-{which}")
    for round_ in range(300):
        mutated = bytearray(data)
        region = rng.random()
        for _ in range(rng.randint(1, 4)):
            if region < 0.6:  # headers and load commands
                at = rng.randrange(min(len(data), 4096))
            elif region < 0.8:
                start, size = rng.choice(symtab)
                at = start + rng.randrange(size)
            else:  # symbol and string tables sit at the end
                at = len(data) - 1 - rng.randrange(min(len(data), 2048))
            mutated[at] = rng.choice([0x00, 0xFF, 0x7F, 0x80, rng.randrange(256)])
        if (outcome := _outcome(read_macho_slices, bytes(mutated))) is not None:
            failures[f"mutation {round_}"] = outcome
    assert failures == {}
