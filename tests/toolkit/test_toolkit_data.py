"""The toolkit tables: train -> release, components and sets -> each source's names."""

from __future__ import annotations

import pytest

from cudaship.errors import KnowledgeError, UnknownTrainError
from cudaship.exitcodes import ExitCode
from cudaship.knowledge import toolkit_data
from cudaship.knowledge.toolkit_data import SourceName


@pytest.mark.parametrize(
    ("text", "release"),
    [
        pytest.param("13.0", "13.0.2", id="13.0"),
        pytest.param("cu132", "13.2.2", id="cu132"),
        pytest.param("13.4", "13.4.1", id="13.4"),
        pytest.param("12.6", "12.6.3", id="12.6"),
        pytest.param("12.8", "12.8.1", id="12.8"),
        pytest.param("12.9", "12.9.1", id="12.9"),
        pytest.param("12.4", "12.4.1", id="12.4"),
        pytest.param("cu118", "11.8.0", id="cu118"),
        pytest.param("11.4", "11.4.4", id="11.4"),
        pytest.param("12.0.0", "12.0.0", id="exact-12.0.0"),
        pytest.param("13.2.1", "13.2.1", id="exact-older"),
        pytest.param("13.0.2", "13.0.2", id="exact-default"),
    ],
)
def test_resolve_release(text: str, release: str) -> None:
    assert toolkit_data.resolve_release(text) == release


def test_every_train_default_is_a_known_release() -> None:
    for train, release in toolkit_data.trains().items():
        assert release in toolkit_data.releases(), train
        assert release.startswith(train + ".")


@pytest.mark.parametrize(
    ("text", "message"),
    [
        pytest.param(
            "14.9", r"TRAIN '14.9': unknown CUDA train 14.9; toolkit install knows 11.4, ", id="new"
        ),
        pytest.param("13.0.7", r"TRAIN '13.0.7': unknown CUDA release 13.0.7; .* knows 13.0.0, ", id="patch"),
        pytest.param("thirteen", r"TRAIN 'thirteen': not a CUDA train \(expected cuXY", id="not-a-train"),
        pytest.param(
            "11.2", r"CUDA 11.2 is not installable: NVIDIA's redist manifests before 11.4.2", id="old"
        ),
        pytest.param("11.4.1", r"CUDA 11.4.1 is not installable: .*; use 11.4 \(11.4.4\)", id="old-patch"),
        pytest.param(  # refused as every command refuses it (issue 35)
            "cu127",
            r"TRAIN 'cu127': CUDA 12.7 was never published; the published CUDA releases are 11.0,",
            id="never",
        ),
    ],
)
def test_trains_it_cannot_install_are_one_error_with_the_reason(text: str, message: str) -> None:
    with pytest.raises(UnknownTrainError, match=message) as caught:
        toolkit_data.resolve_release(text)
    assert caught.value.exit_code == ExitCode.UNKNOWN_TRAIN


def test_every_train_nvidia_publishes_redist_manifests_for_installs() -> None:
    """From 11.4 (the first train with a manifest holding cudart and cccl) to the newest, every train either
    resolves to a release or is listed as not installable with its reason: no gap answers 'unknown'."""
    newest = max(toolkit_data.trains(), key=lambda t: tuple(map(int, t.split("."))))
    lines = [f"11.{m}" for m in range(4, 9)] + [f"12.{m}" for m in range(10)]
    lines += [f"13.{m}" for m in range(int(newest.split(".")[1]) + 1)]
    for line in lines:
        if line in toolkit_data.not_installable():
            continue
        assert toolkit_data.resolve_release(line).startswith(line + "."), line
    for old in ("11.0", "11.1", "11.2", "11.3"):
        assert old in toolkit_data.not_installable()


def test_release_notes_follow_the_platform() -> None:
    linux = toolkit_data.release_notes("13.0.2", "linux-x86_64")
    windows = toolkit_data.release_notes("13.0.2", "windows-x86_64")
    assert linux is not None and windows is not None
    assert "bin\\x64" in windows and "DLL" in windows
    assert "bin\\x64" not in linux and "DLL" not in linux and "Windows" not in linux
    assert linux in windows  # the notes for every platform come first


@pytest.mark.parametrize(
    ("requested", "expected"),
    [
        pytest.param(None, ("nvcc", "crt", "nvvm", "cudart", "cccl"), id="default"),
        pytest.param(["cudart"], ("cudart",), id="one"),
        pytest.param(["cublas,cudart", "runtime"], ("cudart", "cublas"), id="comma-and-set-deduped"),
        pytest.param(["JIT"], ("nvrtc", "nvjitlink"), id="set-case-insensitive"),
    ],
)
def test_expand_components(requested: list[str] | None, expected: tuple[str, ...]) -> None:
    assert toolkit_data.expand_components(requested) == expected


def test_unknown_component_lists_names_and_sets() -> None:
    with pytest.raises(
        KnowledgeError, match=r"unknown component 'cudnn'; components: nvcc, .*; sets: default"
    ):
        toolkit_data.expand_components(["cudnn"])


@pytest.mark.parametrize(
    ("component", "source", "release", "expected"),
    [
        pytest.param("crt", "redist", "12.9.1", SourceName(None, None, "nvcc"), id="crt-in-nvcc-12"),
        pytest.param("crt", "redist", "13.0.2", SourceName("cuda_crt"), id="crt-own-13"),
        pytest.param("nvvm", "redist", "13.2.2", SourceName("libnvvm"), id="libnvvm-13"),
        pytest.param(
            "cudart", "pypi", "12.6.3", SourceName("nvidia-cuda-runtime-cu12", "cudart"), id="cu12-name"
        ),
        pytest.param("cudart", "pypi", "13.0.2", SourceName("nvidia-cuda-runtime", "cudart"), id="cu13-name"),
        pytest.param("cuobjdump", "pypi", "13.0.2", None, id="not-on-pypi-before-13.2"),
        pytest.param(
            "cudart", "pypi", "11.8.0", SourceName("nvidia-cuda-runtime-cu11", "cudart"), id="cu11-name"
        ),
        pytest.param("nvjitlink", "redist", "11.8.0", None, id="no-nvjitlink-before-12.0"),
        pytest.param("nvjitlink", "redist", "12.0.1", SourceName("libnvjitlink"), id="nvjitlink-12.0"),
        pytest.param("nvfatbin", "redist", "12.3.2", None, id="no-nvfatbin-before-12.4"),
        pytest.param(
            "cuobjdump", "pypi", "13.2.2", SourceName("nvidia-cuda-cuobjdump", "cuobjdump"), id="cuobjdump"
        ),
    ],
)
def test_source_names_change_across_releases(
    component: str, source: str, release: str, expected: SourceName | None
) -> None:
    assert toolkit_data.source_name(component, source, release) == expected


def test_component_for_pypi_project() -> None:
    assert toolkit_data.component_for_pypi_project("nvidia_cuda_nvcc", "13.0.2") == "nvcc"
    assert toolkit_data.component_for_pypi_project("nvidia-cublas-cu12", "12.9.1") == "cublas"
    assert toolkit_data.component_for_pypi_project("numpy", "13.0.2") is None
