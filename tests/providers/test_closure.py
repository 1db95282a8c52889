"""Requirement expansion: markers for the target platform, extras (the wheel's and a requirement's, as in
``cuda-toolkit[cublas]``), transitivity, the first source that answers; installed environments and
wheelhouses as sources; the offline knowledge table."""

from __future__ import annotations

from pathlib import Path

from packaging.specifiers import SpecifierSet
from packaging.version import Version

from cudaship.knowledge.providers import builds_providing, conventions_for, known_distribution
from cudaship.providers.closure import resolve_closure, wheel_extras
from cudaship.providers.records import Distribution, Target
from cudaship.providers.sources import EnvSource, KnowledgeSource, WheelhouseSource
from tests.providers.conftest import make_wheel

LINUX = Target("linux", "x86_64", "3.11")


class Dists:
    """A source over hand-written distributions (newest matching version wins)."""

    label = "test distributions"

    def __init__(self, *dists: Distribution) -> None:
        self.dists = dists
        self.asked: list[str] = []

    def find(self, name: str, spec: SpecifierSet, target: Target) -> Distribution | None:
        self.asked.append(name)
        fitting = [
            d for d in self.dists if d.name == name and spec.contains(Version(d.version), prereleases=True)
        ]
        return max(fitting, key=lambda d: Version(d.version)) if fitting else None


def dist(
    name: str, version: str, files: tuple[str, ...] = (), requires: tuple[str, ...] = ()
) -> Distribution:
    return Distribution(name, version, requires, files, "test")


TOOLKIT = dist(
    "cuda-toolkit",
    "13.0.3.0",
    requires=(
        "nvidia-cublas==13.1.1.3.*; sys_platform == 'linux' and extra == 'cublas'",
        "nvidia-cuda-nvrtc==13.0.88.*; sys_platform == 'linux' and extra == 'cublas'",
        "nvidia-cuda-runtime==13.0.96.*; extra == 'cudart'",
        "nvidia-cufile==1.15.1.6.*; platform_machine == 'aarch64' and extra == 'cufile'",
    ),
)
SOURCE = Dists(
    TOOLKIT,
    dist("nvidia-cublas", "13.1.1.3", ("nvidia/cu13/lib/libcublas.so.13",)),
    dist("nvidia-cublas", "13.2.0.1", ("nvidia/cu13/lib/libcublas.so.13",)),
    dist("nvidia-cuda-nvrtc", "13.0.88", ("nvidia/cu13/lib/libnvrtc.so.13",)),
    dist("nvidia-cuda-runtime", "13.0.96", ("nvidia/cu13/lib/libcudart.so.13",)),
    dist("nvidia-cudnn-cu13", "9.24.0.43", ("nvidia/cudnn/lib/libcudnn.so.9",), ("nvidia-cublas",)),
    dist("windows-only", "1.0"),
)


def test_metapackage_extras_markers_and_transitivity() -> None:
    closure = resolve_closure(
        [
            "cuda-toolkit[cublas,cudart,cufile]==13.0.3",
            "nvidia-cudnn-cu13==9.24.0.43; platform_system == 'Linux'",
            "windows-only; sys_platform == 'win32'",
            "nvidia-cuda-runtime; extra == 'cuda'",
        ],
        LINUX,
        [SOURCE],
    )
    got = {r.dist.name: r for r in closure.reached}
    assert set(got) == {
        "cuda-toolkit",
        "nvidia-cublas",
        "nvidia-cuda-nvrtc",
        "nvidia-cuda-runtime",
        "nvidia-cudnn-cu13",
    }
    # the metapackage's pin wins over cudnn's unpinned nvidia-cublas (reached first, breadth first)
    assert got["nvidia-cublas"].dist.version == "13.1.1.3"
    assert (
        got["nvidia-cublas"].label()
        == "nvidia-cublas 13.1.1.3 via cuda-toolkit[cublas,cudart,cufile]==13.0.3"
    )
    # required unconditionally through cuda-toolkit[cudart] even though the wheel's extra "cuda" names it too
    assert got["nvidia-cuda-runtime"].extra is None
    assert "nvidia-cufile" not in got  # aarch64 only


def test_extra_only_requirements_are_remembered() -> None:
    closure = resolve_closure(
        ["nvidia-cuda-runtime~=13.0; extra == 'cuda'", 'nvidia-cudnn-cu13~=9.0; extra == "cudnn"'],
        LINUX,
        [SOURCE],
    )
    got = {r.dist.name: r.extra for r in closure.reached}
    assert got == {"nvidia-cuda-runtime": "cuda", "nvidia-cudnn-cu13": "cudnn", "nvidia-cublas": "cudnn"}
    assert wheel_extras(["a; extra == 'cuda'"], ["ctk"]) == ["ctk", "cuda"]


