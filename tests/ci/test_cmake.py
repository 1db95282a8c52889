"""The decisions of `cudaship cmake` for each (platform, train, environment) combination, and its probes."""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
from dataclasses import dataclass, field
from pathlib import Path

import pytest

from cudaship.ci import archs as ci_archs
from cudaship.ci import cmake
from cudaship.ci.cmake import BuildHost, Toolkit
from cudaship.cli.main import main
from cudaship.config import ProjectConfig
from cudaship.errors import ToolkitError, UsageError
from cudaship.knowledge.archs import format_arch_list
from cudaship.render.table import CMAKE, render
from tests.toolkit.builders import LINUX as REDIST_LINUX
from tests.toolkit.builders import build_redist

TABLE = ci_archs.arch_table(ProjectConfig({}, None))
ZC = "-Xcompiler=/Zc:preprocessor"


def toolkit(release: str, root: str = "/opt/cuda") -> Toolkit:
    return Toolkit(Path(root), "CUDA_HOME", None, release, "cuda.h")


def make_plan(
    platform: str, train: str, host: BuildHost, *, std: int | None = None, tk: str | Toolkit | None = "match"
) -> cmake.CMakePlan:
    info = ci_archs.train_info(train)
    machine = cmake.parse_platform(platform)[2]
    located = toolkit(info.version) if tk == "match" else tk
    assert not isinstance(located, str)
    return cmake.plan(info, platform, ci_archs.lookup(TABLE, info.tag, machine), host, located, std)


@dataclass
class Case:
    platform: str
    train: str
    host: BuildHost
    generator: str
    set_: dict[str, str] = field(default_factory=dict)  #: cache entries that must have these values
    unset: tuple[str, ...] = ()  #: cache entries that must be absent
    toolset: str | None = None
    reason: dict[str, str] = field(default_factory=dict)  #: decision key -> substring of its reason
    std: int | None = None


LINUX = BuildHost("linux", ninja="/usr/bin/ninja")
LINUX_NO_NINJA = BuildHost("linux")
WIN = BuildHost("windows", ninja="C:/ninja.exe", clang_cl="C:/LLVM/bin/clang-cl.exe")
WIN_NO_NINJA = BuildHost("windows", clang_cl="C:/LLVM/bin/clang-cl.exe")

