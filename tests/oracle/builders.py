"""Builders for the oracle's tests: gcc-built shared libraries and wheels assembled from them.

Everything is built in the test's own temporary directory (gcc takes ~50 ms a library), so no cache is shared.
"""

from __future__ import annotations

import base64
import hashlib
import shutil
import subprocess
import zipfile
from collections.abc import Mapping, Sequence
from pathlib import Path

import pytest

GCC = shutil.which("gcc")
needs_gcc = pytest.mark.skipif(GCC is None, reason="gcc is not installed")

CONSTRUCTOR_SEGV = r"""
#include <signal.h>
__attribute__((constructor)) static void crash(void) { raise(SIGSEGV); }
int segv_symbol(void) { return 1; }
"""
CONSTRUCTOR_HANG = r"""
#include <unistd.h>
__attribute__((constructor)) static void hang(void) { for (;;) pause(); }
int hang_symbol(void) { return 1; }
"""


def function(name: str, calls: Sequence[str] = ()) -> str:
    """C source of a library exporting ``name`` that calls each of ``calls`` (so its DT_NEEDED are used)."""
    decls = "".join(f"int {c}(void);\n" for c in calls)
    body = " + ".join([*(f"{c}()" for c in calls), "1"])
    return f"{decls}int {name}(void) {{ return {body}; }}\n"


def build_so(
    out: Path,
    source: str,
    *,
    soname: str | None = None,
    link: Sequence[Path] = (),
    runpath: Sequence[str] = (),
    rpath: Sequence[str] = (),
) -> Path:
    """gcc ``source`` into the shared library ``out``, linked against the libraries ``link`` (each becomes a
    DT_NEEDED of its SONAME), with DT_RUNPATH ``runpath`` or DT_RPATH ``rpath``."""
    assert GCC is not None
    out.parent.mkdir(parents=True, exist_ok=True)
    src = out.with_name(out.name + ".c")
    src.write_text(source)
    args = [GCC, "-shared", "-fPIC", "-o", str(out), str(src)]
    if soname:
        args.append(f"-Wl,-soname,{soname}")
    for lib in link:
        args += [f"-L{lib.parent}", f"-l:{lib.name}"]
    if runpath:
        args += ["-Wl,--enable-new-dtags", "-Wl,-rpath," + ":".join(runpath)]
    if rpath:
        args += ["-Wl,--disable-new-dtags", "-Wl,-rpath," + ":".join(rpath)]
    subprocess.run(args, check=True, capture_output=True)
    src.unlink()
    return out


def _record_hash(data: bytes) -> str:
    return "sha256=" + base64.urlsafe_b64encode(hashlib.sha256(data).digest()).rstrip(b"=").decode()


def build_wheel(
    directory: Path,
    name: str,
    version: str,
    files: Mapping[str, bytes | Path],
    *,
    requires: Sequence[str] = (),
    tag: str = "py3-none-linux_x86_64",
    top_level: Sequence[str] | None = None,
) -> Path:
    """A wheel ``name-version-tag.whl`` in ``directory`` holding ``files`` (member path -> bytes or a file
    to copy), with METADATA (``requires`` as Requires-Dist), WHEEL, top_level.txt and RECORD."""
    dist = f"{name.replace('-', '_')}-{version}"
    info = f"{dist}.dist-info"
    members: dict[str, bytes] = {}
    for member, content in files.items():
        members[member] = content.read_bytes() if isinstance(content, Path) else content
    meta = ["Metadata-Version: 2.1", f"Name: {name}", f"Version: {version}"]
    meta += [f"Requires-Dist: {r}" for r in requires]
    members[f"{info}/METADATA"] = ("\n".join(meta) + "\n").encode()
    members[f"{info}/WHEEL"] = (
        f"Wheel-Version: 1.0\nGenerator: cudaship-tests\nRoot-Is-Purelib: false\nTag: {tag}\n"
    ).encode()
    if top_level is not None:
        members[f"{info}/top_level.txt"] = ("\n".join(top_level) + "\n").encode()
    record = [f"{m},{_record_hash(d)},{len(d)}" for m, d in members.items()]
    record.append(f"{info}/RECORD,,")
    members[f"{info}/RECORD"] = ("\n".join(record) + "\n").encode()
    directory.mkdir(parents=True, exist_ok=True)
    path = directory / f"{dist}-{tag}.whl"
    with zipfile.ZipFile(path, "w", zipfile.ZIP_DEFLATED) as z:
        for member, data in members.items():
            info_ = zipfile.ZipInfo(member, (2024, 1, 1, 0, 0, 0))
            info_.external_attr = 0o755 << 16 if member.endswith(".so") else 0o644 << 16
            z.writestr(info_, data, zipfile.ZIP_DEFLATED)
    return path