def test_missing_requirement_is_reported() -> None:
    closure = resolve_closure(["nvidia-nvshmem-cu13==3.4.5"], LINUX, [SOURCE])
    assert closure.reached == ()
    assert closure.unresolved and "nvidia-nvshmem-cu13" in closure.unresolved[0].reason


def test_installed_environment(tmp_path: Path) -> None:
    site = tmp_path / "site-packages"
    info = site / "nvidia_cublas-13.1.1.3.dist-info"
    info.mkdir(parents=True)
    (info / "METADATA").write_text("Metadata-Version: 2.1\nName: nvidia-cublas\nVersion: 13.1.1.3\n")
    (info / "RECORD").write_text(
        "nvidia/cu13/lib/libcublas.so.13,sha256=x,1\n../../bin/tool,,\nnvidia_cublas-13.1.1.3.dist-info/RECORD,,\n"
    )
    env = EnvSource(str(site))
    found = env.find("nvidia_cublas", SpecifierSet("==13.1.1.3"), LINUX)
    assert found is not None
    assert found.files == ("nvidia/cu13/lib/libcublas.so.13", "nvidia_cublas-13.1.1.3.dist-info/RECORD")
    assert env.find("nvidia-cublas", SpecifierSet(">=14"), LINUX) is None


def test_wheelhouse_picks_a_fitting_wheel(tmp_path: Path) -> None:
    house = tmp_path / "house"
    house.mkdir()
    make_wheel(
        house,
        "nvidia-curand",
        "10.4.0.35",
        "py3-none-manylinux_2_27_x86_64",
        {"nvidia/cu13/lib/libcurand.so.10": b"x"},
    )
    make_wheel(
        house,
        "nvidia-curand",
        "10.5.0.1",
        "py3-none-win_amd64",
        {"nvidia/cu13/bin/x86_64/curand64_10.dll": b"x"},
    )
    source = WheelhouseSource(str(house))
    found = source.find("nvidia-curand", SpecifierSet(), LINUX)
    assert found is not None and found.version == "10.4.0.35"
    assert found.files[0] == "nvidia/cu13/lib/libcurand.so.10"


def test_knowledge_table() -> None:
    toolkit = known_distribution("cuda-toolkit", SpecifierSet("==12.*"), "linux")
    assert toolkit is not None and 'nvidia-cublas-cu12; extra == "cublas"' in toolkit.requires_dist
    closure = resolve_closure(["cuda-toolkit[cublas]==13.0.3"], LINUX, [], fallback=KnowledgeSource())
    files = {f for r in closure.reached for f in r.dist.files}
    assert "nvidia/cu13/lib/libcublas.so.13" in files and "nvidia/cu13/lib/libnvrtc.so.13" in files
    assert any(c.preloads for c in conventions_for("torch"))
    assert any("torch/lib/libtorch_global_deps.so" in c.shims for c in conventions_for("torch"))
    assert conventions_for("cupy-cuda12x")[0].runtime_lookup
    assert conventions_for("anything", ("cuda-pathfinder",))
    build = builds_providing("torch", "CUDART64_12.DLL", "windows")
    assert build is not None and build.cuda == 12


def test_installed_environment_of_an_interpreter() -> None:
    import sys

    env = EnvSource(sys.executable)
    found = env.find("packaging", SpecifierSet(), LINUX)
    assert found is not None and found.source.startswith("env ")
    assert "packaging/version.py" in found.files


def test_pre_releases_only_when_nothing_else_fits() -> None:
    from cudaship.providers.select import Candidate, best

    def cand(v: str) -> Candidate:
        return Candidate(f"protobuf-{v}-py3-none-any.whl", Version(v), "x")

    got = best([cand("6.33.0"), cand("7.37.0rc1")], SpecifierSet(">=4.25.8"), LINUX)
    assert got is not None and str(got.version) == "6.33.0"
    got = best([cand("6.33.0"), cand("7.37.0rc1")], SpecifierSet(">=7.0rc1"), LINUX)
    assert got is not None and str(got.version) == "7.37.0rc1"
    got = best([cand("7.37.0rc1")], SpecifierSet(">=7"), LINUX)
    assert got is not None and str(got.version) == "7.37.0rc1"
