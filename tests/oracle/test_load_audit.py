"""``cudaship audit --load`` end to end: a wheel built in the test, installed with pip ``--offline
--find-links`` into a fresh venv (its requirement a local wheel too: no network), loaded in fresh children;
each agreement and disagreement asserted from what the real loader mapped."""

from __future__ import annotations

import json
import sys
import xml.etree.ElementTree as ET
from pathlib import Path
from typing import Any

import jsonschema
import pytest

from cudaship.cli.main import main
from cudaship.exitcodes import ExitCode
from cudaship.oracle.observe import observe
from cudaship.oracle.records import Probe
from cudaship.oracle.run import top_level_modules
from tests.oracle.builders import build_so, build_wheel, function, needs_gcc
from tests.oracle.wheels import Built, build

REPO = Path(__file__).resolve().parents[2]
SCHEMA = json.loads((REPO / "src/cudaship/render/schemas/audit.schema.json").read_text())

pytestmark = needs_gcc


@pytest.fixture(autouse=True)
def _no_github(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv("GITHUB_ACTIONS", raising=False)


@pytest.fixture(scope="module")
def built(tmp_path_factory: pytest.TempPathFactory) -> Built:
    return build(tmp_path_factory.mktemp("oracle-wheels"))


@pytest.fixture(scope="module")
def loaded(built: Built, tmp_path_factory: pytest.TempPathFactory) -> dict[str, Any]:
    """One ``audit --load`` run, written in every format (``--report``)."""
    out = tmp_path_factory.mktemp("oracle-reports")
    with pytest.MonkeyPatch.context() as mp:
        mp.setenv("CUDASHIP_OFFLINE", "1")
        mp.delenv("GITHUB_ACTIONS", raising=False)
        code = main(
            [
                "audit",
                "--no-progress",
                "--load",
                "--offline",
                "--find-links",
                str(built.wheelhouse),
                "--load-timeout",
                "5",
                "-f",
                "json",
                "-o",
                str(out / "a.json"),
                "--report",
                f"junit={out / 'a.xml'}",
                "--report",
                f"markdown={out / 'a.md'}",
                "--report",
                f"text={out / 'a.txt'}",
                str(built.wheel),
            ]
        )
    data = json.loads((out / "a.json").read_text())
    jsonschema.validate(data, SCHEMA)
    return {"code": code, "json": data, "dir": out}


def _checks(data: dict[str, Any]) -> dict[str, dict[str, Any]]:
    return {c["name"]: c for c in data["checks"] if c["family"] == "load"}


def test_a_real_load_failure_is_an_error_and_exits_1(loaded: dict[str, Any]) -> None:
    assert loaded["code"] == ExitCode.FINDINGS
    checks = _checks(loaded["json"])
    missing = checks["load: preloadpkg/lib/libmissing.so"]
    assert (missing["status"], missing["severity"], missing["rule"]) == ("fail", "error", "failure")
    assert "libnothere.so.7: cannot open shared object file" in missing["reason"]
    assert "static: agrees" in missing["evidence"][0]["message"]  # the static audit said so too
    segv = checks["load: preloadpkg/lib/libsegv.so"]
    assert segv["severity"] == "error" and "killed by SIGSEGV" in segv["reason"]
    assert "static: every import resolves" in segv["evidence"][0]["message"]
    hang = checks["load: preloadpkg/lib/libhang.so"]
    assert hang["severity"] == "error" and "did not finish within 5 s" in hang["reason"]
    assert "/tmp/" not in hang["reason"]  # install paths are shown site-relative


def test_preloading_by_the_package_agrees_with_the_static_model(loaded: dict[str, Any]) -> None:
    """_ext.so needs libhelper.so.1, the SONAME of a library the wheel ships but _ext.so's search path does
    not reach; the package's __init__ loads it first. The static model says so (a warning naming the
    mechanism), and the loader agrees; alone, without the package's import, the extension does not load
    (a note)."""
    checks = _checks(loaded["json"])
    assert "load: preloadpkg/_ext.so (static and loader disagree)" not in checks
    closure = {c["name"]: c for c in loaded["json"]["checks"] if c["family"] == "closure"}
    sibling = closure["closure: needs a sibling loaded first: preloadpkg/lib/libhelper.so.1"]
    assert (sibling["status"], sibling["severity"], sibling["rule"]) == ("fail", "warning", "loaded_first")
    rows = {(c["file"], c["library"]): c for c in loaded["json"]["wheels"][0]["load"]["comparisons"]}
    row = rows[("preloadpkg/_ext.so", "libhelper.so.1")]
    assert row["agree"] is True, row
    assert row["loader"].startswith("loaded preloadpkg/lib/libhelper.so.1 (already loaded when"), row
    alone = checks["load: preloadpkg/_ext.so needs the package's own loading"]
    assert (alone["severity"], alone["rule"]) == ("note", "preloaded")
    assert "libhelper.so.1: cannot open shared object file" in alone["reason"]


def test_runpath_rpath_and_requirement_libraries_agree(loaded: dict[str, Any]) -> None:
    wheel = loaded["json"]["wheels"][0]
    load = wheel["load"]
    rows = {(c["file"], c["library"]): c for c in load["comparisons"]}
    for lib in ("libuser.so", "librpath.so"):
        row = rows[(f"preloadpkg/lib/{lib}", "libhelper.so.1")]
        # the package's __init__ preloaded it: the same object, already loaded when the library was opened
        assert row["agree"] is True, row
        assert row["loader"].startswith("loaded preloadpkg/lib/libhelper.so.1 (already loaded when"), row
    dep = rows[("preloadpkg/lib/libusesdep.so", "libdep.so.2")]
    assert dep["agree"] is True and dep["loader"] == "loaded deppkg/lib/libdep.so.2"
    assert dep["static"].startswith("resolves (requirement)")
    # 8 libraries: 5 load and agree (_ext.so through the package's preloading), libmissing fails as the static
    # audit says; libsegv and libhang do not
    assert (load["libraries"], load["libraries_agree"]) == (8, 6)
    # judged imports: libhelper.so.1 of _ext, libuser, librpath; libdep.so.2 of libusesdep; libnothere.so.7 of
    # libmissing (the entry the loader's message names: both sides say it is not found)
    assert load["line"] == "loader: 6/8 libraries agree (5/5 imports)"
    missing = rows[("preloadpkg/lib/libmissing.so", "libnothere.so.7")]
    assert missing["agree"] is True and missing["loader"].startswith("not found: OSError: libnothere.so.7")
    assert load["environment"].startswith("a fresh venv of Python ")
    statics = {(i["file"], i["library"]): i for i in wheel["imports"]}
    assert statics[("preloadpkg/lib/libusesdep.so", "libdep.so.2")]["target"] == "deppkg/lib/libdep.so.2"
    assert statics[("preloadpkg/_ext.so", "libhelper.so.1")]["via"] == "loaded"
    labels = [p["label"] for p in load["probes"]]
    assert labels[0] == "import preloadpkg"
    assert "dlopen preloadpkg/_ext.so (after import preloadpkg)" in labels


def test_every_format_shows_the_loader_line(loaded: dict[str, Any]) -> None:
    line = "loader: 6/8 libraries agree (5/5 imports)"
    assert line in (loaded["dir"] / "a.txt").read_text()
    assert line in (loaded["dir"] / "a.md").read_text()
    props = {
        p.get("name"): p.get("value") for p in ET.parse(loaded["dir"] / "a.xml").getroot().iter("property")
    }
    assert props["loader"] == line
    cases = [c.get("name") for c in ET.parse(loaded["dir"] / "a.xml").getroot().iter("testcase")]
    assert "load: preloadpkg/lib/libmissing.so" in cases


def test_without_load_the_json_has_the_static_imports_and_no_loader(
    built: Built, capsys: pytest.CaptureFixture[str]
) -> None:
    code = main(
        ["audit", "--no-progress", "-f", "json", "--find-links", str(built.wheelhouse), str(built.wheel)]
    )
    data = json.loads(capsys.readouterr().out)
    jsonschema.validate(data, SCHEMA)
    assert code == ExitCode.FINDINGS
    assert data["wheels"][0]["load"] is None
    assert len(data["wheels"][0]["imports"]) == 7  # one DT_NEEDED each; libhelper needs only libc
    assert not [c for c in data["checks"] if c["family"] == "load"]


def test_a_windows_wheel_is_skipped_with_the_reason(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    wheel = build_wheel(tmp_path, "winpkg", "1.0", {"winpkg/__init__.py": b""}, tag="py3-none-win_amd64")
    code = main(["audit", "--no-progress", "--load", str(wheel)])
    out = capsys.readouterr().out
    assert "loader check skipped: a win_amd64 wheel cannot be loaded on Linux" in out
    assert "SKIP  load: loader check" in out
    assert code == ExitCode.OK


def test_pip_failing_to_resolve_is_a_finding_not_a_traceback(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    wheel = build_wheel(
        tmp_path, "needsmissing", "1.0", {"needsmissing/__init__.py": b""}, requires=["nosuchproject-xyz>=1"]
    )
    code = main(["audit", "--no-progress", "--load", "--offline", "-f", "json", str(wheel)])
    data = json.loads(capsys.readouterr().out)
    install = _checks(data)["load: install"]
    assert (install["severity"], install["rule"]) == ("error", "install")
    assert "nosuchproject-xyz" in install["reason"] and "ERROR:" in install["reason"]
    assert code == ExitCode.FINDINGS


def test_load_python_layers_the_wheel_alone_on_an_existing_environment(
    built: Built, capsys: pytest.CaptureFixture[str]
) -> None:
    """This interpreter has no deppkg: installed with --no-deps, libusesdep.so cannot find libdep.so.2."""
    code = main(
        [
            *("audit", "--no-progress", "--load", "--load-python", sys.executable, "--offline", "-f", "json"),
            *("--load-timeout", "5", "--find-links", str(built.wheelhouse), str(built.wheel)),
        ]
    )
    data = json.loads(capsys.readouterr().out)
    checks = _checks(data)
    assert (
        "libdep.so.2: cannot open shared object file"
        in checks["load: preloadpkg/lib/libusesdep.so"]["reason"]
    )
    assert data["wheels"][0]["load"]["environment"].startswith("the wheel alone (--no-deps) layered on ")
    assert code == ExitCode.FINDINGS


def test_the_toolkit_stub_stands_in_for_the_driver(tmp_path: Path) -> None:
    stub = build_so(
        tmp_path / "cuda" / "lib64" / "stubs" / "libcuda.so", function("cuInit"), soname="libcuda.so.1"
    )
    user = build_so(tmp_path / "lib" / "libneedscuda.so", function("user_fn", ["cuInit"]), link=[stub])
    from cudaship.oracle.observe import child_environment

    env = child_environment()
    env["CUDA_HOME"] = str(tmp_path / "cuda")
    obs = observe(sys.executable, [Probe.dlopen(str(user))], env=env, timeout=30)
    (result,) = obs.results
    if obs.driver == "present":
        pytest.skip("a real NVIDIA driver is loadable here: the stub is not used")
    assert obs.stub_libcuda == str(stub) and obs.driver == "stub"
    assert result.ok, result.message
    obj = result.object(str(user.resolve()))
    assert obj is not None
    assert {n.name: n.path for n in obj.needed}["libcuda.so.1"] == str(stub.resolve())
    assert any("toolkit's stub" in n for n in obs.notes)


def test_top_level_modules_from_record_and_top_level_txt() -> None:
    files = [
        "pkg/__init__.py",
        "pkg/_ext.so",
        "nvidia/cublas/__init__.py",
        "nvidia/cublas/lib/libcublas.so.13",
        "single.py",
        "fast.cpython-311-x86_64-linux-gnu.so",
        "pkg-1.0.dist-info/RECORD",
    ]
    assert top_level_modules(files, None) == ("nvidia.cublas", "pkg", "single", "fast")
    assert top_level_modules(files, "pkg\n") == ("pkg",)


@pytest.mark.network
@pytest.mark.slow
def test_a_real_pypi_wheel_loads_and_agrees(
    cudart_linux_wheel: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """nvidia-cuda-runtime from PyPI, installed by pip from the real index: every library loads, and each
    DT_NEEDED is satisfied where the static audit says."""
    code = main(["audit", "--no-progress", "--load", "--online", "-f", "json", str(cudart_linux_wheel)])
    data = json.loads(capsys.readouterr().out)
    jsonschema.validate(data, SCHEMA)
    load = data["wheels"][0]["load"]
    assert load["libraries"] >= 1 and load["libraries"] == load["libraries_agree"], load
    assert load["imports"] == load["imports_agree"] > 0
    assert code == ExitCode.OK


def test_what_an_extra_provides_is_a_note_until_the_extra_is_installed(
    built: Built, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """A library whose RUNPATH reaches into deppkg, which only the extra [dep] requires."""
    dep_lib = tmp_path / "libs" / "libdep.so.2"
    build_so(dep_lib, function("dep_fn"), soname="libdep.so.2")
    user = build_so(
        tmp_path / "libs" / "libneedsdep.so",
        function("needs_fn", ["dep_fn"]),
        soname="libneedsdep.so",
        link=[dep_lib],
        runpath=["$ORIGIN/../deppkg/lib"],
    )
    wheel = build_wheel(
        tmp_path / "dist",
        "extrapkg",
        "1.0",
        {"extrapkg/__init__.py": b"", "extrapkg/libneedsdep.so": user},
        requires=['deppkg>=1; extra == "dep"'],
        top_level=["extrapkg"],
    )
    base = [
        "audit",
        "--no-progress",
        "--load",
        "--offline",
        "-f",
        "json",
        "--find-links",
        str(built.wheelhouse),
    ]
    main([*base, str(wheel)])
    data = json.loads(capsys.readouterr().out)
    (static,) = [i for i in data["wheels"][0]["imports"] if i["library"] == "libdep.so.2"]
    assert (static["ok"], static["extra"]) == (True, "dep")
    note = _checks(data)["load: extrapkg/libneedsdep.so"]
    assert (note["severity"], note["rule"]) == ("note", "extra")
    assert "libdep.so.2 comes with the extra [dep]" in note["reason"] and "--extra dep" in note["reason"]
    assert data["wheels"][0]["load"]["libraries"] == 0  # not counted either way
    code = main([*base, "--extra", "dep", str(wheel)])
    data = json.loads(capsys.readouterr().out)
    load = data["wheels"][0]["load"]
    assert (load["libraries"], load["libraries_agree"]) == (1, 1), load["comparisons"]
    rows = {c["library"]: c for c in load["comparisons"]}
    assert rows["libdep.so.2"]["loader"] == "loaded deppkg/lib/libdep.so.2" and rows["libdep.so.2"]["agree"]
    assert code == ExitCode.OK
