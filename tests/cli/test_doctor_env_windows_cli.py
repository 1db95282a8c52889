"""``doctor --env`` on a Windows environment read from this (Linux) machine: PyPI's torch 2.10.0 for Windows
(the CPU build), then xformers 0.0.34 (built for a CUDA torch) added to it."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

from cudaship.cli.main import main

pytestmark = [pytest.mark.network, pytest.mark.slow]


@pytest.fixture(autouse=True)
def _no_gpu(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    monkeypatch.setenv("CUDASHIP_LIBCUDA", str(tmp_path / "no-libcuda.so"))


def _run(capsys: pytest.CaptureFixture[str], site: Path) -> tuple[int, dict[str, Any]]:
    code = main(["doctor", "--env", str(site), "--format", "json"])
    return code, json.loads(capsys.readouterr().out)


def test_torch_for_windows_loads(capsys: pytest.CaptureFixture[str], torch_windows_cpu_env: Path) -> None:
    code, doc = _run(capsys, torch_windows_cpu_env)
    assert doc["environment"]["os"] == "windows" and doc["loader"]["os"] == "windows"
    assert doc["loader"]["dll_directories"] == [f"{torch_windows_cpu_env.resolve().as_posix()}/torch/lib"]
    assert doc["summary"]["error"] == 0, doc["findings"]
    assert code == 0
    c = [lib for lib in doc["libraries"] if lib["path"].endswith("torch/_C.cp312-win_amd64.pyd")]
    assert c, "torch's extension module is read"
    imports = {i["name"].lower(): i for i in c[0]["imports"]}
    assert imports["torch_python.dll"]["how"] in ("os.add_dll_directory", "already loaded")
    assert imports["torch_python.dll"]["distribution"] == "torch 2.10.0"
    assert imports["kernel32.dll"]["provider"] == "system"


def test_a_cuda_xformers_on_cpu_torch_does_not_load(
    capsys: pytest.CaptureFixture[str], torch_windows_cpu_xformers_env: Path
) -> None:
    code, doc = _run(capsys, torch_windows_cpu_xformers_env)
    assert code == 1
    missing = {(Path(f["file"]).name, f["library"]) for f in doc["findings"] if f["rule"] == "unresolved"}
    assert ("_C.pyd", "torch_cuda.dll") in missing
    assert ("_C.pyd", "cudart64_12.dll") in missing
    (xf,) = [lib for lib in doc["libraries"] if lib["path"].endswith("xformers/_C.pyd")]
    cpu = next(i for i in xf["imports"] if i["name"].lower() == "torch_cpu.dll")
    # loaded by torch first, or found in the directory torch adds with os.add_dll_directory
    assert cpu["distribution"] == "torch 2.10.0"
    assert not [f for f in doc["findings"] if f["rule"] == "duplicate"]  # two _C.pyd by path are no conflict


def test_a_dll_only_on_path_is_not_found_by_python(
    capsys: pytest.CaptureFixture[str], torch_windows_cpu_xformers_env: Path, tmp_path: Path
) -> None:
    """cudart64_12.dll in a PATH directory (nvidia-cuda-runtime-cu12 12.9.79's bin/): Python 3.8+'s safe DLL
    search does not read PATH, so both xformers modules still fail, and the report says where it is."""
    import zipfile

    from tests.fixtures.wheels import RealWheel, fetch

    wheel = fetch(RealWheel("nvidia-cuda-runtime-cu12", "12.9.79", "win_amd64"))
    with zipfile.ZipFile(wheel) as zf:
        zf.extract("nvidia/cuda_runtime/bin/cudart64_12.dll", tmp_path)
    bin_dir = (tmp_path / "nvidia" / "cuda_runtime" / "bin").as_posix()
    code = main(
        [
            "doctor",
            "--env",
            str(torch_windows_cpu_xformers_env),
            "--format",
            "json",
            "--dll-path",
            f"C:\\x;{bin_dir}",
        ]
    )
    doc = json.loads(capsys.readouterr().out)
    assert code == 1
    assert doc["loader"]["dll_path"] == ["C:/x", bin_dir]
    on_path = [f for f in doc["findings"] if f["library"] == "cudart64_12.dll"]
    assert len(on_path) == 2  # xformers/_C.pyd and xformers/flash_attn_3/_C.pyd: nothing was loaded from PATH
    assert all("found only on PATH" in f["message"] and f["severity"] == "error" for f in on_path)
