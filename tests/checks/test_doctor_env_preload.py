"""doctor --env against the real loader on the H200's situation (tests/fixtures/preload_env.py): a package
whose import preloads a CUDA library by path puts it in the process before anything needs it by SONAME, so a
system copy (LD_LIBRARY_PATH, ld.so.cache) is not what later lookups get; without the preload, the system
copy really shadows the package's own; two identical copies never "shadow" each other."""

from __future__ import annotations

import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from cudaship.analysis.envload import Edge
from cudaship.analysis.loader import How
from cudaship.checks.environment import doctor_env
from cudaship.inspection.environment import ld_cache_names
from cudaship.records.binary import Machine
from cudaship.records.findings import Severity
from tests.fixtures.envs import CUPY_CU12, variant_env
from tests.fixtures.preload_env import EXT, build_preload_env, build_system_cudart, mapped

pytestmark = [
    pytest.mark.network,
    pytest.mark.skipif(
        shutil.which("gcc") is None or not sys.platform.startswith("linux"), reason="needs gcc and glibc"
    ),
]

#: what a process does, in the order the simulation loads: the preloading package, the other extension
#: modules, then what is loaded later by name (torch.lazy(), like torch's lazily loaded linalg and NVRTC)
IMPORTS = "import torch, sysbound._ext, rpathpkg._rp; torch.lazy()"
MACHINE_CUDART = "/usr/local/cuda-13.0/lib/libcudart.so.13"
ldconfig = shutil.which("ldconfig") or ("/sbin/ldconfig" if Path("/sbin/ldconfig").exists() else None)


@pytest.fixture(scope="module")
def preloading(tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, Path]:
    return build_preload_env(tmp_path_factory.mktemp("torch-2.11"), torch_version="2.11.0")


@pytest.fixture(scope="module")
def not_preloading(tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, Path]:
    return build_preload_env(tmp_path_factory.mktemp("torch-2.5"), torch_version="2.5.0")


