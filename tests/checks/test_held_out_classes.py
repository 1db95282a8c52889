"""Issue 32's classes of held-out wheels the audit judged wrongly, each on a wheel generated here from real
gcc output (no wheel names, no special case): the default audit must give the loader's verdict."""

from __future__ import annotations

import shutil
import subprocess
from pathlib import Path

import pytest

from cudaship.checks.engine import audit_wheels
from cudaship.checks.table import default_policy
from cudaship.records.findings import CheckResult, Status
from tests.fixtures.synthetic_wheels import write_wheel

pytestmark = pytest.mark.skipif(shutil.which("gcc") is None, reason="needs gcc")

LINUX = "cp312-cp312-manylinux_2_28_x86_64"


def shared_library(work: Path, name: str, source: str, *args: str) -> bytes:
    """A real ELF shared library built by gcc from ``source`` (``args``: link options)."""
    src = work / f"{name}.c"
    src.write_text(source)
    out = work / name
    subprocess.run(["gcc", "-shared", "-fPIC", "-o", str(out), str(src), f"-L{work}", *args], check=True)
    return out.read_bytes()


def audited(wheel: Path) -> dict[str, CheckResult]:
    report = audit_wheels([wheel], default_policy())
    return {c.name: c for c in report.checks}


def errors(checks: dict[str, CheckResult]) -> list[str]:
    return [f"{c.name}: {c.reason}" for c in checks.values() if c.is_error]


# --- class 5: a ``.so`` that is a GNU ld linker script


def test_linker_script_is_recognised_and_says_what_it_names(tmp_path: Path) -> None:
    lib = shared_library(tmp_path, "libfoo.so.1", "int foo(void){return 1;}", "-Wl,-soname,libfoo.so.1")
    files = {
        "pkg/__init__.py": b"",
        "pkg/lib/libfoo.so.1": lib,
        # what a distribution installs for -lfoo (glibc's libc.so has the same shape)
        "pkg/lib/libfoo.so": b"/* GNU ld script */\nOUTPUT_FORMAT(elf64-x86-64)\nGROUP ( libfoo.so.1 "
        b"AS_NEEDED ( /lib64/ld-linux-x86-64.so.2 ) )\n",
    }
    wheel = write_wheel(tmp_path, name="ldscript", version="1.0", tag=LINUX, files=files)
    checks = audited(wheel)
    assert errors(checks) == []
    readable = checks["record: native files readable"]
    assert readable.status is Status.PASS
    assert "1 GNU ld linker script" in readable.reason
    assert "pkg/lib/libfoo.so names libfoo.so.1 (shipped beside it)" in readable.reason
    assert "/lib64/ld-linux-x86-64.so.2 (a path on the machine that links)" in readable.reason
