"""``cudaship doctor --env`` on real environments built from PyPI wheels (tests/fixtures/envs.py): torch
2.8.0 for CUDA 12 with the NVIDIA wheels it pins; the same with nvidia-nvjitlink-cu12 downgraded below what
nvidia-cusparse-cu12 needs; the same with a torchvision that brings its own libcudart of another CUDA
minor."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import jsonschema
import pytest

from cudaship.cli.main import main
from cudaship.inspection.walk import inspect_file
from tests.fixtures.envs import TORCH_CU12, install_wheel
from tests.fixtures.wheels import fetch

SCHEMA = (
    Path(__file__).resolve().parents[2] / "src" / "cudaship" / "render" / "schemas" / "doctor-env.schema.json"
)

pytestmark = [pytest.mark.network, pytest.mark.slow]


@pytest.fixture(autouse=True)
def _no_gpu(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    """The same answer on every machine: no driver (device code: tests/cli/test_doctor_cli.py)."""
    monkeypatch.setenv("CUDASHIP_LIBCUDA", str(tmp_path / "no-libcuda.so"))
    monkeypatch.delenv("LD_LIBRARY_PATH", raising=False)


def run_json(capsys: pytest.CaptureFixture[str], *argv: str) -> tuple[int, dict[str, Any]]:
    code = main(["doctor", "--format", "json", *argv])
    out = capsys.readouterr().out
    doc = json.loads(out)
    schema = json.loads(SCHEMA.read_text())
    jsonschema.Draft202012Validator.check_schema(schema)
    jsonschema.Draft202012Validator(schema).validate(doc)
    return code, doc


def _import(doc: dict[str, Any], library_suffix: str, name: str) -> dict[str, Any]:
    (lib,) = [lib for lib in doc["libraries"] if lib["path"].endswith(library_suffix)]
    (imp,) = [i for i in lib["imports"] if i["name"] == name]
    return imp  # type: ignore[no-any-return]


def test_a_good_torch_cu12_environment_loads(
    capsys: pytest.CaptureFixture[str], torch_cu12_env: Path
) -> None:
    code, doc = run_json(capsys, "--env", str(torch_cu12_env))
    assert code == 0
    assert doc["summary"]["error"] == 0
    # every native library the wheels installed is listed once (torch 2.8.0's closure has 57), and each
    # DT_NEEDED entry of each is resolved exactly once
    assert len(doc["libraries"]) == 57
    for lib in doc["libraries"]:
        host = inspect_file(Path(lib["path"]), lib["path"], device=False).host
        assert host is not None
        needed = [i.library for i in host.imports]
        assert [i["name"] for i in lib["imports"]] == needed
    assert {d["name"] for d in doc["environment"]["distributions"]} == {w.project for w in TORCH_CU12}
    # each import names the file the loader picks and its distribution
    cudart = _import(doc, "torch/lib/libtorch_cuda.so", "libcudart.so.12")
    assert cudart["file"].endswith("nvidia/cuda_runtime/lib/libcudart.so.12")
    assert cudart["distribution"] == "nvidia-cuda-runtime-cu12 12.8.90"
    assert cudart["how"] in (
        "DT_RPATH",
        "already loaded",
    )  # the first library to need it finds it by DT_RPATH
    # torch 2.8.0's import preloads nvJitLink from the wheel (torch/__init__.py _load_global_deps), so
    # cuSPARSE's lookup by SONAME finds that copy already loaded
    jit = _import(doc, "nvidia/cusparse/lib/libcusparse.so.12", "libnvJitLink.so.12")
    assert jit["distribution"] == "nvidia-nvjitlink-cu12 12.8.93"
    assert jit["how"] == "already loaded"
    # torch's extension module is loaded; what only a profiler loads by name is checked but not loaded
    loaded = {lib["path"].split("site-packages/")[1]: lib["loaded"] for lib in doc["libraries"]}
    assert loaded["torch/lib/libtorch_cuda.so"] is True
    assert loaded["nvidia/cufile/lib/libcufile_rdma.so.1"] is False


def test_nvjitlink_older_than_cusparse_needs_fails_naming_symbol_files_and_distributions(
    capsys: pytest.CaptureFixture[str], torch_cu12_old_nvjitlink_env: Path
) -> None:
    code, doc = run_json(capsys, "--env", str(torch_cu12_old_nvjitlink_env))
    assert code == 1
    (missing,) = [f for f in doc["findings"] if f["rule"] == "missing-symbol"]
    assert missing["severity"] == "error"
    assert missing["symbol"].startswith("__nvJitLink") and missing["symbol"].endswith("_12_8")
    assert missing["version"] == "libnvJitLink.so.12"
    assert missing["file"].endswith("nvidia/cusparse/lib/libcusparse.so.12")
    assert missing["distribution"] == "nvidia-cusparse-cu12 12.5.8.93"
    assert missing["target"].endswith("nvidia/nvjitlink/lib/libnvJitLink.so.12")
    assert missing["target_distribution"] == "nvidia-nvjitlink-cu12 12.4.127"
    assert "__nvJitLinkComplete_12_8" in missing["message"]
    components = {
        (f["distribution"], f["target_distribution"])
        for f in doc["findings"]
        if f["rule"] == "component-version"
    }
    assert ("nvidia-cusparse-cu12 12.5.8.93", "nvidia-nvjitlink-cu12 12.4.127") in components
    assert all(f.get("source") for f in doc["findings"] if f["rule"] == "component-version")
    # the text report says it too, and the verdict
    assert main(["doctor", "--env", str(torch_cu12_old_nvjitlink_env)]) == 1
    text = capsys.readouterr().out
    assert "undefined symbol: __nvJitLink" in text and "WILL NOT LOAD" in text


def test_two_packages_bringing_different_libcudart_minors_are_reported(
    capsys: pytest.CaptureFixture[str], torch_cu12_old_torchvision_env: Path
) -> None:
    code, doc = run_json(capsys, "--env", str(torch_cu12_old_torchvision_env))
    (dup,) = [f for f in doc["findings"] if f["rule"] == "duplicate"]
    assert dup["library"] == "libcudart.so.12"
    assert dup["severity"] == "warning"
    assert {dup["distribution"], dup["target_distribution"]} == {
        "torchvision 0.21.0",
        "nvidia-cuda-runtime-cu12 12.8.90",
    }
    assert {Path(dup["file"]).name, Path(dup["target"]).name} == {
        "libcudart.41118559.so.12",
        "libcudart.so.12",
    }
    assert "different versions" in dup["message"]
    assert code == 0  # a warning: both copies load, and torchvision vendors its copy on purpose


def test_ld_library_path_does_not_shadow_what_torch_preloads(
    capsys: pytest.CaptureFixture[str], torch_cu12_env: Path, torch_cu12_old_nvjitlink_env: Path
) -> None:
    """LD_LIBRARY_PATH comes before DT_RUNPATH, but torch 2.8.0 preloads the wheel's nvJitLink by its path
    before anything needs it by SONAME (its fix for pytorch issue 138460): the old one there is not used.
    Shadowing that the process shows is tested in tests/checks/test_doctor_env_preload.py."""
    old = torch_cu12_old_nvjitlink_env / "nvidia" / "nvjitlink" / "lib"
    code, doc = run_json(capsys, "--env", str(torch_cu12_env), "--ld-library-path", str(old))
    assert code == 0
    jit = _import(doc, "nvidia/cusparse/lib/libcusparse.so.12", "libnvJitLink.so.12")
    assert jit["how"] == "already loaded" and jit["file"].startswith(str(torch_cu12_env))
    rules = {f["rule"] for f in doc["findings"]}
    assert not {"missing-symbol", "shadowed"} & rules


def test_without_the_system_as_from_another_os(
    capsys: pytest.CaptureFixture[str], torch_cu12_env: Path
) -> None:
    code, doc = run_json(capsys, "--env", str(torch_cu12_env), "--no-system")
    assert code == 0
    assert doc["loader"]["system_checked"] is False and doc["loader"]["ld_cache"] is None
    libc = _import(doc, "torch/lib/libtorch_cuda.so", "libc.so.6")
    assert libc["file"] is None and libc["provider"] == "system"
    assert main(["doctor", "--env", str(torch_cu12_env), "--no-system", "--format", "markdown"]) == 0
    assert capsys.readouterr().out.startswith("## cudaship doctor --env")


def test_an_unreadable_library_and_bad_usage(capsys: pytest.CaptureFixture[str], tmp_path: Path) -> None:
    site = tmp_path / "site-packages"
    site.mkdir()
    (cudart,) = [w for w in TORCH_CU12 if w.project == "nvidia-cuda-runtime-cu12"]
    install_wheel(fetch(cudart), site)
    lib = site / "nvidia" / "cuda_runtime" / "lib" / "libcudart.so.12"
    lib.write_bytes(lib.read_bytes()[:200])
    assert main(["doctor", "--env", str(site), "--no-system"]) == 2
    captured = capsys.readouterr()
    assert "[unreadable]" in captured.out
    assert captured.err.count("cudaship: error:") == 1 and "libcudart.so.12" in captured.err
    assert main(["doctor", "--env", str(tmp_path / "missing")]) == 2
    assert main(["doctor", "--format", "markdown"]) == 2
    assert main(["doctor", "--env", str(site), "x.so"]) == 2
