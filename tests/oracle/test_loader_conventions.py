"""``audit --load`` on a wheel built in the test that holds what the accuracy corpus showed the first oracle
misread: an executable, an extension module built for another Python, a library whose initializer exits, a
documented loader function (``load_library()``) that must run before the libraries load, top-level modules
that are tools, private or tests, a library that fails through a shipped dependency, an identical copy of a
library loaded from another wheel, and a library needing ``libcuda.so.1`` where there is no driver and no
stub."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest

from cudaship.checks.load import on_demand_lookup
from cudaship.cli.main import main
from cudaship.oracle.observe import driver_loadable, find_stub
from cudaship.oracle.run import _other_python, auxiliary
from tests.oracle.builders import GCC, build_so, build_wheel, function, needs_gcc

pytestmark = needs_gcc

EXIT_IN_CONSTRUCTOR = r"""
#include <stdlib.h>
__attribute__((constructor)) static void leave(void) { exit(1); }
int exit_symbol(void) { return 1; }
"""
LOAD_PY = """import ctypes, os
_here = os.path.dirname(__file__)
def load_library():
    # the documented loader: its library's dependency first (no RUNPATH reaches it), then the library
    ctypes.CDLL(os.path.join(_here, "lib64", "dep", "libconvdep.so"), ctypes.RTLD_GLOBAL)
    return ctypes.CDLL(os.path.join(_here, "lib64", "libconv.so"))
