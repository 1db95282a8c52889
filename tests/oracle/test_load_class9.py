"""``audit --load`` end to end on the four other points of issue 32, class 9, each on a wheel gcc-built here,
installed by pip into a fresh venv and loaded for real (the pure comparisons are in test_load_no_driver.py):

- a static closure error the real loader disproves is no longer an error (the loader's answer stands);
- with the toolkit's libcuda stub, a library that needs NVML (``libnvidia-ml.so.1``) is "no driver", a note;
- a torch extension that does not declare torch is imported after ``import torch``, as its users do;
- a stray top-level helper package beside the project's own package is not the package failing."""

from __future__ import annotations

import json
import sys
from pathlib import Path
from typing import Any

import pytest

from cudaship.cli.main import main
from cudaship.exitcodes import ExitCode
from cudaship.oracle.observe import child_environment, driver_loadable
from tests.oracle.builders import build_so, build_wheel, function, needs_gcc

pytestmark = needs_gcc


def _load(wheel: Path, out: Path, *extra: str) -> tuple[int, dict[str, Any]]:
    with pytest.MonkeyPatch.context() as mp:
        mp.setenv("CUDASHIP_OFFLINE", "1")
        mp.delenv("GITHUB_ACTIONS", raising=False)
        code = main(
            [
                *("audit", "--no-progress", "--load", "--offline", "--load-timeout", "60"),
                *("-f", "json", "-o", str(out), *extra, str(wheel)),
            ]
        )
    return code, json.loads(out.read_text())


def _checks(data: dict[str, Any]) -> dict[str, dict[str, Any]]:
    return {c["name"]: c for c in data["checks"]}


def test_a_static_error_the_loader_disproves_is_not_an_error(tmp_path: Path) -> None:
    """libuse.so needs libsqlite3.so.0: not shipped, in no table, no requirement (a closure error); this
    machine's loader maps the system's copy. The closure check becomes a warning naming audit --load."""
    system = Path("/usr/lib/x86_64-linux-gnu/libsqlite3.so.0")
    if not system.exists():
        pytest.skip("this machine has no libsqlite3.so.0 for the loader to find")
    b = tmp_path / "build"
    use = build_so(
        b / "libuse.so", function("use_fn", ["sqlite3_libversion_number"]), soname="libuse.so", link=[system]
    )
    files: dict[str, bytes | Path] = {"syspkg/__init__.py": b"", "syspkg/libuse.so": use}
    wheel = build_wheel(tmp_path / "dist", "syspkg", "1.0", files, top_level=["syspkg"])
    code, data = _load(wheel, tmp_path / "a.json")
    closure = _checks(data)["closure: syspkg/libuse.so"]
    assert (closure["status"], closure["severity"]) == ("fail", "warning"), closure
    assert "the real loader loaded syspkg/libuse.so with every import satisfied" in closure["reason"]
    assert not [c for c in data["checks"] if c["severity"] == "error" and c["status"] == "fail"]
    assert code == ExitCode.OK


def test_with_the_stub_a_library_needing_nvml_is_no_driver(tmp_path: Path) -> None:
    """The stub stands in for libcuda.so.1 only; libnvidia-ml.so.1 comes with the driver, which is absent."""
    if driver_loadable(sys.executable, child_environment()):
        pytest.skip("a real NVIDIA driver is loadable here")
    b = tmp_path / "build"
    stub = build_so(b / "stubs" / "libcuda.so", function("cuInit"), soname="libcuda.so.1")
    nvml = build_so(b / "nvml" / "libnvidia-ml.so.1", function("nvmlInit_v2"), soname="libnvidia-ml.so.1")
    mon = build_so(
        b / "libmonitor.so",
        function("monitor_fn", ["cuInit", "nvmlInit_v2"]),
        soname="libmonitor.so",
        link=[stub, nvml],
    )
    files: dict[str, bytes | Path] = {"nvmlpkg/__init__.py": b"", "nvmlpkg/libmonitor.so": mon}
    wheel = build_wheel(tmp_path / "dist", "nvmlpkg", "1.0", files, top_level=["nvmlpkg"])
    code, data = _load(wheel, tmp_path / "a.json", "--libcuda-stub", str(stub))
    check = _checks(data)["load: nvmlpkg/libmonitor.so"]
    assert (check["severity"], check["rule"]) == ("note", "no_driver"), check
    assert "libnvidia-ml.so.1: cannot open shared object file" in check["evidence"][0]["message"]
    assert data["wheels"][0]["load"]["stub_libcuda"] == str(stub)
    assert code == ExitCode.OK


TORCH_INIT = """import ctypes, os
# as torch does: its own libraries are loaded when it is imported
ctypes.CDLL(os.path.join(os.path.dirname(__file__), "lib", "libc10.so"), mode=ctypes.RTLD_GLOBAL)
"""
EXT_INIT = """import ctypes, os
# the extension needs libc10.so and has no RUNPATH to torch/lib: torch must be imported first
_C = ctypes.CDLL(os.path.join(os.path.dirname(__file__), "_C.so"))
"""


def test_a_torch_extension_is_imported_after_torch(tmp_path: Path) -> None:
    """A torch extension that does not declare torch (an undeclared host: a warning) is imported, and its
    libraries dlopened, after `import torch`, as its users do; here a local stand-in for torch (its
    __init__ loads torch/lib/libc10.so, as torch's does) installed from --find-links."""
    b = tmp_path / "build"
    c10 = build_so(b / "torch" / "lib" / "libc10.so", function("c10_fn"), soname="libc10.so")
    house = tmp_path / "house"
    build_wheel(
        house,
        "torch",
        "2.9.1",
        {"torch/__init__.py": TORCH_INIT.encode(), "torch/lib/libc10.so": c10},
        top_level=["torch"],
    )
    ext = build_so(b / "ext" / "_C.so", function("ext_fn", ["c10_fn"]), link=[c10])
    files: dict[str, bytes | Path] = {"torchext/__init__.py": EXT_INIT.encode(), "torchext/_C.so": ext}
    wheel = build_wheel(tmp_path / "dist", "torchext", "1.0", files, top_level=["torchext"])
    code, data = _load(wheel, tmp_path / "a.json", "--find-links", str(house))
    labels = [p["label"] for p in data["wheels"][0]["load"]["probes"]]
    assert "import torchext (after import torch)" in labels, labels
    errors = [c for c in data["checks"] if c["status"] == "fail" and c["severity"] == "error"]
    assert not errors, errors
    probes = {p["label"]: p for p in data["wheels"][0]["load"]["probes"]}
    assert probes["import torchext (after import torch)"]["ok"], probes
    assert code == ExitCode.OK


def test_a_stray_helper_package_is_not_the_package_failing(tmp_path: Path) -> None:
    """strayproj ships its own package and a build helper (build_tools/) that fails to import outside the
    build; the project's package imports: the helper's failure is a note, not the wheel failing."""
    files: dict[str, bytes | Path] = {
        "strayproj/__init__.py": b"VALUE = 1\n",
        "build_tools/__init__.py": b"import setuptools_scm_not_installed_here\n",
    }
    wheel = build_wheel(tmp_path / "dist", "strayproj", "1.0", files, top_level=["build_tools", "strayproj"])
    code, data = _load(wheel, tmp_path / "a.json")
    helper = _checks(data)["load: import build_tools"]
    assert (helper["severity"], helper["rule"]) == ("note", "auxiliary"), helper
    assert "strayproj" not in {c["name"] for c in data["checks"] if c["severity"] == "error"}
    assert code == ExitCode.OK
