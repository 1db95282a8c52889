"""Issue 12's acceptance on real PyPI wheels: the default audit passes known-good wheels whose CUDA
libraries come through their requirements, against the package index and against a wheelhouse, and names the
provider of each import; planted defects fail naming the check, the file and the library."""

from __future__ import annotations

import json
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from typing import Any

import pytest

from cudaship.cli.main import main
from cudaship.exitcodes import ExitCode
from tests.fixtures import cache_dir
from tests.fixtures.plant import dist_info, drop_requirement, plant, replace_bytes
from tests.fixtures.wheels import RealWheel, fetch, fetch_head

pytestmark = [pytest.mark.network, pytest.mark.slow]

ACCEPTANCE = [
    "torch_linux_wheel",
    "cupy_linux_wheel",
    "cupy_windows_wheel",
    "onnxruntime_linux_wheel",
    "onnxruntime_windows_wheel",
    "xformers_linux_wheel",
    "xformers_windows_wheel",
    "bitsandbytes_linux_wheel",
    "bitsandbytes_windows_wheel",
]
#: torch 2.14.1's CUDA 13 requirements and onnxruntime-gpu's, as real wheels on this machine's local mirror
MIRROR = Path("/opt/pypi-more/files")
CUDA_RUNTIME_13 = RealWheel("nvidia-cuda-runtime", "13.0.96", "manylinux_2_17_x86_64")


def audit(capsys: pytest.CaptureFixture[str], *args: str) -> tuple[int, dict[str, Any], str]:
    code = main(["audit", "--no-progress", "--format", "json", *args])
    out, err = capsys.readouterr()
    assert code in (ExitCode.OK, ExitCode.FINDINGS), err
    return code, json.loads(out), err


def online() -> list[str]:
    return ["--online", "--cache-dir", str(cache_dir() / "index-cache")]


def checks(report: dict[str, Any]) -> list[dict[str, Any]]:
    result: list[dict[str, Any]] = report["checks"]
    return result


def failures(report: dict[str, Any]) -> list[str]:
    return [
        f"{c['name']}: {c['reason']}"
        for c in checks(report)
        if c["status"] == "fail" and c.get("severity", "error") == "error"
    ]


def evidence(report: dict[str, Any], family: str) -> list[str]:
    return [e["message"] for c in checks(report) if c["family"] == family for e in c.get("evidence", [])]


@pytest.mark.parametrize("fixture", ACCEPTANCE)
def test_default_audit_passes_against_the_index(
    fixture: str, request: pytest.FixtureRequest, capsys: pytest.CaptureFixture[str]
) -> None:
    wheel: Path = request.getfixturevalue(fixture)
    code, report, _err = audit(capsys, *online(), str(wheel))
    mine = [f for f in failures(report) if f.startswith(("closure", "requirements"))]
    assert mine == []
    assert code == ExitCode.OK, failures(report)


