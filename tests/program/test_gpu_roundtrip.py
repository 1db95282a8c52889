"""The GPU round trip: export on this GPU, check against it and against others, run, match eager.

Runs only where torch sees a CUDA GPU (marked ``gpu``; CI has none). On the H200 through the device tool it
was run as ``pytest -m gpu tests/program`` (docs/program.md has the results).
"""

from __future__ import annotations

import json
import os
import shutil
from collections.abc import Iterator
from pathlib import Path

import pytest

from cudaship.cli.main import main
from tests.program.conftest import torch_gpu

pytestmark = [
    pytest.mark.gpu,
    pytest.mark.slow,
    pytest.mark.filterwarnings("ignore::UserWarning", "ignore::FutureWarning", "ignore::DeprecationWarning"),
]


@pytest.fixture(scope="module")
def gpu_export(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Path]:
    if not torch_gpu():
        pytest.skip("no CUDA GPU visible to torch")
    reuse = os.environ.get("CUDASHIP_TEST_GPU_EXPORT")
    if reuse:  # an export the CLI made on this GPU in the same session (a cold export takes ~70 s)
        yield Path(reuse)
        return
    out = tmp_path_factory.mktemp("gpu-export") / "demo"
    cxx = shutil.which("g++", path="/usr/bin") or "g++"
    # inductor compiles in this process: its pool of compile workers (torch's SubprocPool: a subprocess, its
    # two pipes and an os.devnull log file, kept for the life of the process) would outlive the session and
    # fail the open-files check of tests/conftest.py (seen on the H200: 4 passed, 1 error at teardown)
    before = os.environ.get("TORCHINDUCTOR_COMPILE_THREADS")
    os.environ["TORCHINDUCTOR_COMPILE_THREADS"] = "1"
    try:
        argv = ["program", "export", "demo-mlp", "--out", str(out), "--device", "cuda", "--cxx", cxx]
        assert main(argv) == 0
    finally:
        if before is None:
            del os.environ["TORCHINDUCTOR_COMPILE_THREADS"]
        else:
            os.environ["TORCHINDUCTOR_COMPILE_THREADS"] = before
    yield out
    # a pool started anyway (inductor's config read before the variable was set) is shut down here
    from torch._inductor.async_compile import shutdown_compile_workers

    shutdown_compile_workers()


def _here() -> tuple[str, str]:
    import torch

    major, minor = torch.cuda.get_device_capability(0)
    return f"{major}.{minor}", str(torch.version.cuda)


def test_export_records_arch_and_train(gpu_export: Path) -> None:
    prov = json.loads((gpu_export / "provenance.json").read_text())
    capability, cuda = _here()
    assert prov["cuda_train"] == cuda
    assert prov["gpu_capability"] == capability
    assert prov["device_code_archs"], "a CUDA export carries device code"


def test_check_here_passes(gpu_export: Path, capsys: pytest.CaptureFixture[str]) -> None:
    _, cuda = _here()
    assert main(["program", "check", str(gpu_export), "--here", "--train", cuda]) == 0, (
        capsys.readouterr().out
    )


def test_check_here_alone_decides_platform_and_train(gpu_export: Path) -> None:
    """Issue 32, class 15: --here knows this machine's platform and the installed torch's train."""
    from cudaship.program.check import check_program

    report = check_program(gpu_export, here=True)
    by_name = {i.name: i for i in report.items}
    assert by_name["platform"].status.value == "pass", by_name["platform"].reason
    assert by_name["train"].status.value == "pass", by_name["train"].reason
    assert "installed here" in by_name["train"].reason


def test_check_wrong_gpu_fails(gpu_export: Path, capsys: pytest.CaptureFixture[str]) -> None:
    capability, _ = _here()
    other = "8.6" if capability != "8.6" else "9.0"
    assert main(["program", "check", str(gpu_export), "--gpu", other]) == 1
    assert "does not run on" in capsys.readouterr().out


def test_run_matches_eager(gpu_export: Path, tmp_path: Path) -> None:
    out = tmp_path / "run.json"
    code = main(
        ["program", "run", str(gpu_export), "--non-ascii", "--runs", "30", "--format", "json", "-o", str(out)]
    )
    report = json.loads(out.read_text())
    assert code == 0, report
    assert report["max_abs_diff"] <= 1e-3
    assert report["latency_ms"] > 0 and report["eager_latency_ms"] > 0
    assert report["environment"]["compiler_on_path"] is None
