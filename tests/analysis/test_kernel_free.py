"""Device code that holds no kernel restricts no GPU (issue 21, class 7), on real binaries: the nvcc builds
with no ``__global__`` (``device_data``: SASS sm_75 only, like libcufftw) and nvidia-cufft 12.0.0.61's
``libcufftw.so.12``, whose only cubin (sm_75) made ``doctor`` on an H200 say it "will not run on 9.0"."""

from __future__ import annotations

import json
from collections.abc import Callable
from pathlib import Path

import pytest

from cudaship.analysis.gpus import file_verdicts
from cudaship.checks.environment import doctor_env
from cudaship.cli.main import main
from cudaship.inspection.walk import inspect_file
from cudaship.knowledge.archs import parse_arch
from cudaship.knowledge.driver import parse_driver
from cudaship.knowledge.runs_on import VerdictKind, kernel_free, runs_on
from cudaship.probe.records import GpuInfo, ProbeResult
from cudaship.records.binary import DeviceCodeKind
from tests.fixtures.envs import build_env
from tests.fixtures.wheels import WHEELS

Build = Callable[[str], Path]
H200 = ProbeResult(
    driver=parse_driver("580.95.05"),
    gpus=(GpuInfo(0, "NVIDIA H200", parse_arch("9.0"), 141 * 2**30, True),),
    sources=("test",),
)


def test_inspect_reads_how_many_kernels_each_arch_holds(nvcc_build: Build) -> None:
    # device_data: ptxas' cubin (its __device__/__constant__ data) and nvlink's, both sm_75, neither a kernel
    empty = inspect_file(nvcc_build("device_data"), "libdevice_data.so").device_code
    assert [(e.kind, e.arch, e.kernels) for e in empty] == [(DeviceCodeKind.SASS, "sm_75", 0)] * 2
    assert kernel_free(empty) == "SASS sm_75 holds no kernel"
    # many_kernels: per arch, nvlink's empty cubin first, then ptxas' with the eight kernels; the sample reads
    # until it finds one holding a kernel, and no further
    full = inspect_file(nvcc_build("many_kernels"), "libmany_kernels.so").device_code
    assert sorted((e.arch, e.kernels) for e in full) == [
        ("sm_80", 0),
        ("sm_80", 8),
        ("sm_90", 0),
        ("sm_90", 8),
    ]
    assert kernel_free(full) is None
    # an arch with a kernel somewhere still counts: sm_80 runs natively on 8.6
    assert runs_on(full, "8.6").verdict is VerdictKind.NATIVE


def test_kernel_free_code_runs_on_every_gpu(nvcc_build: Build) -> None:
    report = inspect_file(nvcc_build("device_data"), "libdevice_data.so")
    for capability in ("7.5", "9.0", "12.0"):
        verdict = runs_on(report.device_code, capability, parse_driver("580.95.05"))
        assert verdict.verdict is VerdictKind.NATIVE and verdict.entry is None
        assert verdict.reason == "SASS sm_75 holds no kernel: nothing to launch, so it restricts no GPU"
    verdicts = file_verdicts(report, [parse_arch("9.0")])
    assert verdicts.verdicts == () and not verdicts.has_device_code
    assert verdicts.no_kernels == "SASS sm_75 holds no kernel"


def test_gpus_and_doctor_say_why(
    nvcc_build: Build, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    lib = str(nvcc_build("device_data"))
    assert main(["gpus", lib, str(nvcc_build("multi_arch"))]) == 0
    out = capsys.readouterr().out
    assert "1 file whose device code holds no kernel (it does not limit the GPUs):" in out
    assert f"{lib}: SASS sm_75 holds no kernel, nothing to launch" in out
    monkeypatch.setattr("cudaship.cli.doctor_cmd.probe", lambda: H200)
    assert main(["doctor", lib]) == 0
    out = capsys.readouterr().out
    assert "SASS sm_75 holds no kernel: nothing to launch, so it restricts no GPU" in out
    assert main(["doctor", "--format", "json", lib]) == 0
    (item,) = json.loads(capsys.readouterr().out)["files"]
    assert (item["no_kernels"], item["gpus"]) == ("SASS sm_75 holds no kernel", [])
    assert main(["inspect", "--format", "json", lib]) == 0
    entries = json.loads(capsys.readouterr().out)["files"][0]["device_code"]
    assert [(e["arch"], e["kernels"]) for e in entries] == [("sm_75", 0)] * 2


@pytest.mark.network
@pytest.mark.slow
def test_libcufftw_restricts_no_gpu(
    cufft_linux_wheel: Path, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    """The H200 case: doctor exits 0 for libcufftw.so.12; doctor --env gives no device-code error; the
    wheel's audit has no forward-PTX warning for it."""
    site = build_env("nvidia-cufft-12.0.0.61", (WHEELS["cufft_linux_wheel"],))
    cufftw = site / "nvidia" / "cu13" / "lib" / "libcufftw.so.12"
    monkeypatch.setattr("cudaship.cli.doctor_cmd.probe", lambda: H200)
    assert main(["doctor", str(cufftw)]) == 0
    assert "SASS sm_75 holds no kernel" in capsys.readouterr().out
    report = doctor_env([str(site)], system=False, probe=H200)
    assert not [f for f in report.findings if f.rule == "device-code"]
    checked = {Path(path).name: verdicts for path, verdicts in report.gpu.checked}
    assert checked["libcufftw.so.12"].no_kernels == "SASS sm_75 holds no kernel"
    assert [cv.verdict.verdict for cv in checked["libcufft.so.12"].verdicts] == [VerdictKind.NATIVE]
    assert main(["audit", "--format", "json", str(cufft_linux_wheel)]) == 0
    checks = {c["name"]: c for c in json.loads(capsys.readouterr().out)["checks"]}
    assert "archs: forward-compatible PTX in nvidia/cu13/lib/libcufftw.so.12" not in checks
    assert checks["archs: nvidia/cu13/lib/libcufftw.so.12"]["status"] == "pass"
    assert checks["consistency: CUDA train"]["status"] == "pass"