@pytest.fixture(scope="module")
def system_dir(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return build_system_cudart(tmp_path_factory.mktemp("system"))


def _cudart_edges(edges: tuple[Edge, ...], site: Path) -> dict[str, tuple[str | None, How | None]]:
    return {
        str(Path(e.importer).relative_to(site)): (e.target, e.how)
        for e in edges
        if e.name == "libcudart.so.13"
    }


def _real_cudart(python: Path, env: dict[str, str] | None = None) -> list[str]:
    return [p for p in mapped(python, IMPORTS, env) if Path(p).name.startswith("libcudart")]


def test_a_preloaded_library_is_what_later_lookups_by_soname_find(
    preloading: tuple[Path, Path], system_dir: Path
) -> None:
    python, site = preloading
    wheel_copy = str(site / "nvidia" / "cu13" / "lib" / "libcudart.so.13")
    # the real loader: LD_LIBRARY_PATH holds another libcudart.so.13; only the wheel's is mapped
    assert _real_cudart(python, {"LD_LIBRARY_PATH": str(system_dir)}) == [wheel_copy]
    report = doctor_env([str(site)], ld_library_path=str(system_dir), ld_cache=None)
    edges = _cudart_edges(report.graph.edges, site)
    # sysbound's extension has no search path of its own and torch.lazy()'s library is loaded later: both
    # find the copy torch's import preloaded by its path
    assert edges == {
        f"sysbound/_ext{EXT}": (wheel_copy, How.LOADED),
        "torch/lib/libtorch_lazy.so": (wheel_copy, How.LOADED),
    }
    first = report.graph.first_load(wheel_copy)
    assert first is not None and first.preloaded_by == "torch" and first.reachable
    assert not [f for f in report.findings if f.rule in ("shadowed", "identical-copies", "duplicate")]
    assert report.errors == 0


def test_without_the_preload_the_system_copy_really_shadows(
    not_preloading: tuple[Path, Path], system_dir: Path
) -> None:
    python, site = not_preloading
    system_copy = str(system_dir / "libcudart.so.13")
    assert _real_cudart(python, {"LD_LIBRARY_PATH": str(system_dir)}) == [system_copy]
    report = doctor_env([str(site)], ld_library_path=str(system_dir), ld_cache=None)
    edges = _cudart_edges(report.graph.edges, site)
    assert edges[f"sysbound/_ext{EXT}"] == (system_copy, How.LD_LIBRARY_PATH)
    assert edges["torch/lib/libtorch_lazy.so"] == (system_copy, How.LOADED)
    (shadowed,) = [f for f in report.findings if f.rule == "shadowed"]
    assert shadowed.severity is Severity.WARNING and shadowed.subject.file == str(
        site / "torch/lib/libtorch_lazy.so"
    )
    assert shadowed.subject.target == system_copy
    assert f"by sysbound/_ext{EXT}, through LD_LIBRARY_PATH" in shadowed.reason


def _machine_cache_lists_cuda() -> bool:
    return ld_cache_names("/etc/ld.so.cache", Machine.X86_64).get("libcudart.so.13") == MACHINE_CUDART


@pytest.mark.skipif(
    not _machine_cache_lists_cuda(), reason=f"/etc/ld.so.cache does not list {MACHINE_CUDART}"
)
def test_the_h200_case_with_this_machines_cuda_toolkit_in_ld_so_cache(
    preloading: tuple[Path, Path], not_preloading: tuple[Path, Path]
) -> None:
    """The lent H200: CUDA 13.0 in /usr/local/cuda listed in ld.so.cache, torch's nvidia/cu13/lib copies
    mapped. The same here with this machine's toolkit: no shadowing where the process shows none, and the
    shadowing the process does show without the preload."""
    python, site = preloading
    wheel_copy = str(site / "nvidia" / "cu13" / "lib" / "libcudart.so.13")
    assert _real_cudart(python) == [wheel_copy]
    report = doctor_env([str(site)], ld_library_path="")
    assert {t for t, _ in _cudart_edges(report.graph.edges, site).values()} == {wheel_copy}
    assert not [f for f in report.findings if f.rule == "shadowed"]
    python, site = not_preloading
    assert _real_cudart(python) == [MACHINE_CUDART]
    report = doctor_env([str(site)], ld_library_path="")
    assert _cudart_edges(report.graph.edges, site)[f"sysbound/_ext{EXT}"] == (MACHINE_CUDART, How.CACHE)
    (shadowed,) = [f for f in report.findings if f.rule == "shadowed"]
    assert shadowed.subject.target == MACHINE_CUDART and "through ld.so.cache" in shadowed.reason


@pytest.mark.skipif(ldconfig is None, reason="needs ldconfig")
def test_an_identical_copy_in_the_cache_is_a_note_not_shadowing(
    not_preloading: tuple[Path, Path], tmp_path: Path
) -> None:
    """A synthetic ld.so.cache (built by ldconfig) listing a byte-identical copy of the wheel's libcudart."""
    _, site = not_preloading
    libs = tmp_path / "cuda" / "lib"
    libs.mkdir(parents=True)
    wheel_copy = site / "nvidia" / "cu13" / "lib" / "libcudart.so.13"
    shutil.copy(wheel_copy, libs / "libcudart.so.13")
    conf = tmp_path / "ld.so.conf"
    conf.write_text(f"{libs}\n")
    cache = tmp_path / "ld.so.cache"
    assert ldconfig is not None
    subprocess.run([ldconfig, "-C", str(cache), "-f", str(conf)], check=True, capture_output=True)
    report = doctor_env([str(site)], ld_library_path="", ld_cache=str(cache))
    edges = _cudart_edges(report.graph.edges, site)
    assert edges[f"sysbound/_ext{EXT}"] == (str(libs / "libcudart.so.13"), How.CACHE)
    assert not [f for f in report.findings if f.rule == "shadowed"]
    (note,) = [f for f in report.findings if f.rule == "identical-copies"]
    assert note.severity is Severity.NOTE and note.subject.target == str(libs / "libcudart.so.13")
    assert "same size and sha256" in note.reason
    # one byte changed: the same situation is shadowing again
    data = bytearray((libs / "libcudart.so.13").read_bytes())
    data[-1] ^= 0xFF
    (libs / "libcudart.so.13").write_bytes(bytes(data))
    changed = doctor_env([str(site)], ld_library_path="", ld_cache=str(cache))
    assert [f.rule for f in changed.findings if f.rule in ("shadowed", "identical-copies")] == ["shadowed"]


@pytest.fixture(scope="module")
def torch_cupy_env(torch_cu12_env: Path) -> Path:
    """torch 2.8.0 (CUDA 12) with the NVIDIA wheels it pins, and cupy-cuda12x 14.2.0 beside it."""
    return variant_env("torch-2.8.0-cu12-cupy-14.2.0", torch_cu12_env, CUPY_CU12[0])


@pytest.mark.skipif(ldconfig is None, reason="needs ldconfig")
def test_the_h200_false_shadowing_with_real_torch_and_cupy_wheels(
    torch_cupy_env: Path, tmp_path: Path
) -> None:
    """What doctor --env said on the H200, with real wheels: a CUDA toolkit in ld.so.cache (here other copies
    of libnvrtc.so.12 and libcusolver.so.11, one byte changed, in a cache ldconfig builds) was reported to
    shadow torch's lazily loaded libcaffe2_nvrtc.so and libtorch_cuda_linalg.so, because cupy's extension
    modules (no search path) were simulated to load the cache's copies first. torch's import preloads NVRTC
    from the wheel (torch 2.8.0's _load_global_deps) and cupy takes cuSOLVER through cuda-pathfinder, which
    looks at the installed wheels before the system: the wheel copies are what every later lookup gets."""
    site = torch_cupy_env
    libs = tmp_path / "cuda" / "lib"
    libs.mkdir(parents=True)
    for rel in ("nvidia/cuda_nvrtc/lib/libnvrtc.so.12", "nvidia/cusolver/lib/libcusolver.so.11"):
        data = bytearray((site / rel).read_bytes())
        data[-1] ^= 0xFF
        (libs / Path(rel).name).write_bytes(bytes(data))
    (tmp_path / "ld.so.conf").write_text(f"{libs}\n")
    cache = tmp_path / "ld.so.cache"
    assert ldconfig is not None
    conf = str(tmp_path / "ld.so.conf")
    subprocess.run([ldconfig, "-C", str(cache), "-f", conf], check=True, capture_output=True)
    report = doctor_env([str(site)], ld_library_path="", ld_cache=str(cache))
    edges = {(str(Path(e.importer).relative_to(site)), e.name): e for e in report.graph.edges}
    nvrtc = str(site / "nvidia/cuda_nvrtc/lib/libnvrtc.so.12")
    cusolver = str(site / "nvidia/cusolver/lib/libcusolver.so.11")
    first = report.graph.first_load(nvrtc)
    assert first is not None and first.preloaded_by == "torch"
    jitify = edges[("cupy/cuda/jitify.cpython-312-x86_64-linux-gnu.so", "libnvrtc.so.12")]
    assert (jitify.target, jitify.how) == (nvrtc, How.LOADED)
    solver = edges[("cupy_backends/cuda/libs/cusolver.cpython-312-x86_64-linux-gnu.so", "libcusolver.so.11")]
    assert (solver.target, solver.how) == (cusolver, How.RUNTIME)
    assert edges[("torch/lib/libcaffe2_nvrtc.so", "libnvrtc.so.12")].target == nvrtc
    assert edges[("torch/lib/libtorch_cuda_linalg.so", "libcusolver.so.11")].target == cusolver
    assert not [f for f in report.findings if f.rule == "shadowed"]
    # nothing of the cache's copies is in the process
    assert not [o for o in report.graph.loaded if o.path.startswith(str(libs)) and o.reachable]