CASES = {
    "linux-cu130-ninja": Case(
        "linux-x86_64",
        "cu130",
        LINUX,
        "Ninja",
        set_={
            "CMAKE_BUILD_TYPE": "Release",
            "CMAKE_CUDA_COMPILER": "/opt/cuda/bin/nvcc",
            "CUDAToolkit_ROOT": "/opt/cuda",
            "CUDASHIP_HOST_EXECUTABLE_SUFFIX": "",
        },
        unset=("CMAKE_CUDA_FLAGS", "CMAKE_C_COMPILER", "CMAKE_CUDA_HOST_COMPILER", "CMAKE_CUDA_STANDARD"),
        reason={"compilers": "nvcc uses the host c++", "CMAKE_CUDA_STANDARD": "no --cxx-standard"},
    ),
    "linux-cu132-makefiles": Case(
        "linux-x86_64",
        "cu132",
        LINUX_NO_NINJA,
        "Unix Makefiles",
        reason={"generator": "ninja is not on PATH"},
    ),
    "linux-aarch64-cu130": Case("linux-aarch64", "cu130", LINUX, "Ninja"),
    "linux-cudacxx-kept": Case(
        "linux-x86_64",
        "cu130",
        BuildHost("linux", ninja="ninja", cudacxx="nvcc -allow-unsupported-compiler"),
        "Ninja",
        unset=("CMAKE_CUDA_COMPILER",),
        reason={"CMAKE_CUDA_COMPILER": "-allow-unsupported-compiler) still apply"},
    ),
    "windows-cu132-ninja": Case(
        "windows-x86_64",
        "cu132",
        WIN,
        "Ninja Multi-Config",
        set_={
            "CMAKE_C_COMPILER": "clang-cl",
            "CMAKE_CXX_COMPILER": "clang-cl",
            "CMAKE_CUDA_HOST_COMPILER": "cl.exe",
            "CMAKE_CUDA_COMPILER": "/opt/cuda/bin/nvcc.exe",
            "CMAKE_CUDA_FLAGS": ZC,
            "CMAKE_DEFAULT_BUILD_TYPE": "Release",
            "CUDASHIP_HOST_EXECUTABLE_SUFFIX": ".exe",
        },
        unset=("CMAKE_BUILD_TYPE",),
        reason={
            "generator": "fails compiler identification under the ClangCL toolset",
            "CMAKE_CUDA_FLAGS": "traditional preprocessor",
        },
    ),
    "windows-cu134-ninja": Case(
        "windows-x86_64", "cu134", WIN, "Ninja Multi-Config", set_={"CMAKE_CUDA_FLAGS": ZC}
    ),
    "windows-cu130-no-preprocessor-flag": Case(
        "windows-x86_64",
        "cu130",
        WIN,
        "Ninja Multi-Config",
        unset=("CMAKE_CUDA_FLAGS",),
        reason={"CMAKE_CUDA_FLAGS": "no extra CUDA flags for CUDA 13.0 on windows"},
    ),
    "windows-cu126-no-preprocessor-flag": Case(
        "windows-x86_64", "cu126", WIN, "Ninja Multi-Config", unset=("CMAKE_CUDA_FLAGS",)
    ),
    "windows-cu132-visual-studio-kept": Case(
        "windows-x86_64",
        "cu132",
        WIN_NO_NINJA,
        "Visual Studio 17 2022",
        toolset="cuda=/opt/cuda",
        set_={"CMAKE_CUDA_FLAGS": ZC, "CMAKE_CONFIGURATION_TYPES": "Release;RelWithDebInfo;Debug"},
        unset=(
            "CMAKE_C_COMPILER",
            "CMAKE_CXX_COMPILER",
            "CMAKE_CUDA_HOST_COMPILER",
            "CMAKE_CUDA_COMPILER",
            "CMAKE_DEFAULT_BUILD_TYPE",
            "CMAKE_BUILD_TYPE",
        ),
        reason={
            "generator": "not ClangCL",
            "toolset": "cuda=<toolkit>",
            "CMAKE_CUDA_COMPILER": "from its CUDA toolset",
        },
    ),
    "windows-cudacxx-kept": Case(
        "windows-x86_64",
        "cu132",
        BuildHost("windows", ninja="ninja", clang_cl="clang-cl", cudacxx="nvcc.exe"),
        "Ninja Multi-Config",
        unset=("CMAKE_CUDA_COMPILER",),
        set_={"CMAKE_CUDA_HOST_COMPILER": "cl.exe"},
        reason={"CMAKE_CUDA_COMPILER": "CUDACXX is set"},
    ),
    "windows-cudaflags-kept-in-front": Case(
        "windows-x86_64",
        "cu132",
        BuildHost("windows", ninja="ninja", clang_cl="clang-cl", cudaflags="-lineinfo"),
        "Ninja Multi-Config",
        set_={"CMAKE_CUDA_FLAGS": f"-lineinfo {ZC}"},
        reason={"CMAKE_CUDA_FLAGS": "CUDAFLAGS kept in front"},
    ),
    "windows-target-from-linux-host": Case(
        "windows-x86_64",
        "cu132",
        LINUX,
        "Ninja Multi-Config",
        set_={"CUDASHIP_HOST_EXECUTABLE_SUFFIX": ""},
        reason={"CUDASHIP_HOST_EXECUTABLE_SUFFIX": "build host's executable suffix"},
    ),
    "cxx20-cuda-follows": Case(
        "linux-x86_64",
        "cu130",
        LINUX,
        "Ninja",
        std=20,
        set_={
            "CMAKE_CXX_STANDARD": "20",
            "CMAKE_CUDA_STANDARD": "20",
            "CMAKE_CUDA_STANDARD_REQUIRED": "ON",
            "CMAKE_CXX_STANDARD_REQUIRED": "ON",
        },
        reason={"CMAKE_CUDA_STANDARD": "does not reach nvcc"},
    ),
    "cxx17-windows": Case(
        "windows-x86_64", "cu132", WIN, "Ninja Multi-Config", std=17, set_={"CMAKE_CUDA_STANDARD": "17"}
    ),
}


