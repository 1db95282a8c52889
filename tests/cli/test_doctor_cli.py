"""``cudaship doctor``: the no-GPU path is clean everywhere; on a GPU machine the probe and verdicts agree."""

from __future__ import annotations

import ctypes
import json
from collections.abc import Callable
from pathlib import Path

import pytest

from cudaship.cli.main import main
from cudaship.exitcodes import ExitCode
from cudaship.inspection.walk import inspect_file
from cudaship.knowledge.archs import parse_arch
from cudaship.knowledge.driver import parse_driver
from cudaship.knowledge.runs_on import runs_on
from cudaship.probe.gpus import DRIVER_LIBRARIES
from cudaship.probe.records import GpuInfo, ProbeResult


def _driver_loadable() -> bool:
    for name in DRIVER_LIBRARIES:
        try:
            ctypes.CDLL(name)
            return True
        except OSError:
            continue
    return False


HAS_DRIVER = _driver_loadable()
needs_gpu = pytest.mark.skipif(not HAS_DRIVER, reason="no NVIDIA driver on this machine")


def run(capsys: pytest.CaptureFixture[str], *argv: str) -> tuple[int, str, str]:
    code = main(list(argv))
    out, err = capsys.readouterr()
    return code, out, err


@pytest.fixture(autouse=True)
def _no_override(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv("CUDASHIP_LIBCUDA", raising=False)


@pytest.mark.parametrize("argv", [[], ["some.so"]], ids=["plain", "with-path"])
def test_json_without_a_driver_is_the_report_saying_so(
    capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch, tmp_path: Path, argv: list[str]
) -> None:
    """``doctor -f json`` with no driver writes the JSON report, the driver's absence its fact (issue 35: it
    wrote nothing), then the same line on stderr and exit 3; a driver library that is not there stands for a
    machine without one, whether or not this one has a driver."""
    monkeypatch.setenv("CUDASHIP_LIBCUDA", str(tmp_path / "libcuda.so.1"))
    for output in (None, tmp_path / "d.json"):
        where = ["-o", str(output)] if output else []
        code, out, err = run(capsys, "doctor", "--format", "json", *where, *argv)
        assert code == ExitCode.NO_GPU == 3
        doc = json.loads(output.read_text() if output else out)
        assert doc["no_gpu"] == f"no NVIDIA driver on this machine: cannot load {tmp_path / 'libcuda.so.1'}"
        assert doc["schema"] == 1 and doc["gpus"] == [] and doc["files"] == []
        assert doc["driver"] == {"version": None, "cuda": None, "sources": []}
        assert err == f"cudaship: error: {doc['no_gpu']}\n"
        assert (out == "") == (output is not None)


@pytest.mark.skipif(HAS_DRIVER, reason="this machine has an NVIDIA driver")
@pytest.mark.parametrize("argv", [[], ["some.so"]], ids=["plain", "with-path"])
def test_no_driver_is_one_line_and_exit_3(capsys: pytest.CaptureFixture[str], argv: list[str]) -> None:
    code, out, err = run(capsys, "doctor", *argv)
    assert code == ExitCode.NO_GPU == 3
    assert out == ""
    assert err.count("\n") == 1
    assert err.startswith("cudaship: error: no NVIDIA driver on this machine: cannot load libcuda.so.1")


@pytest.mark.parametrize(
    ("library", "message"),
    [
        ("/nonexistent/libcuda.so.1", "cannot load /nonexistent/libcuda.so.1"),
        ("libm.so.6", "libm.so.6 is not a CUDA driver library (no cuInit)"),
    ],
    ids=["missing", "not-a-driver"],
)
def test_bad_driver_library(
    capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch, library: str, message: str
) -> None:
    """CUDASHIP_LIBCUDA points the probe at a library: a missing or wrong one is one line, exit 3."""
    monkeypatch.setenv("CUDASHIP_LIBCUDA", library)
    code, out, err = run(capsys, "doctor")
    assert (code, out) == (3, "")
    assert message in err and err.count("\n") == 1


@pytest.mark.gpu
@needs_gpu
def test_doctor_on_this_gpu(capsys: pytest.CaptureFixture[str], tmp_path: Path) -> None:
    code, out, err = run(capsys, "doctor", "--format", "json", "-o", str(tmp_path / "d.json"))
    assert code in (0, 1), err
    doc = json.loads((tmp_path / "d.json").read_text())
    assert doc["schema"] == 1 and doc["gpus"]
    for gpu in doc["gpus"]:
        assert gpu["name"] and gpu["capability"].count(".") == 1
        assert gpu["memory_pools"] in (True, False, None)
    assert doc["driver"]["cuda"] is not None
    code, out, _ = run(capsys, "doctor")
    assert "GPU 0:" in out and "compute capability" in out and "memory pools:" in out


@pytest.mark.gpu
@needs_gpu
def test_doctor_verdicts_follow_the_rule(
    capsys: pytest.CaptureFixture[str], nvcc_build: Callable[[str], Path]
) -> None:
    """Each nvcc-built library's verdict on this GPU is what runs_on decides for its capability and driver."""
    from cudaship.probe.gpus import probe

    result = probe()
    libs = [nvcc_build(name) for name in ("multi_arch", "arch_specific", "family_specific", "ptx_only")]
    code, out, _ = run(capsys, "doctor", "--format", "json", *map(str, libs))
    doc = json.loads(out)
    assert code == (1 if any(g["verdict"] == "no" for f in doc["files"] for g in f["gpus"]) else 0)
    for lib, item in zip(libs, doc["files"], strict=True):
        entries = inspect_file(lib, str(lib)).device_code
        for gpu, shown in zip(result.gpus, item["gpus"], strict=True):
            expected = runs_on(entries, gpu.capability, result.driver)
            assert shown["verdict"] == expected.verdict.value
            assert shown["reason"] == expected.reason


def _machine(*gpus: tuple[str, str, bool | None]) -> ProbeResult:
    """A machine as the probe describes it (the probe itself is tested on a GPU machine above)."""
    return ProbeResult(
        driver=parse_driver("595.45.04"),
        gpus=tuple(
            GpuInfo(i, name, parse_arch(cap), 24 * 2**30, pools) for i, (name, cap, pools) in enumerate(gpus)
        ),
        sources=("cuda-driver-api (libcuda.so.1)", "nvml (libnvidia-ml.so.1)"),
    )


def test_doctor_report_on_a_described_machine(
    capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch, nvcc_build: Callable[[str], Path]
) -> None:
    """What doctor prints and decides for a machine with an A10G (no memory pools) and an H100."""
    machine = _machine(("NVIDIA A10G", "8.6", False), ("NVIDIA H100 80GB HBM3", "9.0", True))
    monkeypatch.setattr("cudaship.cli.doctor_cmd.probe", lambda: machine)
    lib = nvcc_build("arch_specific")  # sm_90a sm_100a sm_120a + compute_120a: nothing for 8.6
    code, out, err = run(capsys, "doctor", str(lib))
    assert (code, err) == (1, "")
    assert "driver: 595.45.04, supports CUDA 13.2 and older" in out
    assert (
        "GPU 0: NVIDIA A10G, compute capability 8.6 (Ampere), 24.0 GiB, memory pools: no (cudaMallocAsync"
        in out
    )
    assert "GPU 1: NVIDIA H100 80GB HBM3, compute capability 9.0 (Hopper), 24.0 GiB, memory pools: yes" in out
    assert "GPU 0 (8.6): WILL NOT RUN: sm_90a runs only on 9.0" in out
    assert "GPU 1 (9.0): runs natively: sm_90a (built for it)" in out
    code, out, _ = run(capsys, "doctor", "--format", "json", str(lib), str(nvcc_build("multi_arch")))
    doc = json.loads(out)
    assert code == 1
    assert [g["memory_pools"] for g in doc["gpus"]] == [False, True]
    assert [[g["verdict"] for g in f["gpus"]] for f in doc["files"]] == [
        ["no", "native"],
        ["native", "native"],
    ]


def test_doctor_runs_everywhere_and_unreadable(
    capsys: pytest.CaptureFixture[str],
    monkeypatch: pytest.MonkeyPatch,
    nvcc_build: Callable[[str], Path],
    tmp_path: Path,
) -> None:
    monkeypatch.setattr("cudaship.cli.doctor_cmd.probe", lambda: _machine(("NVIDIA L4", "8.9", True)))
    code, out, _ = run(capsys, "doctor", str(nvcc_build("multi_arch")))
    assert code == 0 and "runs natively: sm_89" in out
    empty = tmp_path / "libempty.so"
    empty.write_bytes(b"")
    code, out, err = run(capsys, "doctor", str(empty))
    assert code == 2 and "cannot read" in out and err.count("\n") == 1


def test_doctor_environment_scan_on_a_described_machine(
    capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    """Without PATH: this Python's packages (none carries device code here, or each gets a verdict)."""
    monkeypatch.setattr("cudaship.cli.doctor_cmd.probe", lambda: _machine(("NVIDIA L4", "8.9", True)))
    code, out, _ = run(capsys, "doctor")
    assert code in (0, 1)
    assert "native files" in out
