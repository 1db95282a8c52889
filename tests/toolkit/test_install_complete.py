"""Issue 35, item 4: `toolkit install` never exits 0 with a toolkit that cannot do what was asked, and says
what to do when NVIDIA's server cannot be reached.

- `--source pypi -c nvcc` for CUDA 12 (and 11): NVIDIA's `nvidia-cuda-nvcc-cu12` wheels hold only `ptxas` and
  NVVM, no `nvcc` driver. Refused with one line naming `--source redist`, before pip runs.
- A package (wheel or redist archive) that lacks what its component provides (`bin/nvcc`) is refused after
  extraction, before anything is moved into `--dest`.
- A server that cannot be reached: the error names `--source pypi` and `--mirror`.

pip runs for real against a local `--find-links` directory of generated wheels (`PIP_NO_INDEX`, no network);
the redist source against a generated tree or a closed port on 127.0.0.1. NVIDIA's server is never asked: the
default base is replaced by that closed port.
"""

from __future__ import annotations

import socket
from pathlib import Path

import pytest

from cudaship.cli.main import main
from cudaship.exitcodes import ExitCode
from cudaship.toolkit import install as installer
from tests.providers.conftest import make_wheel
from tests.toolkit.builders import COMPONENT_FILES, LINUX, build_redist, make_tar_xz, top_dir

WHEEL_TAG = "py3-none-manylinux_2_27_x86_64"