def test_torch_names_the_provider_of_each_import(
    torch_linux_wheel: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    _code, report, _err = audit(capsys, *online(), str(torch_linux_wheel))
    lines = evidence(report, "closure")
    assert any(
        line.startswith("libcublas.so.13 ← nvidia-cublas 13.1.1.3 via cuda-toolkit[") and "]==13.0.3" in line
        for line in lines
    ), lines[:20]
    assert any(line.startswith("libnvshmem_host.so.3 ← nvidia-nvshmem-cu13 3.4.5") for line in lines)
    # torch's loader shims link libraries to load them: not "unused"
    shims = [
        c
        for c in checks(report)
        if c["name"] == "closure: unused imports in torch/lib/libtorch_global_deps.so"
    ]
    assert shims and shims[0]["status"] == "pass" and "a loader shim" in shims[0]["reason"]


def test_extension_imports_come_from_torch_loaded_first(
    xformers_linux_wheel: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    _code, report, _err = audit(capsys, *online(), str(xformers_linux_wheel))
    lines = evidence(report, "closure")
    assert any(line.startswith("libc10.so ← torch 2.10.0, loaded by `import torch` first") for line in lines)


def test_extra_only_providers_pass_with_a_note(
    onnxruntime_linux_wheel: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    code, report, _err = audit(capsys, *online(), str(onnxruntime_linux_wheel))
    notes = [n for w in report["wheels"] for n in w.get("notes", [])]
    assert any(
        "provided when installed as onnxruntime-gpu[cuda]" in n and "libcudart.so.13" in n for n in notes
    )
    assert any("TensorRT execution provider" in n for n in notes)
    # names stored for dlopen are reported with their provider
    assert any(
        line.startswith("libnvrtc.so.13 loaded by name (dlopen/LoadLibrary) ← nvidia-cuda-nvrtc ")
        for line in evidence(report, "closure")
    )
    assert code == ExitCode.OK, failures(report)


#: the requirements of xformers 0.0.34 (torch==2.10.0) and bitsandbytes 0.50.2 (torch>=2.4,<3), real wheels
TORCH_210 = {
    "linux": RealWheel("torch", "2.10.0", "manylinux_2_28_x86_64", big=True),
    "windows": RealWheel("torch", "2.10.0", "win_amd64", big=True),
}
CUDA_RUNTIME_12 = RealWheel("nvidia-cuda-runtime-cu12", "12.8.90", "manylinux_2_17_x86_64")
#: cupy-cuda12x 14.2.0's extra "ctk" (cuda-toolkit[cublas,cudart,cufft,curand,cusolver,cusparse,nvrtc]==12.*)
#: for Linux and Windows, and onnxruntime-gpu 1.31.1's extras "cuda" and "cudnn" for Windows: the versions
#: PyPI resolves them to (2026-12-03); 4.5 GB of wheels, of which the wheelhouse needs only the metadata
_CU12 = {
    "nvidia-cublas-cu12": ("12.9.2.10", "manylinux_2_27_x86_64"),
    "nvidia-cuda-runtime-cu12": ("12.9.79", "manylinux_2_17_x86_64"),
    "nvidia-cufft-cu12": ("11.4.1.4", "manylinux_2_17_x86_64"),
    "nvidia-nvjitlink-cu12": ("12.9.86", "manylinux_2_12_x86_64"),
    "nvidia-curand-cu12": ("10.3.10.19", "manylinux_2_27_x86_64"),
    "nvidia-cusolver-cu12": ("11.7.5.82", "manylinux_2_27_x86_64"),
    "nvidia-cusparse-cu12": ("12.5.10.65", "manylinux_2_17_x86_64"),
    "nvidia-cuda-nvrtc-cu12": ("12.9.86", "manylinux_2_12_x86_64"),
}
_CU13_WINDOWS = {
    "nvidia-cuda-nvrtc": "13.5.37",
    "nvidia-cuda-runtime": "13.5.37",
    "nvidia-cufft": "12.5.0.14",
    "nvidia-curand": "10.4.5.25",
    "nvidia-cudnn-cu13": "9.28.1.4",
    "nvidia-nvjitlink": "13.5.37",
    "nvidia-cublas": "13.10.0.20",
}
EXTRA_PROVIDERS = [
    RealWheel("cuda-toolkit", "12.9.2.0", "any", big=True),
    RealWheel("cuda-pathfinder", "1.9.1", "any", big=True),
    *(RealWheel(p, v, plat, big=True) for p, (v, plat) in _CU12.items()),
    *(RealWheel(p, v, "win_amd64", big=True) for p, (v, _plat) in _CU12.items()),
    *(RealWheel(p, v, "win_amd64", big=True) for p, v in _CU13_WINDOWS.items()),
]


@pytest.fixture(scope="session")
def wheelhouse(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """Real requirement wheels, no index: torch 2.14.1's and onnxruntime-gpu 1.31.1's CUDA 13 wheels (the
    local mirror's, plus nvidia-cuda-runtime 13.0.96), torch 2.10.0 for Linux and Windows with
    nvidia-cuda-runtime-cu12 12.8.90, cupy's CUDA 12 wheels and onnxruntime-gpu's Windows ones. A wheelhouse
    provider is read for its central directory and METADATA only, so those are all that is downloaded
    (:func:`fetch_head`: a few MB instead of 5.5 GB)."""
    if not MIRROR.is_dir():
        pytest.skip(f"{MIRROR} is not on this machine")
    house = tmp_path_factory.mktemp("wheelhouse")
    for whl in MIRROR.glob("*.whl"):
        if whl.name.startswith(("nvidia_", "cuda_toolkit", "cuda_pathfinder")):
            (house / whl.name).symlink_to(whl)
    with ThreadPoolExecutor(8) as pool:  # a few small range requests each: latency, not bandwidth
        heads = list(
            pool.map(fetch_head, (CUDA_RUNTIME_13, CUDA_RUNTIME_12, *TORCH_210.values(), *EXTRA_PROVIDERS))
        )
    for found in heads:
        if not (house / found.name).exists():
            (house / found.name).symlink_to(found)
    return house


NO_INDEX = ["--index-url", ""]


@pytest.mark.parametrize("fixture", ACCEPTANCE)
def test_default_audit_passes_against_a_wheelhouse(
    fixture: str, wheelhouse: Path, request: pytest.FixtureRequest, capsys: pytest.CaptureFixture[str]
) -> None:
    wheel: Path = request.getfixturevalue(fixture)
    code, report, _err = audit(capsys, "--find-links", str(wheelhouse), *NO_INDEX, str(wheel))
    assert [f for f in failures(report) if f.startswith(("closure", "requirements"))] == []
    notes = [n for w in report["wheels"] for n in w.get("notes", [])]
    assert any(n.startswith("providers: ") and f"wheelhouse {wheelhouse}" in n for n in notes)
    assert not any("knowledge table" in n for n in notes if n.startswith("providers: "))
    assert code == ExitCode.OK, failures(report)


def test_planted_removed_requirement_fails(
    torch_linux_wheel: Path, wheelhouse: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    meta = f"{dist_info(torch_linux_wheel)}/METADATA"
    planted = plant(torch_linux_wheel, tmp_path, replace={meta: drop_requirement("nvidia-nvshmem-cu13")})
    code, report, _err = audit(capsys, "--find-links", str(wheelhouse), *NO_INDEX, str(planted))
    assert code == ExitCode.FINDINGS
    failed = [c for c in checks(report) if c["status"] == "fail"]
    hits = [
        (c["name"], e["file"], e["symbol"])
        for c in failed
        for e in c["evidence"]
        if e.get("symbol") == "libnvshmem_host.so.3"
    ]
    assert (
        "closure: torch/lib/libtorch_nvshmem.so",
        "torch/lib/libtorch_nvshmem.so",
        "libnvshmem_host.so.3",
    ) in hits


def test_planted_needed_library_nothing_provides_fails(
    onnxruntime_linux_wheel: Path, wheelhouse: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    lib = "onnxruntime/capi/libonnxruntime_providers_cuda.so"
    planted = plant(
        onnxruntime_linux_wheel,
        tmp_path,
        replace={lib: replace_bytes(b"libcurand.so.10\0", b"libcuranx.so.10\0")},
    )
    code, report, _err = audit(capsys, "--find-links", str(wheelhouse), *NO_INDEX, str(planted))
    assert code == ExitCode.FINDINGS
    closure = [c for c in checks(report) if c["name"] == f"closure: {lib}"]
    assert closure and closure[0]["status"] == "fail"
    assert any(e["symbol"] == "libcuranx.so.10" and e["file"] == lib for e in closure[0]["evidence"])


def _move_extra(old: str, new: str, project: str) -> Any:
    def edit(metadata: bytes) -> bytes:
        text = metadata.decode()
        lines = []
        for line in text.splitlines(keepends=True):
            if line.startswith("Requires-Dist:") and project in line:
                line = line.replace(f'extra == "{old}"', f'extra == "{new}"')
            lines.append(line)
        out = "".join(lines).replace(
            f"Provides-Extra: {old}\n", f"Provides-Extra: {old}\nProvides-Extra: {new}\n"
        )
        assert out != text
        return out.encode()

    return edit


def test_planted_extra_only_provider_under_required_extras_fails(
    onnxruntime_linux_wheel: Path, wheelhouse: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    policy = tmp_path / "cudaship.toml"
    policy.write_text('[audit.closure]\nrequired_extras = ["cuda", "cudnn"]\n')
    meta = f"{dist_info(onnxruntime_linux_wheel)}/METADATA"
    base = ["--policy", str(policy), "--find-links", str(wheelhouse), *NO_INDEX]
    code, report, _err = audit(capsys, *base, str(onnxruntime_linux_wheel))
    assert [f for f in failures(report) if f.startswith("closure: onnx")] == []
    planted = plant(
        onnxruntime_linux_wheel,
        tmp_path / "planted",
        replace={meta: _move_extra("cuda", "gpu", "nvidia-cuda-runtime")},
    )
    code, report, _err = audit(capsys, *base, str(planted))
    assert code == ExitCode.FINDINGS
    lib = "onnxruntime/capi/libonnxruntime_providers_cuda.so"
    closure = [c for c in checks(report) if c["name"] == f"closure: {lib}"]
    assert closure and closure[0]["status"] == "fail"
    hit = [e for e in closure[0]["evidence"] if e["symbol"] == "libcudart.so.13"]
    assert hit and "onnxruntime-gpu[gpu]" in hit[0]["message"] and hit[0]["file"] == lib


def test_planted_torch_pin_of_another_cuda_major_fails(
    xformers_linux_wheel: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    # xformers 0.0.34 is built for CUDA 12 (libcudart.so.12) against torch 2.10.0, whose PyPI build is CUDA
    # 12.8; pinned to torch 2.14.1 (a CUDA 13 build on PyPI) its runtime would be missing after pip install
    meta = f"{dist_info(xformers_linux_wheel)}/METADATA"
    planted = plant(
        xformers_linux_wheel, tmp_path, replace={meta: replace_bytes(b"torch==2.10.0", b"torch==2.14.1")}
    )
    code, report, _err = audit(capsys, *online(), str(planted))
    assert code == ExitCode.FINDINGS
    lib = "xformers/_C.so"
    closure = [c for c in checks(report) if c["name"] == f"closure: {lib}"]
    assert closure and closure[0]["status"] == "fail"
    hit = [e for e in closure[0]["evidence"] if e["symbol"] == "libcudart.so.12"]
    assert hit and "torch 2.14.1 from index is a CUDA 13 build" in hit[0]["message"]


@pytest.fixture(scope="session")
def windows_env(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A real installed environment: torch 2.10.0 for Windows installed by pip into a target directory
    (``pip install --target --platform win_amd64 --no-deps``), so its RECORD is pip's."""
    import subprocess
    import sys

    torch = fetch(TORCH_210["windows"])
    site = tmp_path_factory.mktemp("site-packages")
    done = subprocess.run(
        [
            sys.executable,
            "-m",
            "pip",
            "install",
            "--quiet",
            "--no-deps",
            "--no-index",
            "--only-binary=:all:",
            "--platform",
            "win_amd64",
            "--python-version",
            "3.12",
            "--target",
            str(site),
            str(torch),
        ],
        capture_output=True,
        text=True,
        timeout=1800,
        check=False,
    )
    if done.returncode != 0:
        pytest.skip(f"pip install --target failed: {done.stderr.strip().splitlines()[-1:]}")
    return site


def test_default_audit_passes_against_an_installed_environment(
    xformers_windows_wheel: Path, windows_env: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    code, report, _err = audit(capsys, "--env", str(windows_env), *NO_INDEX, str(xformers_windows_wheel))
    assert code == ExitCode.OK, failures(report)
    notes = [n for w in report["wheels"] for n in w.get("notes", [])]
    assert any(n.startswith("providers: 1 distribution from env ") for n in notes), notes
    lines = evidence(report, "closure")
    assert any(line.startswith("torch_cpu.dll ← torch 2.10.0 at torch/lib/torch_cpu.dll") for line in lines)


def test_one_cause_same_reason_on_linux_and_windows(
    xformers_linux_wheel: Path,
    xformers_windows_wheel: Path,
    tmp_path: Path,
    capsys: pytest.CaptureFixture[str],
) -> None:
    """xformers 0.0.34 imports CUDA 12's runtime, which only a CUDA 12 build of torch brings: one cause on
    both OSes. The verdict follows the build `pip install` brings (Windows: PyPI's CPU torch, which every
    CUDA user replaces anyway: a note; Linux with a torch pin whose PyPI build is CUDA 13: an error), and
    each report says why the other OS's verdict differs."""
    _, report, _ = audit(capsys, *online(), str(xformers_windows_wheel))
    windows = [
        m for m in evidence(report, "closure") if m.startswith("cudart64_12.dll ← torch (CUDA 12 build)")
    ]
    assert windows, evidence(report, "closure")
    assert (
        "not by torch 2.10.0 from index, a CPU build: every CUDA user of torch installs another build"
        in (windows[0])
    )
    assert "as on Linux, the same import is an error: `pip install` brings a build without it" in windows[0]

    meta = f"{dist_info(xformers_linux_wheel)}/METADATA"
    planted = plant(
        xformers_linux_wheel, tmp_path, replace={meta: replace_bytes(b"torch==2.10.0", b"torch==2.14.1")}
    )
    code, report, _ = audit(capsys, *online(), str(planted))
    assert code == ExitCode.FINDINGS
    linux = [m for m in evidence(report, "closure") if "torch 2.14.1 from index is a CUDA 13 build" in m]
    assert linux, evidence(report, "closure")
    assert "an error because `pip install` brings that CUDA 13 build" in linux[0]
    assert (
        "as on Windows, every CUDA user installs another build anyway and the same import passes" in linux[0]
    )
