"""program check on export directories around packages of real nvcc cubins and g++ wrappers."""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path

import pytest

from cudaship.errors import UsageError
from cudaship.program.check import check_program
from cudaship.program.records import CheckReport, outcome
from tests.program.builders import gxx_library, make_export_dir, make_pt2, make_wheel


@pytest.fixture
def package(tmp_path: Path, nvcc_build: Callable[[str], Path]) -> Path:
    wrapper = gxx_library(tmp_path / "lib", "wrapper")
    return make_pt2(tmp_path / "pkg.pt2", wrapper, [nvcc_build("cubin_sm90a")])


@pytest.fixture
def export_dir(tmp_path: Path, package: Path) -> Path:
    return make_export_dir(tmp_path / "export", package)


def status(report: CheckReport, name: str) -> str:
    return next(outcome(i) for i in report.items if i.name == name)


def message(report: CheckReport, name: str) -> str:
    return next(i.reason for i in report.items if i.name == name)


def test_matching_target_passes_with_arch_warning(export_dir: Path) -> None:
    report = check_program(export_dir, train="cu130", gpu="H200", driver="580.65.06")
    assert report.passed, report.items
    assert status(report, "train") == "pass"
    assert status(report, "arch") == "warn" and "exactly capability 9.0" in message(report, "arch")
    assert status(report, "driver") == "pass"
    assert report.counts == (6, 6)  # platform: skip (no runtime platform given)


@pytest.mark.parametrize(
    ("runtime", "same_major"),
    [pytest.param("cu132", True, id="cu132-same-major"), pytest.param("12.8", False, id="cu128-other-major")],
)
def test_train_mismatch_fails(export_dir: Path, runtime: str, same_major: bool) -> None:
    report = check_program(export_dir, train=runtime)
    assert not report.passed
    text = message(report, "train")
    assert "CUDA train is 13.0, from provenance.json (torch 2.11.0+cu130)" in text
    assert ("would not fail at load time by itself" in text) is same_major


@pytest.mark.parametrize(
    "gpu",
    [
        pytest.param("8.6", id="A10G-8.6"),
        pytest.param("RTX 5090", id="rtx5090-12.0"),
        pytest.param("10.0", id="B200"),
    ],
)
def test_wrong_gpu_fails(export_dir: Path, gpu: str) -> None:
    report = check_program(export_dir, gpu=gpu)
    assert status(report, "arch") == "fail"
    assert "sm_90a" in message(report, "arch")


def test_old_driver_fails(export_dir: Path) -> None:
    report = check_program(export_dir, gpu="9.0", driver="575.51.03")
    assert status(report, "driver") == "fail"


def test_missing_reference_fails(tmp_path: Path, package: Path) -> None:
    directory = make_export_dir(tmp_path / "noref", package, reference=False)
    report = check_program(directory, train="cu130")
    assert status(report, "reference") == "fail"


def test_corrupt_package_fails(export_dir: Path) -> None:
    pkg = export_dir / "model.pt2"
    pkg.write_bytes(pkg.read_bytes()[:-100])
    report = check_program(export_dir, train="cu130")
    assert status(report, "package") == "fail"
    assert status(report, "train") == "pass"  # every other check still ran


def test_static_libstdcxx_fails(tmp_path: Path, nvcc_build: Callable[[str], Path]) -> None:
    wrapper = gxx_library(tmp_path / "lib", "static", static_libstdcxx=True)
    pkg = make_pt2(tmp_path / "s.pt2", wrapper, [nvcc_build("cubin_sm90a")])
    report = check_program(make_export_dir(tmp_path / "e", pkg), train="cu130")
    assert status(report, "libstdc++") == "fail"
    assert "std::locale" in message(report, "libstdc++")


@pytest.mark.parametrize(
    ("tag", "platform_ok"),
    [
        pytest.param("win_amd64", False, id="windows-wheel"),
        pytest.param("manylinux_2_28_x86_64", True, id="linux"),
    ],
)
def test_wheel_gives_train_and_platform(
    export_dir: Path, tmp_path: Path, tag: str, platform_ok: bool
) -> None:
    wheel = make_wheel(tmp_path, "1.6.0+cu132", tag)
    report = check_program(export_dir, wheel=wheel)
    assert report.target.train == "13.2"
    assert status(report, "train") == "fail"
    assert (status(report, "platform") == "pass") is platform_ok


def test_wheel_without_train_is_usage_error(export_dir: Path, tmp_path: Path) -> None:
    wheel = make_wheel(tmp_path, "1.6.0", "win_amd64")
    with pytest.raises(UsageError, match="carries no CUDA train"):
        check_program(export_dir, wheel=wheel)


def test_no_provenance(tmp_path: Path, package: Path) -> None:
    directory = tmp_path / "bare"
    directory.mkdir()
    (directory / "model.pt2").write_bytes(package.read_bytes())
    report = check_program(directory, gpu="9.0", train="cu130")
    assert status(report, "provenance") == "fail"
    assert status(report, "train") == "fail"  # the train cannot be shown without provenance
    assert status(report, "arch") == "warn"  # the package itself still checks


@pytest.fixture
def windows_export(
    tmp_path: Path, nvcc_build: Callable[[str], Path], mingw_build: Callable[[str], Path]
) -> Path:
    """A program compiled for Windows (as ExecuTorch's Linux-to-Windows route makes): a real mingw DLL that
    imports cudart64_13.dll, beside a real sm_90a cubin."""
    metadata = {"AOTI_DEVICE_KEY": "cuda", "AOTI_PLATFORM": "windows", "AOTI_MACHINE": "x86_64"}
    pkg = make_pt2(
        tmp_path / "win.pt2", mingw_build("cuda_consumer.dll"), [nvcc_build("cubin_sm90a")], metadata
    )
    return make_export_dir(tmp_path / "win", pkg, platform="windows-x86_64")