@pytest.mark.parametrize("case", list(CASES.values()), ids=list(CASES))
def test_plan_decisions(case: Case) -> None:
    p = make_plan(case.platform, case.train, case.host, std=case.std)
    assert p.generator == case.generator
    assert p.toolset == case.toolset
    for name, value in case.set_.items():
        entry = p.entry(name)
        assert entry is not None, name
        assert entry.value == value, name
    for name in case.unset:
        assert p.entry(name) is None, name
    decisions = {d.key: d for d in p.decisions}
    for key, text in case.reason.items():
        assert text in decisions[key].reason, (key, decisions[key].reason)
    # every cache entry is a decision with a reason; the arch list is the arch table's, spelled for CMake
    for entry in p.entries:
        assert decisions[entry.name].value == entry.value and entry.reason
    archs = ci_archs.lookup(TABLE, case.train, p.machine)
    # one spelling with `arch-list --format cmake`: 80-real;...;100-real;120 (the newest both SASS and PTX)
    expected = [f"{a.sm}-real" for a in archs.sass_archs()[:-1]] + [f"{archs.archs()[-1].sm}"]
    arch_entry = p.entry("CMAKE_CUDA_ARCHITECTURES")
    assert arch_entry is not None and arch_entry.value.split(";") == expected
    assert arch_entry.value == format_arch_list(archs, "cmake")


def test_no_toolkit_no_compiler() -> None:
    p = make_plan("linux-x86_64", "cu130", LINUX, tk=None)
    assert p.entry("CMAKE_CUDA_COMPILER") is None and p.entry("CUDAToolkit_ROOT") is None
    assert {d.key: d.value for d in p.decisions}["toolkit"] is None


def test_windows_host_without_clang_cl_warns() -> None:
    p = make_plan("windows-x86_64", "cu132", BuildHost("windows", ninja="ninja"))
    assert any("clang-cl is not on PATH" in w for w in p.warnings)


@pytest.mark.parametrize(
    ("train", "std"),
    [
        pytest.param("cu130", 14, id="cu130-cxx14"),
        pytest.param("cu132", 23, id="cu132-cxx23"),
        pytest.param("cu126", 98, id="cu126-cxx98"),
    ],
)
def test_unsupported_standard(train: str, std: int) -> None:
    with pytest.raises(UsageError, match=f"--cxx-standard {std}: nvcc of CUDA"):
        make_plan("linux-x86_64", train, LINUX, std=std)


def test_unknown_platform() -> None:
    with pytest.raises(UsageError, match="unknown platform 'macos-arm64'"):
        cmake.parse_platform("macos-arm64")


# ------------------------------------------------------------------------------------------------ probes


def fake_tree(
    root: Path, *, cuda_h: int | None = None, version_json: str | None = None, manifest: str | None = None
) -> Path:
    (root / "bin").mkdir(parents=True)
    if cuda_h is not None:
        (root / "include").mkdir()
        (root / "include" / "cuda.h").write_text(f"#pragma once\n#define CUDA_VERSION {cuda_h}\n")
    if version_json is not None:
        (root / "version.json").write_text(
            json.dumps({"cuda": {"name": "CUDA SDK", "version": version_json}})
        )
    if manifest is not None:
        (root / cmake.TOOLKIT_MANIFEST).write_text(json.dumps({"schema": 1, "release": manifest}))
    return root


def no_which(_: str) -> str | None:
    return None


