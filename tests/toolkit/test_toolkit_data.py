"""The toolkit tables: train -> release, components and sets -> each source's names."""

from __future__ import annotations

import pytest

from cudaship.errors import KnowledgeError, UnknownTrainError
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
    ("text", "error", "message"),
    [
        pytest.param(
            "11.2", UnknownTrainError, "unknown CUDA train '11.2'; known trains: 12.6,", id="old-train"
        ),
        pytest.param("13.0.7", UnknownTrainError, "unknown CUDA release '13.0.7'", id="unknown-patch"),
        pytest.param("thirteen", KnowledgeError, "known trains: 12.6", id="not-a-train"),
    ],
)
def test_unknown_trains_list_the_known(text: str, error: type[Exception], message: str) -> None:
    with pytest.raises(error, match=message):
        toolkit_data.resolve_release(text)


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
