"""Loader conventions as data (knowledge/data/providers.toml): libraries a package loads only on demand are
named, so an import nothing provides is a note for them (audit and doctor --env), not an error."""

from __future__ import annotations

import fnmatch

import pytest

from cudaship.knowledge.providers import conventions_for


def _what(project: str, path: str) -> str | None:
    for convention in conventions_for(project):
        for pattern, what in convention.on_demand:
            if fnmatch.fnmatchcase(path, pattern):
                return what
    return None


@pytest.mark.parametrize(
    ("project", "path", "loaded_by"),
    [
        # seen on the lent H200 image's environment: doctor --env reported these as errors before
        ("mpi4py", "mpi4py/MPI.mpich.cpython-312-x86_64-linux-gnu.so", "MPI implementation"),
        ("numba", "numba/np/ufunc/tbbpool.cpython-312-x86_64-linux-gnu.so", "TBB threading layer"),
        ("numba", "numba/np/ufunc/omppool.cpython-312-x86_64-linux-gnu.so", "OpenMP threading layer"),
        ("cupy-cuda13x", "cupy_backends/cuda/libs/cutensor.cpython-312-x86_64-linux-gnu.so", "cupy.cutensor"),
        # the accuracy corpus (issue 21): plugins selected by an environment variable, with their own runtime
        ("nvidia-nvshmem-cu12", "nvidia/nvshmem/lib/nvshmem_bootstrap_mpi.so.3", "NVSHMEM_BOOTSTRAP"),
        ("nvidia-nvshmem-cu12", "nvidia/nvshmem/lib/nvshmem_transport_ucx.so.7", "NVSHMEM_REMOTE_TRANSPORT"),
        ("nvidia-cudss-cu12", "nvidia/cu12/lib/libcudss_commlayer_openmpi.so.1", "CUDSS_COMM_LIB"),
        ("nvidia-cudss-cu12", "nvidia/cu12/lib/libcudss_mtlayer_gomp.so.1", "CUDSS_THREADING_LIB"),
    ],
    ids=[
        "mpi4py-mpich",
        "numba-tbb",
        "numba-omp",
        "cupy-cutensor",
        "nvshmem-bootstrap",
        "nvshmem-transport",
        "cudss-comm",
        "cudss-mt",
    ],
)
def test_on_demand_libraries_are_named(project: str, path: str, loaded_by: str) -> None:
    what = _what(project, path)
    assert what is not None and loaded_by in what


@pytest.mark.parametrize(
    ("project", "path"),
    [
        ("mpi4py", "mpi4py/MPI.cpython-312-x86_64-linux-gnu.so"),  # the default module is always loaded
        ("numba", "numba/np/ufunc/workqueue.cpython-312-x86_64-linux-gnu.so"),  # always present
        ("numba", "numba/_helperlib.cpython-312-x86_64-linux-gnu.so"),
        ("nvidia-nvshmem-cu12", "nvidia/nvshmem/lib/libnvshmem_host.so.3"),  # the library itself
        ("nvidia-cudss-cu12", "nvidia/cu12/lib/libcudss.so.1"),
    ],
    ids=["mpi4py-default", "numba-workqueue", "numba-helperlib", "nvshmem-host", "cudss"],
)
def test_libraries_always_loaded_are_not_on_demand(project: str, path: str) -> None:
    assert _what(project, path) is None