@pytest.mark.parametrize(
    ("layout", "release", "how", "is_cudaship"),
    [
        pytest.param({"cuda_h": 13020}, "13.2", "cuda.h", False, id="cuda.h"),
        pytest.param(
            {"version_json": "13.0.2", "cuda_h": 12080}, "13.0", "version.json", False, id="version.json"
        ),
        pytest.param({"manifest": "13.4.1"}, "13.4", cmake.TOOLKIT_MANIFEST, True, id="cudaship-toolkit"),
    ],
)
def test_release_read_without_running_nvcc(
    tmp_path: Path, layout: dict[str, object], release: str, how: str, is_cudaship: bool
) -> None:
    root = fake_tree(tmp_path / "tk", **layout)  # type: ignore[arg-type]
    found = cmake.locate_toolkit(root, environ={}, which=no_which)
    assert (found.release, found.release_from, found.cudaship_toolkit, found.source) == (
        release,
        how,
        is_cudaship,
        "--toolkit",
    )


def test_location_order(tmp_path: Path) -> None:
    explicit = fake_tree(tmp_path / "explicit", cuda_h=13020)
    mine = fake_tree(tmp_path / "mine", manifest="13.4.1")
    home = fake_tree(tmp_path / "home", cuda_h=13000)
    path = fake_tree(tmp_path / "path", cuda_h=12080)
    environ = {"CUDASHIP_TOOLKIT": str(mine), "CUDA_HOME": str(home), "CUDA_PATH": str(path)}
    assert cmake.locate_toolkit(explicit, environ, no_which).source == "--toolkit"
    assert cmake.locate_toolkit(None, environ, no_which).source == "CUDASHIP_TOOLKIT"
    del environ["CUDASHIP_TOOLKIT"]
    assert cmake.locate_toolkit(None, environ, no_which).source == "CUDA_HOME"
    del environ["CUDA_HOME"]
    found = cmake.locate_toolkit(None, environ, no_which)
    assert (found.source, found.release) == ("CUDA_PATH", "12.8")


@pytest.mark.parametrize(
    ("setup", "message"),
    [
        pytest.param("nothing", "no CUDA toolkit found", id="none"),
        pytest.param("missing-dir", "is not a directory", id="not-a-directory"),
        pytest.param("not-cudaship", "CUDASHIP_TOOLKIT is not a cudaship toolkit", id="not-cudaship-toolkit"),
        pytest.param("empty", "cannot tell the CUDA release", id="no-release"),
    ],
)
def test_location_errors(tmp_path: Path, setup: str, message: str) -> None:
    environ: dict[str, str] = {}
    explicit = None
    if setup == "missing-dir":
        explicit = tmp_path / "nope"
    elif setup == "not-cudaship":
        environ["CUDASHIP_TOOLKIT"] = str(fake_tree(tmp_path / "tk", cuda_h=13000))
    elif setup == "empty":
        explicit = fake_tree(tmp_path / "tk")
    with pytest.raises(ToolkitError, match=message):
        cmake.locate_toolkit(explicit, environ, no_which)


def test_train_mismatch() -> None:
    with pytest.raises(ToolkitError) as info:
        cmake.check_toolkit(toolkit("13.0"), ci_archs.train_info("cu132"))
    assert str(info.value) == (
        "/opt/cuda: the CUDA toolkit from CUDA_HOME is CUDA 13.0 (cuda.h), but train cu132 needs CUDA 13.2"
    )
    cmake.check_toolkit(toolkit("13.2"), ci_archs.train_info("13.2"))


@pytest.fixture
def local_nvcc() -> Path:
    found = shutil.which("nvcc")
    if not found:
        pytest.skip("nvcc not on PATH")
    return Path(found)


