"""The ld.so.cache reader against ldconfig: the machine's own cache, and one ldconfig builds in the test
session for a directory of gcc-built libraries."""

from __future__ import annotations

import re
import shutil
import subprocess
from pathlib import Path

import pytest

from cudaship.binary.ldcache import read_ld_cache
from cudaship.errors import BinaryFormatError
from cudaship.records.binary import Machine

ldconfig = shutil.which("ldconfig") or ("/sbin/ldconfig" if Path("/sbin/ldconfig").exists() else None)
needs_ldconfig = pytest.mark.skipif(
    ldconfig is None or shutil.which("gcc") is None, reason="needs ldconfig, gcc"
)

_LINE = re.compile(r"^\s+(\S+) \(([^)]*)\) => (\S+)$")


def _printed(cache: Path) -> list[tuple[str, str, str]]:
    """(name, ABI text, path) as ``ldconfig -p`` prints them, in order."""
    assert ldconfig is not None
    out = subprocess.run(
        [ldconfig, "-p", "-C", str(cache)], capture_output=True, text=True, check=True
    ).stdout
    return [(m[1], m[2], m[3]) for line in out.splitlines() if (m := _LINE.match(line))]


@needs_ldconfig
def test_a_cache_ldconfig_builds_reads_back_entry_for_entry(tmp_path: Path) -> None:
    libs = tmp_path / "libs"
    libs.mkdir()
    for name in ("alpha", "beta"):
        (tmp_path / f"{name}.c").write_text(f"int {name}(void) {{ return 1; }}\n")
        subprocess.run(
            [
                "gcc",
                "-shared",
                "-fPIC",
                "-o",
                str(libs / f"lib{name}.so.3"),
                str(tmp_path / f"{name}.c"),
                f"-Wl,-soname,lib{name}.so.3",
            ],
            check=True,
        )
    conf = tmp_path / "ld.so.conf"
    conf.write_text(f"{libs}\n")
    cache = tmp_path / "ld.so.cache"
    assert ldconfig is not None
    subprocess.run([ldconfig, "-C", str(cache), "-f", str(conf)], check=True, capture_output=True)
    entries = read_ld_cache(cache.read_bytes())
    printed = _printed(cache)
    libc6 = [p for p in printed if p[1].startswith("libc6")]
    assert [(e.name, e.path) for e in entries] == [(n, p) for n, _, p in libc6]
    ours = {e.name: e for e in entries if e.path.startswith(str(libs))}
    assert set(ours) == {"libalpha.so.3", "libbeta.so.3"}
    assert ours["libalpha.so.3"].path == str(libs / "libalpha.so.3")
    assert ours["libalpha.so.3"].machine is Machine.X86_64 or ours["libalpha.so.3"].machine is Machine.AARCH64


@pytest.mark.skipif(not Path("/etc/ld.so.cache").is_file(), reason="no /etc/ld.so.cache here")
@needs_ldconfig
def test_this_machines_cache_matches_ldconfig_p() -> None:
    entries = read_ld_cache(Path("/etc/ld.so.cache").read_bytes())
    libc6 = [(n, p) for n, abi, p in _printed(Path("/etc/ld.so.cache")) if abi.startswith("libc6")]
    assert [(e.name, e.path) for e in entries] == libc6
    kinds = {e.machine for e in entries}
    assert Machine.OTHER not in kinds


def test_not_a_cache_and_a_truncated_one_are_format_errors(tmp_path: Path) -> None:
    with pytest.raises(BinaryFormatError, match=r"not an ld\.so\.cache"):
        read_ld_cache(b"\x7fELF" + bytes(60))
    real = Path("/etc/ld.so.cache")
    if real.is_file():
        data = real.read_bytes()
        with pytest.raises(BinaryFormatError):
            read_ld_cache(data[:100])
