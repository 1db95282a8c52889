"""Symbol version definitions (``.gnu.version_d``) and requirements (``.gnu.version_r``) of ELF files built by
gcc in the test session with a version script, the way NVIDIA versions libnvJitLink.so.12's symbols."""

from __future__ import annotations

import shutil
import subprocess
from pathlib import Path

import pytest

from cudaship.binary.elf import read_elf
from cudaship.records.binary import HostBinary

pytestmark = pytest.mark.skipif(shutil.which("gcc") is None, reason="gcc is not installed")

_LIB = """
int newer_call(void) { return 2; }
int both_call(void) { return 3; }
int old_impl(void) { return 1; }
__asm__(".symver old_impl,old_call@VLIB_1.0");
int plain_call(void) { return 4; }
"""
_SCRIPT = "VLIB_1.0 { global: old_call; local: *; };\nVLIB_2.0 { global: newer_call; both_call; } VLIB_1.0;\n"
_USER = "int newer_call(void); int both_call(void);\nint use(void) { return newer_call() + both_call(); }\n"


def _read(path: Path) -> HostBinary:
    return read_elf(path.read_bytes())


@pytest.fixture(scope="module")
def built(tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, Path, Path]:
    d = tmp_path_factory.mktemp("versions")
    (d / "v.c").write_text(_LIB)
    (d / "v.map").write_text(_SCRIPT)
    (d / "u.c").write_text(_USER)
    lib = d / "libv.so.1"
    script = d / "v.map"
    subprocess.run(
        [
            "gcc",
            "-shared",
            "-fPIC",
            "-o",
            lib,
            d / "v.c",
            "-Wl,-soname,libv.so.1",
            f"-Wl,--version-script={script}",
        ],
        check=True,
    )
    (d / "libv.so").symlink_to(lib.name)
    user = d / "libuser.so"
    subprocess.run(["gcc", "-shared", "-fPIC", "-o", user, d / "u.c", f"-L{d}", "-lv"], check=True)
    (d / "p.c").write_text("int plain_call(void) { return 4; }\n")
    unversioned = d / "libplain.so"
    subprocess.run(["gcc", "-shared", "-fPIC", "-o", unversioned, d / "p.c"], check=True)
    return lib, user, unversioned


def test_definitions_are_read_without_the_base_entry(built: tuple[Path, Path, Path]) -> None:
    lib, _, _ = built
    host = _read(lib)
    assert host.version_definitions == ("VLIB_1.0", "VLIB_2.0")
    assert "libv.so.1" not in host.version_definitions  # the base entry names the file itself


def test_each_export_carries_its_version_hidden_ones_included(built: tuple[Path, Path, Path]) -> None:
    lib, _, _ = built
    versioned = dict(_read(lib).versioned_exports)
    assert versioned["newer_call"] == "VLIB_2.0"
    assert versioned["both_call"] == "VLIB_2.0"
    # old_call@VLIB_1.0 is a non-default (hidden) version: a reference to old_call@VLIB_1.0 still binds to it
    assert versioned["old_call"] == "VLIB_1.0"
    assert "plain_call" not in versioned  # local: * hides it
    assert "plain_call" not in _read(lib).exports


def test_imports_name_the_version_the_definitions_give(built: tuple[Path, Path, Path]) -> None:
    _, user, _ = built
    (imp,) = [i for i in _read(user).imports if i.library == "libv.so.1"]
    wanted = {("newer_call", "VLIB_2.0"), ("both_call", "VLIB_2.0")}
    assert {(s.name, s.version) for s in imp.symbols} == wanted


def test_a_library_without_version_script_defines_nothing(built: tuple[Path, Path, Path]) -> None:
    _, _, unversioned = built
    host = _read(unversioned)
    assert host.version_definitions == ()
    assert host.versioned_exports == ()
    assert "plain_call" in host.exports


def test_a_looping_definition_chain_is_a_format_error(built: tuple[Path, Path, Path]) -> None:
    """A vd_next pointing back at itself must end as BinaryFormatError, not loop."""
    from cudaship.binary.elf import SHT_GNU_VERDEF, _ElfReader
    from cudaship.errors import BinaryFormatError

    lib, _, _ = built
    data = bytearray(lib.read_bytes())
    reader = _ElfReader(bytes(data))
    (verdef,) = [h for h in reader.section_headers() if h.type == SHT_GNU_VERDEF]
    # walk to the last definition and make its vd_next point back 20 bytes... to itself: vd_next = 0 -> loop
    at = verdef.offset
    while True:
        next_off = int.from_bytes(data[at + 16 : at + 20], "little")
        if next_off == 0:
            break
        at += next_off
    data[at + 16 : at + 20] = (verdef.offset - at).to_bytes(4, "little", signed=True)
    with pytest.raises(BinaryFormatError):
        read_elf(bytes(data))


def test_the_loader_reading_keeps_versions_and_imports_only(built: tuple[Path, Path, Path]) -> None:
    """``full=False`` (what doctor --env reads): the same imports, versions and versioned exports; no
    unversioned export names, no read-only data scan."""
    for path in built:
        full = read_elf(path.read_bytes())
        fast = read_elf(path.read_bytes(), full=False)
        assert fast.imports == full.imports
        assert fast.undefined_symbols == full.undefined_symbols
        assert fast.version_definitions == full.version_definitions
        assert fast.versioned_exports == full.versioned_exports
        assert (fast.soname, fast.rpath, fast.runpath) == (full.soname, full.rpath, full.runpath)
        assert fast.exports == () and fast.embedded_library_names == ()