def test_local_nvcc_on_path_and_cuda_home(local_nvcc: Path) -> None:
    on_path = cmake.locate_toolkit(None, environ={})
    assert on_path.source == "PATH" and on_path.release_from == "nvcc --version"
    assert (on_path.root / "bin" / "nvcc").is_file()  # the real root, through any wrapper script
    assert on_path.nvcc == local_nvcc
    version = subprocess.run(
        [str(local_nvcc), "--version"], capture_output=True, text=True, check=True
    ).stdout
    assert f"release {on_path.release}," in version
    via_home = cmake.locate_toolkit(None, environ={"CUDA_HOME": str(on_path.root)}, which=no_which)
    assert (via_home.source, via_home.release, via_home.nvcc) == (
        "CUDA_HOME",
        on_path.release,
        on_path.root / "bin" / "nvcc",
    )


def test_probe_host() -> None:
    host = cmake.probe_host(
        {"CUDACXX": "nvcc -allow-unsupported-compiler", "CUDAFLAGS": ""},
        which=lambda name: f"/bin/{name}" if name == "ninja" else None,
    )
    assert host == BuildHost(
        "windows" if sys.platform == "win32" else "linux",
        ninja="/bin/ninja",
        cudacxx="nvcc -allow-unsupported-compiler",
    )


# ------------------------------------------------------------------------------------------------ renderers


def test_args_render() -> None:
    p = make_plan("windows-x86_64", "cu132", WIN_NO_NINJA)
    text = render(CMAKE, "args", p)
    assert text.startswith("-G 'Visual Studio 17 2022' -T cuda=/opt/cuda ")
    assert " -DCMAKE_CUDA_FLAGS:STRING=-Xcompiler=/Zc:preprocessor " in text
    assert " '-DCMAKE_CUDA_ARCHITECTURES:STRING=80-real;" in text  # ';' quoted for the shell


@pytest.mark.slow
def test_initial_cache_values_survive_cmake(tmp_path: Path) -> None:
    """CMake itself reads the initial cache back: quoting of ; $ \\ and quotes in values is right."""
    cmake_exe = shutil.which("cmake", path=str(Path(sys.executable).parent)) or shutil.which("cmake")
    if not cmake_exe:
        pytest.skip("cmake not installed")
    tricky = BuildHost(
        "windows",
        ninja="ninja",
        clang_cl="clang-cl",
        cudaflags='-DNAME=\\"a b\\" -Xcompiler=$FOO -DX=C:\\path',
    )
    p = make_plan("windows-x86_64", "cu132", tricky, std=20)
    cache = tmp_path / "init.cmake"
    cache.write_text(render(CMAKE, "initial-cache", p))
    src = tmp_path / "src"
    src.mkdir()
    (src / "CMakeLists.txt").write_text("cmake_minimum_required(VERSION 3.25)\nproject(x LANGUAGES NONE)\n")
    env = {k: v for k, v in os.environ.items() if k not in ("CUDAFLAGS", "CUDACXX")}
    env["PATH"] = f"{Path(sys.executable).parent}{os.pathsep}{env['PATH']}"  # ninja from PyPI
    if not shutil.which("ninja", path=env["PATH"]):
        pytest.skip("ninja not installed")
    proc = subprocess.run(
        [cmake_exe, "-C", str(cache), "-G", p.generator, "-S", str(src), "-B", str(tmp_path / "b")],
        capture_output=True,
        text=True,
        check=False,
        env=env,
        timeout=120,
    )
    assert proc.returncode == 0, proc.stdout + proc.stderr
    values = {}
    for line in (tmp_path / "b" / "CMakeCache.txt").read_text().splitlines():
        if line and not line.startswith(("#", "//")) and ":" in line and "=" in line:
            key, rest = line.split(":", 1)
            values[key] = rest.split("=", 1)[1]
    for entry in p.entries:
        assert values[entry.name] == entry.value, entry.name


def test_json_lists_every_decision() -> None:
    p = make_plan("windows-x86_64", "cu132", WIN, std=20)
    data = json.loads(render(CMAKE, "json", p))
    assert data["schema"] == 1 and data["generator"] == "Ninja Multi-Config"
    assert set(data["cache"]) == {e.name for e in p.entries}
    keys = [d["key"] for d in data["decisions"]]
    assert keys[:2] == ["toolkit", "generator"]
    assert all(d["reason"] for d in data["decisions"])