@pytest.fixture
def local_pip(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    """pip (run by `toolkit install --source pypi` as a child) sees only this directory of wheels."""
    links = tmp_path / "links"
    links.mkdir()
    monkeypatch.setenv("PIP_NO_INDEX", "1")
    monkeypatch.setenv("PIP_FIND_LINKS", str(links))
    monkeypatch.setenv("PIP_CONFIG_FILE", "/dev/null")
    monkeypatch.setenv("PIP_DISABLE_PIP_VERSION_CHECK", "1")
    return links


def _metapackage(links: Path, release: str, requirement: str) -> None:
    """NVIDIA's `cuda-toolkit==release` metapackage: one requirement behind the `nvcc` extra."""
    make_wheel(
        links, "cuda-toolkit", release, "py3-none-any", {}, (f'{requirement}; extra == "nvcc"',), ("nvcc",)
    )


def _install(tmp_path: Path, train: str, *extra: str) -> int:
    return main(
        [
            "toolkit",
            "install",
            train,
            "--platform",
            LINUX,
            "-c",
            "nvcc",
            "--dest",
            str(tmp_path / "cuda"),
            "--cache-dir",
            str(tmp_path / "cache"),
            "--retries",
            "0",
            *extra,
        ]
    )


def _error_lines(err: str) -> list[str]:
    return [line for line in err.splitlines() if line.startswith("cudaship: error:")]


def test_cu12_nvcc_from_pypi_is_refused_before_pip_runs(
    tmp_path: Path, local_pip: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """The issue's case: `toolkit install cu128 --source pypi -c nvcc` exited 0 with only ptxas in bin/. The
    index here serves what PyPI serves (a metapackage and an nvcc-cu12 wheel holding only ptxas): refused with
    one line, nothing at --dest, and pip never run (the refusal needs no network)."""
    _metapackage(local_pip, "12.8.1", "nvidia-cuda-nvcc-cu12==12.8.93")
    make_wheel(
        local_pip,
        "nvidia-cuda-nvcc-cu12",
        "12.8.93",
        WHEEL_TAG,
        {"nvidia/cuda_nvcc/bin/ptxas": b"\x7fELF ptxas\n", "nvidia/cuda_nvcc/__init__.py": b""},
    )
    code = _install(tmp_path, "cu128", "--source", "pypi")
    err = capsys.readouterr().err
    assert code == ExitCode.BAD_INPUT, err
    (line,) = _error_lines(err)
    assert "component nvcc cannot be assembled from PyPI for CUDA 12.8.1" in line
    assert "nvidia-cuda-nvcc-cu12 lacks bin/nvcc" in line and "--source redist" in line
    assert not (tmp_path / "cuda").exists()
    assert "pip download" not in err  # refused from the data alone, before pip asks any index


def test_cuda13_nvcc_wheel_without_nvcc_is_refused_after_extraction(
    tmp_path: Path, local_pip: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """A CUDA 13 nvcc wheel that (unlike NVIDIA's) holds no bin/nvcc: exit 2 naming the wheel and the missing
    path, and --dest never created."""
    _metapackage(local_pip, "13.0.2", "nvidia-cuda-nvcc==13.0.88")
    make_wheel(local_pip, "nvidia-cuda-nvcc", "13.0.88", WHEEL_TAG, {"nvidia/cu13/bin/ptxas": b"\x7fELF\n"})
    code = _install(tmp_path, "13.0.2", "--source", "pypi")
    err = capsys.readouterr().err
    assert code == ExitCode.BAD_INPUT, err
    (line,) = _error_lines(err)
    assert "component nvcc: nvidia_cuda_nvcc-13.0.88-" in line
    assert "holds no bin/nvcc, so the toolkit would not work; use --source redist" in line
    assert not (tmp_path / "cuda").exists()
    assert [p.name for p in tmp_path.iterdir() if p.name.startswith(".cuda.staging-")] == []


def test_cuda13_nvcc_wheel_with_nvcc_installs(
    tmp_path: Path, local_pip: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """The same index with nvcc in the wheel: installed, bin/nvcc in place (the check refuses only what lacks
    it)."""
    _metapackage(local_pip, "13.0.2", "nvidia-cuda-nvcc==13.0.88")
    make_wheel(
        local_pip,
        "nvidia-cuda-nvcc",
        "13.0.88",
        WHEEL_TAG,
        {"nvidia/cu13/bin/ptxas": b"\x7fELF\n", "nvidia/cu13/bin/nvcc": b"\x7fELF nvcc\n"},
    )
    code = _install(tmp_path, "13.0.2", "--source", "pypi", "-q")
    assert code == ExitCode.OK, capsys.readouterr().err
    assert (tmp_path / "cuda" / "bin" / "nvcc").read_bytes() == b"\x7fELF nvcc\n"


def test_redist_archive_without_nvcc_is_refused(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    """A mirror whose cuda_nvcc archive (checksum right) holds no bin/nvcc: exit 2, nothing at --dest."""
    files = {k: v for k, v in COMPONENT_FILES["cuda_nvcc"][LINUX].items() if k != "bin/nvcc"}
    archive = make_tar_xz(files, top_dir("cuda_nvcc", LINUX, "13.0.88"))
    tree = build_redist(tmp_path / "redist", platforms=(LINUX,), overrides={("cuda_nvcc", LINUX): archive})
    code = _install(tmp_path, "13.0.2", "--mirror", str(tree.root))
    err = capsys.readouterr().err
    assert code == ExitCode.BAD_INPUT, err
    (line,) = _error_lines(err)
    assert "component nvcc: cuda_nvcc-linux-x86_64-13.0.88-archive.tar.xz holds no bin/nvcc" in line
    assert not (tmp_path / "cuda").exists()


def _closed_port() -> int:
    """A port on 127.0.0.1 nothing listens on (bound, then closed): a connection is refused at once."""
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def test_unreachable_nvidia_server_names_the_other_sources(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    """No --mirror and NVIDIA's server unreachable (its base replaced by a closed port here): one line that
    says so and names --source pypi and --mirror."""
    monkeypatch.setattr(installer, "NVIDIA_REDIST", f"http://127.0.0.1:{_closed_port()}/redist")
    code = _install(tmp_path, "13.0.2")
    err = capsys.readouterr().err
    assert code == ExitCode.BAD_INPUT, err
    (line,) = _error_lines(err)
    assert "download failed after 1 attempt" in line
    assert "NVIDIA's server cannot be reached from here" in line
    assert "--source pypi" in line and "--mirror URL|DIR" in line
    assert not (tmp_path / "cuda").exists()


def test_unreachable_mirror_names_the_other_sources(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    code = _install(tmp_path, "13.0.2", "--mirror", f"http://127.0.0.1:{_closed_port()}/")
    err = capsys.readouterr().err
    assert code == ExitCode.BAD_INPUT, err
    (line,) = _error_lines(err)
    assert "the mirror cannot be reached from here" in line and "--source pypi" in line
