"""program run on CPU exports made in the session: a fresh process, no compiler on PATH, crashes reported."""

from __future__ import annotations

import json
import os
import zipfile
from pathlib import Path

import pytest

from cudaship.errors import ProgramError
from cudaship.hashing import sha256_file
from cudaship.inspection.provenance import PROVENANCE_FILE
from cudaship.program import runner_child
from cudaship.program.run import NON_ASCII_DIR, compiler_free_path, run_program
from tests.program.builders import gxx_library

pytestmark = [
    pytest.mark.slow,
    pytest.mark.filterwarnings("ignore::UserWarning", "ignore::FutureWarning", "ignore::DeprecationWarning"),
]


def test_compiler_free_path_drops_compiler_dirs() -> None:
    path = compiler_free_path()
    import shutil

    assert all(shutil.which(c, path=path) is None for c in runner_child.COMPILERS)


@pytest.mark.parametrize("non_ascii", [True, False], ids=["non-ascii-dir", "ascii-dir"])
def test_cpu_run_matches_reference(cpu_export: Path, non_ascii: bool) -> None:
    report = run_program(cpu_export, runs=5, non_ascii=non_ascii)
    assert report.ok, report.failure
    assert report.max_abs_diff is not None and report.max_abs_diff <= 1e-3
    assert report.latency_ms is not None and report.eager_latency_ms is not None
    assert report.load_s is not None and report.load_s > 0
    assert (NON_ASCII_DIR in report.run_directory) is non_ascii
    assert report.environment is not None and report.environment.compiler_on_path is None


def test_zero_tolerance_still_compares(cpu_export: Path) -> None:
    report = run_program(cpu_export, runs=1, tolerance=0.0)
    assert report.max_abs_diff is not None
    assert report.ok is (report.max_abs_diff == 0.0)


def test_missing_reference(cpu_export_copy: Path) -> None:
    (cpu_export_copy / "reference.pt").unlink()
    with pytest.raises(ProgramError, match="no reference data"):
        run_program(cpu_export_copy)


def test_changed_package(cpu_export_copy: Path) -> None:
    with (cpu_export_copy / "model.pt2").open("ab") as f:
        f.write(b"\0")
    with pytest.raises(ProgramError, match="does not match the sha256"):
        run_program(cpu_export_copy)


def test_loader_crash_is_a_clean_failure(cpu_export_copy: Path, tmp_path: Path) -> None:
    """The wrapper replaced by a library that dies with SIGSEGV when loaded: the run reports the signal."""
    crasher = gxx_library(tmp_path / "lib", "crash", crash_on_load=True)
    package = cpu_export_copy / "model.pt2"
    rebuilt = tmp_path / "rebuilt.pt2"
    with zipfile.ZipFile(package) as src, zipfile.ZipFile(rebuilt, "w") as dst:
        for info in src.infolist():
            data = crasher.read_bytes() if info.filename.endswith(".wrapper.so") else src.read(info)
            dst.writestr(info, data)
    os.replace(rebuilt, package)
    prov_file = cpu_export_copy / PROVENANCE_FILE
    prov = json.loads(prov_file.read_text())
    prov["package_sha256"] = sha256_file(package)
    prov_file.write_text(json.dumps(prov))
    report = run_program(cpu_export_copy, runs=1)
    assert not report.ok
    assert report.signal == "SIGSEGV"
    assert report.failure is not None and "stage 'load'" in report.failure
    assert report.environment is not None and report.environment.torch