def test_rules_file_is_valid() -> None:
    rules = cmake.rules()
    for os_name in ("linux", "windows"):
        assert {"ninja", "fallback", "ninja_reason", "fallback_reason"} <= set(rules["generators"][os_name])
    for rule in rules["cuda_flags"]:
        ci_archs.train_info(rule["min_train"])
        assert rule["os"] in ("linux", "windows") and rule["flags"] and rule["reason"]
    assert all(isinstance(s, int) for stds in rules["cuda_standards"].values() for s in stds)


def test_this_machines_toolkit_is_not_used_for_another_os() -> None:
    """`cmake --platform windows-x86_64` on Linux: the Linux toolkit found on PATH has no nvcc.exe, so no
    Linux path with .exe is written; the compiler is left to the Windows machine, with a warning saying so."""
    linux_toolkit = Toolkit(
        Path("/usr/local/cuda-13.0"), "PATH", Path("/usr/local/cuda-13.0/bin/nvcc"), "13.0", "nvcc"
    )
    p = make_plan("windows-x86_64", "cu130", LINUX, tk=linux_toolkit)
    assert p.entry("CMAKE_CUDA_COMPILER") is None and p.entry("CUDAToolkit_ROOT") is None
    assert not any(".exe" in e.value and e.value.startswith("/usr/") for e in p.entries)
    toolkit_decision = {d.key: d for d in p.decisions}["toolkit"]
    assert (
        toolkit_decision.value is None and "is a linux toolkit, not a windows one" in toolkit_decision.reason
    )
    assert any("cudaship toolkit install cu130 --platform windows-x86_64" in w for w in p.warnings)
    # the same toolkit for a Linux build is used as before
    native = make_plan("linux-x86_64", "cu130", LINUX, tk=linux_toolkit)
    compiler = native.entry("CMAKE_CUDA_COMPILER")
    assert compiler is not None and compiler.value == "/usr/local/cuda-13.0/bin/nvcc"


def test_a_toolkit_whose_nvcc_did_not_run_is_trusted_for_its_platform() -> None:
    """A Windows toolkit assembled on Linux (`toolkit install --platform windows-x86_64`): its nvcc.exe cannot
    run here, its release comes from version.json, and it is the one to configure with."""
    windows_toolkit = Toolkit(Path("/opt/tk/cu130-windows"), "--toolkit", None, "13.0", "version.json")
    p = make_plan("windows-x86_64", "cu130", LINUX, tk=windows_toolkit)
    compiler = p.entry("CMAKE_CUDA_COMPILER")
    assert compiler is not None and compiler.value == "/opt/tk/cu130-windows/bin/nvcc.exe"


# --- the compiler CMAKE_CUDA_COMPILER names is there (issue 35, item 4) ------------------------------------


def _compiler_tree(root: Path, names: dict[str, int]) -> Path:
    """A toolkit root whose bin/ holds ``names`` (file name -> mode)."""
    (root / "bin").mkdir(parents=True)
    for name, mode in names.items():
        (root / "bin" / name).write_text("#!/bin/sh\nexit 0\n")
        (root / "bin" / name).chmod(mode)
    return root


@pytest.mark.parametrize(
    ("platform", "names", "problem"),
    [
        pytest.param("linux-x86_64", {"nvcc": 0o755}, None, id="linux-runnable"),
        pytest.param("linux-x86_64", {"ptxas": 0o755}, "does not exist", id="linux-only-ptxas"),
        pytest.param("linux-x86_64", {"nvcc": 0o644}, "cannot run (no executable bit)", id="linux-no-x-bit"),
        # a Windows toolkit assembled on Linux: nvcc.exe need not run here, but it must be there
        pytest.param("windows-x86_64", {"nvcc.exe": 0o644}, None, id="windows-on-linux"),
        pytest.param("windows-x86_64", {"nvcc": 0o755}, "does not exist", id="windows-without-nvcc-exe"),
    ],
)
def test_check_compiler(tmp_path: Path, platform: str, names: dict[str, int], problem: str | None) -> None:
    root = _compiler_tree(tmp_path / "tk", names)
    p = make_plan(platform, "cu130", LINUX, tk=Toolkit(root, "--toolkit", None, "13.0", "version.json"))
    compiler = p.entry("CMAKE_CUDA_COMPILER")
    assert compiler is not None
    if problem is None:
        cmake.check_compiler(p, "linux")
        return
    with pytest.raises(ToolkitError) as info:
        cmake.check_compiler(p, "linux")
    text = str(info.value)
    assert text.startswith(f"{compiler.value}: CMAKE_CUDA_COMPILER would name this file, but it ") and (
        problem in text
    )
    assert "\n" not in text