@pytest.mark.parametrize(
    ("tag", "version", "passed"),
    [
        pytest.param("win_amd64", "1.6.0+cu130", True, id="windows-cu130-wheel"),
        pytest.param("win_amd64", "1.6.0+cu134", False, id="windows-cu134-wheel"),
        pytest.param("manylinux_2_28_x86_64", "1.6.0+cu130", False, id="linux-wheel"),
    ],
)
def test_windows_program_against_wheels(
    windows_export: Path, tmp_path: Path, tag: str, version: str, passed: bool
) -> None:
    from cudaship.inspection.program import read_program

    info = read_program(windows_export)
    assert (info.platform, info.cudart_majors) == ("windows", (13,))
    report = check_program(windows_export, wheel=make_wheel(tmp_path, version, tag), gpu="9.0")
    assert report.passed is passed, report.items


# --- issue 32, class 15


def test_a_gpu_named_is_echoed_as_named(export_dir: Path) -> None:
    report = check_program(export_dir, gpu="RTX 3090")
    assert report.target.gpu == "RTX 3090 (8.6 Ampere)"
    assert "does not run on RTX 3090 (8.6 Ampere)" in message(report, "arch")
    assert "A10G" not in message(report, "arch")
    # a capability given as a number names no GPU: its group's names
    assert check_program(export_dir, gpu="8.6").target.gpu == "8.6 Ampere (A10G, A10)"


def test_the_audit_of_an_arch_specific_program_says_where_it_does_not_run(package: Path) -> None:
    """sm_90a alone: the audit's coverage agrees with gpus (no on every row but 9.0), a warning."""
    from cudaship.analysis.gpus import gpu_report
    from cudaship.checks.engine import audit_wheels
    from cudaship.checks.table import default_policy
    from cudaship.inspection.walk import inspect_paths
    from cudaship.records.findings import Severity, Status

    report = audit_wheels([package], default_policy())
    (coverage,) = [c for c in report.checks if c.rule == "coverage"]
    assert (coverage.status, coverage.severity) == (Status.FAIL, Severity.WARNING), coverage
    assert "the program runs on 9.0 alone" in coverage.reason
    denied = {f.arch for f in coverage.evidence}
    gpus = gpu_report(inspect_paths([str(package)]))
    no_rows = {cv.capability.capability for cv in gpus.overall.verdicts if not cv.verdict.runs}
    assert denied and denied <= no_rows and "9.0" not in denied


def test_here_knows_the_platform_and_the_installed_runtimes_train(tmp_path: Path) -> None:
    """What --here adds besides the GPU (read without a GPU): this machine's platform, and the train of the
    runtime installed here, from its dist-info (never imported)."""
    import platform as _platform
    import sys

    from cudaship.program.check import installed_runtime, this_platform

    if sys.platform.startswith("linux") and _platform.machine() == "x86_64":
        assert this_platform() == "linux-x86_64"
    site = tmp_path / "site"
    dist = site / "torch-2.11.0+cu130.dist-info"
    dist.mkdir(parents=True)
    (dist / "METADATA").write_text("Metadata-Version: 2.1\nName: torch\nVersion: 2.11.0+cu130\n")
    assert installed_runtime("pt2", [str(site)]) == ("torch 2.11.0+cu130", "13.0")
    (dist / "METADATA").write_text("Metadata-Version: 2.1\nName: torch\nVersion: 2.11.0+cpu\n")
    assert installed_runtime("pt2", [str(site)]) == ("torch 2.11.0+cpu", None)
    assert installed_runtime("pte", [str(site)]) is None  # no executorch there


def test_check_here_decides_platform_and_train_end_to_end(
    export_dir: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Issue 32, class 15, through check_program on a package of a real nvcc cubin: --here alone decides the
    GPU, the platform (this machine's) and the train (the installed torch's +cu130), so no item is skipped
    for want of them. Only the driver API's answer is stood in for (no GPU on this machine); the GPU-only
    round trip (tests/program/test_gpu_roundtrip.py) asks the real one."""
    import platform as _platform
    import sys

    import cudaship.program.check as check

    if not (sys.platform.startswith("linux") and _platform.machine() == "x86_64"):
        pytest.skip("the package is a linux-x86_64 program")
    monkeypatch.setattr(check, "device_facts", lambda: {"capability": "9.0", "gpu": "NVIDIA H100 80GB HBM3"})
    monkeypatch.setattr(check, "driver_version", lambda: "580.159.04")
    site = tmp_path / "site"
    dist = site / "torch-2.11.0+cu130.dist-info"
    dist.mkdir(parents=True)
    (dist / "METADATA").write_text("Metadata-Version: 2.1\nName: torch\nVersion: 2.11.0+cu130\n")
    monkeypatch.syspath_prepend(str(site))
    report = check_program(export_dir, here=True)
    assert report.target.platform == "linux-x86_64"
    assert report.target.train == "13.0" and report.target.runtime == "torch 2.11.0+cu130"
    assert status(report, "platform") != "skip", message(report, "platform")
    assert status(report, "train") != "skip", message(report, "train")
    assert status(report, "arch") != "skip" and "NVIDIA H100" in message(report, "arch")
