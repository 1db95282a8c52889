"""The PyPI source for real: NVIDIA's wheels through pip's configured index (needs the network once)."""

from __future__ import annotations

import json
import os
import shutil
import subprocess
from pathlib import Path

import pytest

from cudaship.cli.main import main
from cudaship.errors import ToolkitError
from cudaship.exitcodes import ExitCode
from cudaship.knowledge.toolkit_data import expand_components
from cudaship.toolkit import download
from cudaship.toolkit.install import InstallRequest, install, verify
from cudaship.toolkit.pypi import verify_record
from cudaship.toolkit.records import Platform, Source
from tests import fixtures

PROGRAM = r"""
#include <cstdio>
#include <thrust/device_vector.h>
__global__ void fill(int *out) { out[threadIdx.x] = threadIdx.x * 2; }
int main() {
    thrust::device_vector<int> v(32);
    fill<<<1, 32>>>(thrust::raw_pointer_cast(v.data()));
    std::printf("%d\n", (int)cudaDeviceSynchronize());
    return 0;
}
"""


def _cache() -> Path:
    return fixtures.cache_dir() / "toolkit-pypi"


@pytest.mark.network
def test_windows_cudart_from_pypi(tmp_path: Path) -> None:
    dest = tmp_path / "win"
    info = install(
        InstallRequest(
            release="13.0.2",
            platform=Platform.WINDOWS_X86_64,
            components=("cudart",),
            dest=dest,
            source=Source.PYPI,
            cache_dir=_cache(),
        )
    )
    (component,) = info.components
    assert component.name == "nvidia-cuda-runtime" and component.version.startswith("13.0.")
    dll = dest / "bin" / "x64" / "cudart64_13.dll"
    assert dll.read_bytes()[:2] == b"MZ"
    assert (dest / "lib" / "x64" / "cudart.lib").is_file()
    assert (dest / "include" / "cuda_runtime_api.h").is_file()
    assert (dest / "licenses" / "cudart" / "License.txt").is_file()
    assert not (dest / "nvidia").exists()
    assert verify(dest)[1] == []
    # the same again from the cache only (pip --no-index against the cached wheels)
    again = install(
        InstallRequest(
            release="13.0.2",
            platform=Platform.WINDOWS_X86_64,
            components=("cudart",),
            dest=tmp_path / "win2",
            source=Source.PYPI,
            cache_dir=_cache(),
            fetch=download.FetchOptions(offline=True),
        )
    )
    assert again.components == info.components


@pytest.mark.network
def test_tampered_wheel_fails_its_record_check(tmp_path: Path) -> None:
    install(
        InstallRequest(
            release="13.0.2",
            platform=Platform.WINDOWS_X86_64,
            components=("cudart",),
            dest=tmp_path / "win",
            source=Source.PYPI,
            cache_dir=_cache(),
        )
    )
    wheel = next((_cache() / "pypi" / "wheels").glob("nvidia_cuda_runtime-13.0.*-win_amd64.whl"))
    import zipfile

    tampered = tmp_path / wheel.name
    with zipfile.ZipFile(wheel) as src, zipfile.ZipFile(tampered, "w") as dst:
        for item in src.infolist():
            data = src.read(item)
            if item.filename.endswith("cudart64_13.dll"):
                data = data[:-1] + bytes([data[-1] ^ 1])
            dst.writestr(item, data)
    with pytest.raises(ToolkitError, match=r"cudart64_13\.dll does not match its RECORD hash"):
        verify_record(tampered)


@pytest.mark.network
def test_component_not_on_pypi_for_the_release(tmp_path: Path) -> None:
    with pytest.raises(ToolkitError, match=r"cuobjdump is not published on PyPI for CUDA 13\.0\.2"):
        install(
            InstallRequest(
                release="13.0.2",
                platform=Platform.LINUX_X86_64,
                components=("cuobjdump",),
                dest=tmp_path / "x",
                source=Source.PYPI,
                cache_dir=_cache(),
            )
        )


@pytest.mark.network
@pytest.mark.slow
def test_linux_toolkit_from_pypi_compiles_and_links(tmp_path: Path) -> None:
    dest = tmp_path / "cuda-13.0"
    info = install(
        InstallRequest(
            release="13.0.2",
            platform=Platform.LINUX_X86_64,
            components=expand_components(None),
            dest=dest,
            source=Source.PYPI,
            cache_dir=_cache(),
        )
    )
    assert {c.component for c in info.components} == {"nvcc", "crt", "nvvm", "cudart", "cccl"}
    assert os.readlink(dest / "lib64") == "lib"
    source = tmp_path / "fill.cu"
    source.write_text(PROGRAM)
    binary = tmp_path / "fill"
    env = {"PATH": f"{dest / 'bin'}:/usr/bin:/bin", "HOME": str(tmp_path)}
    host_compiler = shutil.which("g++") or shutil.which("c++")
    assert host_compiler is not None, "nvcc needs a host C++ compiler"
    done = subprocess.run(
        [
            str(dest / "bin" / "nvcc"),
            "-ccbin",
            host_compiler,
            "-gencode",
            "arch=compute_80,code=sm_80",
            "-gencode",
            "arch=compute_90,code=[sm_90,compute_90]",
            "-cudart",
            "shared",
            "-o",
            str(binary),
            str(source),
        ],
        capture_output=True,
        text=True,
        env=env,
        timeout=600,
        check=False,
    )
    assert done.returncode == 0, done.stderr
    version = subprocess.run(
        [str(dest / "bin" / "nvcc"), "--version"], capture_output=True, text=True, env=env, check=True
    ).stdout
    assert "release 13.0" in version

    code = main(["inspect", "--format", "json", "-o", str(tmp_path / "inspect.json"), str(binary)])
    assert code != ExitCode.INTERNAL
    report = json.loads((tmp_path / "inspect.json").read_text())
    (entry,) = report["files"]
    assert set(entry["sass"]) == {"sm_80", "sm_90"}
    assert set(entry["ptx"]) == {"compute_90"}
    assert "libcudart.so.13" in entry["imports"]