def test_check_compiler_without_a_compiler_entry(tmp_path: Path) -> None:
    """CUDACXX set (or Visual Studio): no CMAKE_CUDA_COMPILER is written, so nothing is checked."""
    root = _compiler_tree(tmp_path / "tk", {})
    host = BuildHost("linux", ninja="/usr/bin/ninja", cudacxx="/elsewhere/nvcc")
    p = make_plan("linux-x86_64", "cu130", host, tk=Toolkit(root, "--toolkit", None, "13.0", "cuda.h"))
    assert p.entry("CMAKE_CUDA_COMPILER") is None
    cmake.check_compiler(p, "linux")


def test_cmake_refuses_a_toolkit_without_nvcc(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    """The issue's sequence: a cudaship toolkit assembled without nvcc (here from a local redist mirror, -c
    cudart), then `cmake --toolkit DIR`: before, exit 0 with CMAKE_CUDA_COMPILER naming DIR/bin/nvcc, which
    does not exist; now one line naming that path and the install that adds it, exit 2, nothing printed."""
    tree = build_redist(tmp_path / "redist", platforms=(REDIST_LINUX,))
    dest = tmp_path / "cuda"
    common = ["--platform", "linux-x86_64", "--dest", str(dest), "--mirror", str(tree.root)]
    assert main(["toolkit", "install", "cu130", "-c", "cudart", *common, "-q"]) == 0
    capsys.readouterr()
    assert not (dest / "bin" / "nvcc").exists()
    args = ["cmake", "--train", "cu130", "--platform", "linux-x86_64", "--toolkit", str(dest)]
    code = main(args)
    out, err = capsys.readouterr()
    assert code == 2 and out == "", err
    (line,) = err.strip().splitlines()
    assert line.startswith(f"cudaship: error: {dest.as_posix()}/bin/nvcc: CMAKE_CUDA_COMPILER would name")
    assert "does not exist: the toolkit from --toolkit has no CUDA compiler" in line
    assert (
        f"cudaship toolkit install cu130 --platform linux-x86_64 -c default --dest {dest.as_posix()}" in line
    )
    # with the compiler added the same command configures
    assert main(["toolkit", "install", "cu130", "-c", "default", *common, "-q"]) == 0
    capsys.readouterr()
    assert main(args) == 0
    assert f"-DCMAKE_CUDA_COMPILER:FILEPATH={dest.as_posix()}/bin/nvcc" in capsys.readouterr().out


def test_the_fix_keeps_the_components_a_toolkit_holds(tmp_path: Path) -> None:
    """The install the error names reinstalls with the default set plus every component held now (cublas
    here), so following it drops nothing."""
    root = _compiler_tree(tmp_path / "tk", {"ptxas": 0o755})
    components = [{"component": "cudart"}, {"component": "cublas"}, {"component": "nvcc"}]
    (root / cmake.TOOLKIT_MANIFEST).write_text(json.dumps({"release": "13.0.2", "components": components}))
    located = cmake.locate_toolkit(root, environ={}, which=no_which)
    assert located.cudaship_toolkit
    p = make_plan("linux-x86_64", "cu130", LINUX, tk=located)
    with pytest.raises(ToolkitError, match=r"-c default,cublas --dest "):
        cmake.check_compiler(p, "linux")
