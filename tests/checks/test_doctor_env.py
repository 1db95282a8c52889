"""doctor --env's device-code part and its no-GPU path, on a real environment (bitsandbytes 0.50.2 unpacked
from its PyPI wheel: seven CUDA variants with SASS from sm_60 to sm_120) with the GPUs given as records."""

from __future__ import annotations

from pathlib import Path

import pytest

from cudaship.analysis.loader import How
from cudaship.checks.environment import doctor_env
from cudaship.knowledge.archs import parse_arch
from cudaship.knowledge.driver import parse_driver
from cudaship.probe.records import GpuInfo, ProbeResult
from cudaship.records.findings import Severity
from tests.fixtures.envs import build_env
from tests.fixtures.wheels import WHEELS

pytestmark = pytest.mark.network


@pytest.fixture(scope="module")
def bnb_env() -> Path:
    return build_env("bitsandbytes-0.50.2", (WHEELS["bitsandbytes_linux_wheel"],))


def _probe(capability: str) -> ProbeResult:
    gpu = GpuInfo(0, "a test GPU", parse_arch(capability), None, None)
    return ProbeResult(driver=parse_driver("595.45.04"), gpus=(gpu,), sources=("test",))


def test_device_code_that_does_not_run_on_the_gpu_here_is_an_error(bnb_env: Path) -> None:
    report = doctor_env([str(bnb_env)], system=False, probe=_probe("sm_37"))
    device = [f for f in report.findings if f.rule == "device-code"]
    assert len(report.gpu.checked) == 7  # the seven CUDA variants carry device code; the CPU/ROCm ones none
    assert {Path(f.subject.file or "").name for f in device} == {Path(p).name for p, _ in report.gpu.checked}
    assert all(
        f.severity is Severity.ERROR and f.subject.distribution == "bitsandbytes 0.50.2" for f in device
    )
    assert all("compute capability 3.7" in f.reason for f in device)
    assert report.errors == len(device)


def test_a_gpu_the_code_serves_and_no_gpu_give_no_device_finding(bnb_env: Path) -> None:
    served = doctor_env([str(bnb_env)], system=False, probe=_probe("sm_90"))
    assert not [f for f in served.findings if f.rule == "device-code"]
    assert len(served.gpu.checked) == 7
    none = doctor_env([str(bnb_env)], system=False, probe=None, no_gpu="no NVIDIA driver on this machine")
    assert none.gpu.checked == () and "no NVIDIA driver" in (none.gpu.note or "")
    # the loader part is the same with or without a GPU
    loader_findings = [(f.rule, f.subject.file, f.subject.library) for f in none.findings]
    assert loader_findings == [(f.rule, f.subject.file, f.subject.library) for f in served.findings]
    # the variants are loaded by path at run time, not on import: their missing CUDA libraries are warnings
    assert none.errors == 0
    assert {f.rule for f in none.findings} == {"unresolved"}


def test_cupy_finds_its_cuda_libraries_at_run_time(cupy_nvrtc_env: Path) -> None:
    """cupy's extension modules name libnvrtc.so.12 without a search path; cupy loads it through
    cuda-pathfinder from the nvidia/ wheel, so it resolves; what no wheel installs stays an error that says
    how cupy looks."""
    report = doctor_env([str(cupy_nvrtc_env)], system=False)
    (nvrtc,) = [e for e in report.graph.edges if e.name == "libnvrtc.so.12"]
    assert nvrtc.how is How.RUNTIME and (nvrtc.target or "").endswith("nvidia/cuda_nvrtc/lib/libnvrtc.so.12")
    unresolved = {f.subject.library: f for f in report.findings if f.rule == "unresolved"}
    assert "libnvrtc.so.12" not in unresolved
    # cuBLAS comes with cupy's [ctk] extra, not installed here: an optional component (issue 32, class 13)
    assert unresolved["libcublas.so.12"].severity is Severity.NOTE
    assert "cuda-pathfinder" in unresolved["libcublas.so.12"].reason


def test_cupy_optional_components_one_severity_with_the_audit(
    cupy_nvrtc_env: Path, cupy_linux_wheel: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """Issue 32, class 13: doctor --env said "WILL NOT LOAD: 6 errors" for cupy's components that only its
    [ctk] extra installs, where the audit of the same wheel calls them notes. One mechanism, one severity:
    each is a note naming the extra, in both, and the environment loads."""
    import json

    from cudaship.cli.main import main
    from cudaship.records.judgement import Met, severity

    report = doctor_env([str(cupy_nvrtc_env)], system=False)
    assert not [f for f in report.findings if f.severity is Severity.ERROR]
    extra = {f.subject.library: f for f in report.findings if "cupy-cuda12x[ctk]" in f.reason}
    assert {"libcublas.so.12", "libcufft.so.11", "libcurand.so.10", "libcusolver.so.11"} <= set(extra)
    assert main(["audit", str(cupy_linux_wheel), "-f", "json"]) == 0
    imports = json.loads(capsys.readouterr().out)["wheels"][0]["imports"]
    audit_met = {i["library"]: Met(i["met"]) for i in imports if i["library"] in extra}
    for library, finding in extra.items():
        assert finding.severity is severity(audit_met[library]), library


def test_variants_for_another_environment_are_notes_as_in_the_audit(
    torch_cu12_env: Path, bnb_env: Path, bitsandbytes_linux_wheel: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """Issue 32, class 13: bitsandbytes beside a CUDA 12 torch: its _cuda12x variants load, the _cuda118 and
    _cuda13x ones do not (their CUDA libraries are another environment's). doctor --env said 9 warnings;
    the audit calls the same imports variants, notes. One mechanism, one severity."""
    import json

    from cudaship.cli.main import main
    from cudaship.records.judgement import Met, severity

    report = doctor_env([str(torch_cu12_env), str(bnb_env)], system=False)
    variants = [f for f in report.findings if "libbitsandbytes_cuda1" in (f.subject.file or "")]
    assert {f.subject.file.rsplit("/", 1)[-1] for f in variants if f.subject.file} >= {
        "libbitsandbytes_cuda118.so",
        "libbitsandbytes_cuda130.so",
    }
    assert {f.severity for f in variants} == {Severity.NOTE}
    assert all("for another environment" in f.reason for f in variants)
    assert main(["audit", str(bitsandbytes_linux_wheel), "-f", "json"]) == 0
    imports = json.loads(capsys.readouterr().out)["wheels"][0]["imports"]
    (cublas11,) = {i["met"] for i in imports if i["library"] == "libcublas.so.11"}
    assert severity(Met(cublas11)) is Severity.NOTE