"""
OTHER_INIT = """import ctypes, os
# loads its own hashed copy first, as a package of another wheel imported earlier would
ctypes.CDLL(os.path.join(os.path.dirname(__file__), "..", "othercopy.libs", "libshared-1a2b3c4d.so.1"))
"""


def _build(root: Path) -> tuple[Path, Path]:
    b = root / "build"
    dep = build_so(b / "dep" / "libconvdep.so", function("convdep_fn"), soname="libconvdep.so")
    conv = build_so(
        b / "lib64" / "libconv.so", function("conv_fn", ["convdep_fn"]), soname="libconv.so", link=[dep]
    )
    gone = build_so(b / "gone" / "libgone.so.3", function("gone_fn"), soname="libgone.so.3")
    broken = build_so(
        b / "lib64" / "libbroken.so", function("broken_fn", ["gone_fn"]), soname="libbroken.so", link=[gone]
    )
    above = build_so(
        b / "lib64" / "libabove.so",
        function("above_fn", ["broken_fn"]),
        soname="libabove.so",
        link=[broken],
        runpath=["$ORIGIN"],
    )
    fake_cuda = build_so(b / "drv" / "libcuda.so.1", function("cuInit"), soname="libcuda.so.1")
    needs_cuda = build_so(
        b / "lib64" / "libneedscuda.so",
        function("nc_fn", ["cuInit"]),
        soname="libneedscuda.so",
        link=[fake_cuda],
    )
    shared = build_so(
        b / "libs" / "libshared-1a2b3c4d.so.1", function("shared_fn"), soname="libshared-1a2b3c4d.so.1"
    )
    user = build_so(
        b / "lib64" / "libsharedu.so",
        function("sharedu_fn", ["shared_fn"]),
        soname="libsharedu.so",
        link=[shared],
        runpath=["$ORIGIN/../../libconv_cu12.libs"],
    )
    exiting = build_so(b / "lib64" / "libexit.so", EXIT_IN_CONSTRUCTOR, soname="libexit.so")
    plain = build_so(b / "ext" / "plain.so", function("plain_fn"))
    tool_src = b / "tool.c"
    tool_src.write_text("int main(void) { return 0; }\n")
    tool = b / "tool"
    assert GCC is not None
    subprocess.run([GCC, "-fPIE", "-pie", "-o", str(tool), str(tool_src)], check=True, capture_output=True)
    other = f"cpython-3{sys.version_info[1] - 1}-x86_64-linux-gnu"
    house = root / "wheelhouse"
    build_wheel(
        house,
        "othercopy",
        "1.0",
        {"othercopy/__init__.py": OTHER_INIT.encode(), "othercopy.libs/libshared-1a2b3c4d.so.1": shared},
        top_level=["othercopy"],
    )
    wheel = build_wheel(
        root / "dist",
        "libconv-cu12",
        "1.0",
        {
            "libconv/__init__.py": b"import othercopy\nfrom libconv.load import load_library\n",
            "libconv/load.py": LOAD_PY.encode(),
            "libconv/lib64/libconv.so": conv,
            "libconv/lib64/dep/libconvdep.so": dep,
            "libconv/lib64/libbroken.so": broken,
            "libconv/lib64/libabove.so": above,
            "libconv/lib64/libneedscuda.so": needs_cuda,
            "libconv/lib64/libsharedu.so": user,
            "libconv/lib64/libexit.so": exiting,
            "libconv_cu12.libs/libshared-1a2b3c4d.so.1": shared,
            f"libconv/_old.{other}.so": plain,
            "libconv/_stable.abi3.so": plain,
            "libconv/bin/tool": tool,
            "convtool.py": b"import a_framework_that_is_not_installed\n",
            "_private.py": b"raise ImportError('private helper of the build')\n",
            "tests/__init__.py": b"import pytest_plugin_that_is_not_installed\n",
        },
        requires=["othercopy"],
        top_level=["libconv", "convtool", "_private", "tests"],
    )
    return wheel, house


@pytest.fixture(scope="module")
def report(tmp_path_factory: pytest.TempPathFactory) -> dict[str, Any]:
    root = tmp_path_factory.mktemp("conventions")
    wheel, house = _build(root)
    out = root / "a.json"
    with pytest.MonkeyPatch.context() as mp:
        mp.setenv("CUDASHIP_OFFLINE", "1")
        mp.delenv("GITHUB_ACTIONS", raising=False)
        mp.setenv("CUDA_HOME", str(root / "no-toolkit"))
        mp.setenv("CUDA_PATH", str(root / "no-toolkit"))
        code = main(
            [
                "audit",
                "--no-progress",
                "--load",
                "--offline",
                "--find-links",
                str(house),
                "--load-timeout",
                "20",
                "-f",
                "json",
                "-o",
                str(out),
                str(wheel),
            ]
        )
    data = json.loads(out.read_text())
    return {
        "code": code,
        "json": data,
        "checks": {c["name"]: c for c in data["checks"] if c["family"] == "load"},
    }


def _rows(report: dict[str, Any]) -> dict[tuple[str, str], dict[str, Any]]:
    return {(c["file"], c["library"]): c for c in report["json"]["wheels"][0]["load"]["comparisons"]}


def _probe(report: dict[str, Any], label_start: str) -> dict[str, Any]:
    for p in report["json"]["wheels"][0]["load"]["probes"]:
        if p["label"].startswith(label_start):
            return dict(p)
    raise AssertionError(f"no probe {label_start}")


def test_executables_and_other_pythons_extensions_are_not_probed(report: dict[str, Any]) -> None:
    labels = [p["label"] for p in report["json"]["wheels"][0]["load"]["probes"]]
    assert not any("libconv/bin/tool" in label for label in labels)
    assert not any("_old.cpython" in label for label in labels)
    assert any("_stable.abi3.so" in label for label in labels)  # the stable ABI loads on any CPython 3
    note = report["checks"]["load: files not probed"]
    assert (note["severity"], note["rule"]) == ("note", "not_probed")
    why = {e["file"]: e["message"] for e in note["evidence"]}
    assert "an executable, not a library" in why["libconv/bin/tool"]
    old = next(v for k, v in why.items() if "_old.cpython" in k)
    assert f"built for CPython 3.{sys.version_info[1] - 1}: not loadable by this interpreter" in old


def test_the_documented_loader_function_runs_before_the_libraries(report: dict[str, Any]) -> None:
    after = _probe(report, "dlopen libconv/lib64/libconv.so (after")
    assert "call libconv.load_library()" in after["label"] and after["ok"], after
    assert "import convtool" not in after["label"]  # auxiliary modules are not imported before the libraries
    alone = report["checks"]["load: libconv/lib64/libconv.so needs the package's own loading"]
    assert alone["rule"] == "preloaded" and "libconvdep.so: cannot open shared object file" in alone["reason"]


def test_tools_private_modules_and_tests_are_notes(report: dict[str, Any]) -> None:
    for module in ("convtool", "_private", "tests"):
        check = report["checks"][f"load: import {module}"]
        assert (check["severity"], check["rule"]) == ("note", "auxiliary"), check
        assert "not part of the wheel's API" in check["reason"]
    assert "load: import libconv" not in report["checks"]  # the package itself imports


def test_an_initializer_that_exits_is_named(report: dict[str, Any]) -> None:
    check = report["checks"]["load: libconv/lib64/libexit.so"]
    assert "the library's initializer exited the process with status 1" in check["reason"]
    assert check["severity"] == "error"  # no convention covers it: it fails for whoever dlopens it


def test_a_failed_library_is_judged_whole_and_only_the_named_entry_compared(report: dict[str, Any]) -> None:
    rows = _rows(report)
    broken = rows[("libconv/lib64/libbroken.so", "libgone.so.3")]
    assert broken["agree"] is True and broken["loader"].startswith("not found:")
    # libabove needs libbroken (shipped, resolves): unknown, not a disagreement; the library agrees as a whole
    above = rows[("libconv/lib64/libabove.so", "libbroken.so")]
    assert above["agree"] is None and "(the loader names libgone.so.3)" in above["loader"], above
    check = report["checks"]["load: libconv/lib64/libabove.so"]
    # the static model follows the shipped dependency: libabove's entry for libbroken.so does not resolve
    message = check["evidence"][0]["message"]
    assert (
        "static: agrees (libbroken.so does not resolve (libbroken.so (shipped at libconv/lib64/libbroken.so)"
        in (message)
    )
    assert "libgone.so.3 does not resolve" in message and message.endswith("(a shipped dependency)))")
    assert "load: libconv/lib64/libabove.so (static and loader disagree)" not in report["checks"]


def test_an_identical_copy_from_another_wheel_agrees(report: dict[str, Any]) -> None:
    row = _rows(report)[("libconv/lib64/libsharedu.so", "libshared-1a2b3c4d.so.1")]
    assert row["loader"].startswith("loaded othercopy.libs/libshared-1a2b3c4d.so.1"), row
    assert row["agree"] is True, row
    assert "an identical copy of libconv_cu12.libs/libshared-1a2b3c4d.so.1: same SONAME" in row["loader"]


def test_no_driver_and_no_stub_is_not_judged(report: dict[str, Any]) -> None:
    if driver_loadable(sys.executable, {}) or find_stub({}) is not None:
        pytest.skip("this machine has a driver or a toolkit stub")
    check = report["checks"]["load: libconv/lib64/libneedscuda.so"]
    assert (check["severity"], check["rule"]) == ("note", "no_driver")
    assert check["reason"].endswith(
        "not judged: no NVIDIA driver and no libcuda stub (set CUDA_HOME to a toolkit with lib64/stubs, "
        "or --libcuda-stub PATH)"
    )
    load = report["json"]["wheels"][0]["load"]
    assert any("not judged: no NVIDIA driver" in n for n in load["notes"])
    row = _rows(report)[("libconv/lib64/libneedscuda.so", "libcuda.so.1")]
    assert row["agree"] is None


def test_rules_in_isolation() -> None:
    packages = frozenset({"libconv", "tests"})
    assert [auxiliary(m, packages) for m in ("libconv", "tests", "_x", "convtool")] == [
        False,
        True,
        True,
        True,
    ]
    suffixes = (".cpython-311-x86_64-linux-gnu.so", ".abi3.so", ".so")
    assert _other_python("a/m.cpython-311-x86_64-linux-gnu.so", suffixes) is None
    assert _other_python("a/m.abi3.so", suffixes) is None
    assert _other_python("a/m.cpython-314t-x86_64-linux-gnu.so", suffixes) == (
        "built for CPython 3.14 (free-threaded): not loadable by this interpreter"
    )
    lookup = on_demand_lookup("tensorflow", ())
    found = lookup("tensorflow/compiler/tf2xla/ops/_xla_ops.so")
    assert found is not None and "tf.load_op_library" in found[0]
