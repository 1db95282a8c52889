"""For real: `cudaship cmake` -> CMake + ninja (from PyPI) + the local nvcc -> a CUDA shared library whose
device code is exactly the train's arch list, the newest also as PTX (read back with `cudaship inspect`)."""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from cudaship.ci import archs as ci_archs
from cudaship.cli.main import main
from cudaship.config import ProjectConfig

pytestmark = [pytest.mark.slow]

VENV_BIN = Path(sys.executable).parent

CMAKELISTS = """\
cmake_minimum_required(VERSION 3.25)
project(demo LANGUAGES CXX CUDA)
add_library(demo SHARED scale.cu bits.cu)
# No standard, no architectures, no compiler here: the initial cache from `cudaship cmake` provides them.
"""

SCALE_CU = """\
__global__ void scale(float* x, float a, int n) {
  int i = blockIdx.x * blockDim.x + threadIdx.x;
  if (i < n) x[i] *= a;
}
extern "C" void demo_scale(float* x, float a, int n) { scale<<<(n + 255) / 256, 256>>>(x, a, n); }
"""

BITS_CU = """\
#include <bit>
#include <concepts>
#include <cstdint>
template <std::unsigned_integral T>
__host__ __device__ constexpr int leading(T v) { return std::countl_zero(v); }
static_assert(leading(std::uint32_t{1}) == 31, "C++20 <bit> in a .cu file");
__global__ void lead(const unsigned* in, int* out, int n) {
  int i = blockIdx.x * blockDim.x + threadIdx.x;
  if (i < n) out[i] = __clz(in[i]);
}
extern "C" void demo_lead(const unsigned* in, int* out, int n) { lead<<<(n + 255) / 256, 256>>>(in, out, n); }
"""


def _tool(name: str) -> str:
    found = shutil.which(name, path=str(VENV_BIN)) or shutil.which(name)
    if not found:
        pytest.skip(f"{name} not installed (pip install cmake ninja)")
    return found


@pytest.fixture
def project(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    if not shutil.which("nvcc"):
        pytest.skip("nvcc not on PATH")
    _tool("cmake")
    _tool("ninja")
    monkeypatch.setenv("PATH", f"{VENV_BIN}{os.pathsep}{os.environ['PATH']}")  # CMake and ninja from PyPI
    for var in ("CUDACXX", "CUDAFLAGS", "CUDA_HOME", "CUDA_PATH", "CUDASHIP_TOOLKIT"):
        monkeypatch.delenv(var, raising=False)
    src = tmp_path / "src"
    src.mkdir()
    (src / "CMakeLists.txt").write_text(CMAKELISTS)
    (src / "scale.cu").write_text(SCALE_CU)
    (src / "bits.cu").write_text(BITS_CU)
    monkeypatch.chdir(tmp_path)
    return tmp_path


def _nvcc_train() -> str:
    out = subprocess.run(["nvcc", "--version"], capture_output=True, text=True, check=True).stdout
    release = out.split("release ", 1)[1].split(",", 1)[0]
    return ci_archs.train_info(release).tag


def _configure_and_build(project: Path, cache: Path) -> subprocess.CompletedProcess[str]:
    cmake = _tool("cmake")
    configure = subprocess.run(
        [cmake, "-C", str(cache), "-G", "Ninja", "-S", "src", "-B", "build"],
        cwd=project,
        capture_output=True,
        text=True,
        check=False,
        timeout=300,
    )
    assert configure.returncode == 0, configure.stdout + configure.stderr
    return subprocess.run(
        [cmake, "--build", "build"], cwd=project, capture_output=True, text=True, check=False, timeout=580
    )


def test_initial_cache_builds_exactly_the_train_arch_list(
    project: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    train = _nvcc_train()
    assert (
        main(
            [
                "cmake",
                "--train",
                train,
                "--platform",
                "linux-x86_64",
                "--cxx-standard",
                "20",
                "--write",
                "initial-cache",
                "cache.cmake",
            ]
        )
        == 0
    )
    capsys.readouterr()
    built = _configure_and_build(project, project / "cache.cmake")
    assert built.returncode == 0, built.stdout + built.stderr
    library = project / "build" / "libdemo.so"
    assert library.is_file()

    assert main(["inspect", "--format", "json", str(library)]) == 0
    report = json.loads(capsys.readouterr().out)
    (entry,) = report["files"]
    expected = ci_archs.lookup(ci_archs.arch_table(ProjectConfig({}, None)), train, "x86_64")
    assert sorted(set(entry["sass"])) == sorted(expected.sass_names())
    assert sorted(set(entry["ptx"])) == [expected.archs()[-1].ptx_name]
    # both .cu files carry every arch: one SASS entry per arch per translation unit, and one PTX each
    sass_entries = [d for d in entry["device_code"] if d["kind"] == "sass"]
    assert len(sass_entries) == 2 * len(expected.sass_names())
    # the CUDA standard came from the cache: C++20 for the .cu files
    commands = (project / "build" / "build.ninja").read_text()
    assert commands.count("-std=c++20") >= 2


def test_cudacxx_options_still_apply(
    project: Path, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    """With CUDACXX set, the cache names no CUDA compiler, so CMake takes CUDACXX with its options."""
    nvcc = shutil.which("nvcc")
    assert nvcc is not None
    monkeypatch.setenv("CUDACXX", f"{nvcc} -allow-unsupported-compiler")
    train = _nvcc_train()
    assert (
        main(["cmake", "--train", train, "--platform", "linux-x86_64", "--write", "initial-cache", "c.cmake"])
        == 0
    )
    capsys.readouterr()
    assert "set(CMAKE_CUDA_COMPILER " not in (project / "c.cmake").read_text()
    configure = subprocess.run(
        [_tool("cmake"), "-C", "c.cmake", "-G", "Ninja", "-S", "src", "-B", "build"],
        cwd=project,
        capture_output=True,
        text=True,
        check=False,
        timeout=300,
    )
    assert configure.returncode == 0, configure.stdout + configure.stderr
    cache = (project / "build" / "CMakeCache.txt").read_text()
    assert "CMAKE_CUDA_COMPILER_ARG1:STRING= -allow-unsupported-compiler" in cache.splitlines()
