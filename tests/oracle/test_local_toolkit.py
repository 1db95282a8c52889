"""``audit --load`` on a machine with its own CUDA toolkit: a library that loads only because the dynamic
linker found a dependency in that toolkit, outside the environment, does not load on a user's machine without
one (issue 32's reference loader runs with a libcuda stub and no local toolkit). Here the "toolkit" is a
directory the test makes, named by CUDA_HOME (knowledge/data/local_toolkits.toml: the variables naming a
toolkit) and put on the search path by LD_LIBRARY_PATH (which the children keep, as a user's toolkit setup
does; this machine's own /usr/local/cuda-13.0/lib comes through ld.so.conf)."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

from cudaship.cli.main import main
from cudaship.exitcodes import ExitCode
from cudaship.knowledge.local_toolkits import local_toolkits, toolkit_patterns
from cudaship.oracle.run import local_toolkit_lookup
from tests.oracle.builders import build_so, build_wheel, function, needs_gcc


def test_the_table_names_the_default_locations_with_sources() -> None:
    patterns = dict(toolkit_patterns({"CUDA_HOME": "/opt/cuda-12.8/", "CUDA_PATH": "relative"}))
    assert {"/usr/local/cuda", "/usr/local/cuda-*", "/opt/nvidia/hpc_sdk", "/opt/cuda-12.8"} <= set(patterns)
    assert "relative" not in patterns  # only an absolute directory is one
    assert all(t.source for t in local_toolkits())


def test_lookup_finds_files_under_a_toolkit_and_never_under_the_environment(tmp_path: Path) -> None:
    toolkit = tmp_path / "toolkit"
    (toolkit / "lib64").mkdir(parents=True)
    site = (
        toolkit / "venv" / "site-packages"
    )  # an environment inside the toolkit's tree stays the environment
    site.mkdir(parents=True)
    lookup = local_toolkit_lookup({"CUDA_HOME": str(toolkit)}, [str(site)])
    found = lookup(str(toolkit / "lib64" / "libcudart.so.13"))
    assert found is not None and str(toolkit) in found and "CUDA_HOME" in found
    assert lookup(str(site / "nvidia" / "libcudart.so.13")) is None
    assert lookup("/usr/lib/x86_64-linux-gnu/libm.so.6") is None


def _load(wheel: Path, out: Path) -> tuple[int, dict[str, Any]]:
    code = main(
        [
            *("audit", "--no-progress", "--load", "--offline", "--load-timeout", "60"),
            *("-f", "json", "-o", str(out), str(wheel)),
        ]
    )
    return code, json.loads(out.read_text())


@needs_gcc
def test_a_library_that_loads_only_through_a_local_toolkit_does_not_load(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """libuses.so needs libfakert.so.13, shipped by no wheel and no requirement: a static closure error. The
    loader finds it in the toolkit. Before the fix: the library counted as loading, the closure error became a
    warning ("the real loader loaded ..."), and the load check called the static model wrong."""
    b = tmp_path / "build"
    toolkit = tmp_path / "toolkit"
    runtime = build_so(toolkit / "lib64" / "libfakert.so.13", function("fakert_fn"), soname="libfakert.so.13")
    uses = build_so(b / "libuses.so", function("uses_fn", ["fakert_fn"]), soname="libuses.so", link=[runtime])
    files: dict[str, bytes | Path] = {"tkpkg/__init__.py": b"", "tkpkg/lib/libuses.so": uses}
    wheel = build_wheel(tmp_path / "dist", "tkpkg", "1.0", files, top_level=["tkpkg"])
    monkeypatch.setenv("CUDASHIP_OFFLINE", "1")
    monkeypatch.delenv("GITHUB_ACTIONS", raising=False)
    monkeypatch.setenv("CUDA_HOME", str(toolkit))
    monkeypatch.setenv("LD_LIBRARY_PATH", str(toolkit / "lib64"))
    code, data = _load(wheel, tmp_path / "a.json")
    checks = {c["name"]: c for c in data["checks"]}
    check = checks["load: tkpkg/lib/libuses.so"]
    assert (check["status"], check["severity"], check["rule"]) == ("fail", "error", "toolkit"), check
    assert check["reason"].startswith("tkpkg/lib/libuses.so does not load without a local toolkit")
    assert str(runtime.resolve()) in check["reason"]
    closure = checks["closure: tkpkg/lib/libuses.so"]
    assert (closure["status"], closure["severity"]) == ("fail", "error"), closure  # not overruled
    load = data["wheels"][0]["load"]
    assert load["libraries_agree"] == load["libraries"] == 1, load  # static and loader: it does not load
    (row,) = [c for c in load["comparisons"] if c["library"] == "libfakert.so.13"]
    assert row["loader"].startswith("found only through a local toolkit: ") and row["agree"] is True
    assert code == ExitCode.FINDINGS
