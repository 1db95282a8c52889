"""Symbol versions in doctor --env, against glibc's loader: a small environment of gcc-built libraries (two
distributions with RECORD) where the library an extension module needs is older than the one it was linked
against. The simulation must report what the real loader refuses, with the same names."""

from __future__ import annotations

import csv
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from cudaship.checks.environment import doctor_env
from cudaship.records.findings import Severity

pytestmark = pytest.mark.skipif(
    shutil.which("gcc") is None or not sys.platform.startswith("linux"), reason="needs gcc and glibc's loader"
)

_NEW = """
int base_call(void) { return 1; }
int new_call(void) { return 2; }
"""
_OLD = "int base_call(void) { return 1; }\n"
_MAPS = {
    "new": "VDEP_1.0 { global: base_call; local: *; };\nVDEP_2.0 { global: new_call; } VDEP_1.0;\n",
    "old": "VDEP_1.0 { global: base_call; local: *; };\n",
    # the version exists but the symbol is not in it: the nvJitLink case (libnvJitLink.so.12 of 12.4)
    "partial": "VDEP_1.0 { global: base_call; local: *; };\nVDEP_2.0 { global: base_call2; } VDEP_1.0;\n",
}
_EXT = "int base_call(void); int new_call(void);\nint ext_call(void) { return base_call() + new_call(); }\n"


def _dist(site: Path, name: str, files: dict[str, Path]) -> None:
    info = site / f"{name}-1.0.dist-info"
    info.mkdir()
    (info / "METADATA").write_text(f"Metadata-Version: 2.1\nName: {name}\nVersion: 1.0\n")
    with open(info / "RECORD", "w", newline="") as f:
        writer = csv.writer(f)
        for rel, src in files.items():
            (site / rel).parent.mkdir(parents=True, exist_ok=True)
            shutil.copy(src, site / rel)
            writer.writerow([rel, "", ""])
        writer.writerow([f"{info.name}/METADATA", "", ""])
        writer.writerow([f"{info.name}/RECORD", "", ""])


def _build(tmp: Path, variant: str) -> Path:
    """site-packages with ``dep`` (libvdep.so.1, the ``variant`` build) and ``ext`` (an extension module
    linked against the new libvdep, RUNPATH $ORIGIN/../dep)."""
    build = tmp / "build"
    build.mkdir(exist_ok=True)
    for name, src in (
        ("new", _NEW),
        ("old", _OLD),
        ("partial", _OLD + "int base_call2(void) { return 3; }\n"),
    ):
        (build / f"{name}.c").write_text(src)
        (build / f"{name}.map").write_text(_MAPS[name])
        (build / name).mkdir(exist_ok=True)
        subprocess.run(
            [
                "gcc",
                "-shared",
                "-fPIC",
                "-o",
                str(build / name / "libvdep.so.1"),
                str(build / f"{name}.c"),
                "-Wl,-soname,libvdep.so.1",
                f"-Wl,--version-script={build / f'{name}.map'}",
            ],
            check=True,
        )
    (build / "ext.c").write_text(_EXT)
    ext = build / "ext.cpython-311-x86_64-linux-gnu.so"
    subprocess.run(
        [
            "gcc",
            "-shared",
            "-fPIC",
            "-o",
            str(ext),
            str(build / "ext.c"),
            f"-L{build / 'new'}",
            "-l:libvdep.so.1",
            "-Wl,--enable-new-dtags",
            "-Wl,-rpath,$ORIGIN/../dep",
        ],
        check=True,
    )
    site = tmp / variant / "site-packages"
    site.mkdir(parents=True)
    _dist(site, "dep", {"dep/libvdep.so.1": build / variant / "libvdep.so.1"})
    _dist(site, "ext", {"ext/ext.cpython-311-x86_64-linux-gnu.so": ext})
    return site


def _real_error(site: Path) -> str:
    code = f"import ctypes; ctypes.CDLL({str(site / 'ext' / 'ext.cpython-311-x86_64-linux-gnu.so')!r})"
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=False)
    return done.stderr if done.returncode else ""


def test_a_version_the_picked_file_does_not_define(tmp_path: Path) -> None:
    site = _build(tmp_path, "old")
    assert "version `VDEP_2.0' not found" in _real_error(site)
    report = doctor_env([str(site)], system=False)
    (f,) = [f for f in report.findings if f.rule == "missing-version"]
    assert f.severity is Severity.ERROR and f.subject.version == "VDEP_2.0"
    assert f.subject.distribution == "ext 1.0" and f.subject.target_distribution == "dep 1.0"
    assert (f.subject.target or "").endswith("dep/libvdep.so.1")
    assert "version `VDEP_2.0' not found" in f.reason


def test_a_symbol_the_picked_file_does_not_define_in_that_version(tmp_path: Path) -> None:
    site = _build(tmp_path, "partial")
    assert "undefined symbol: new_call, version VDEP_2.0" in _real_error(site)
    report = doctor_env([str(site)], system=False)
    (f,) = [f for f in report.findings if f.rule == "missing-symbol"]
    assert (f.subject.symbol, f.subject.version) == ("new_call", "VDEP_2.0")
    assert f.reason.startswith("undefined symbol: new_call, version VDEP_2.0")


def test_the_matching_library_loads_in_both(tmp_path: Path) -> None:
    site = _build(tmp_path, "new")
    assert _real_error(site) == ""
    report = doctor_env([str(site)], system=False)
    assert report.errors == 0, report.findings
