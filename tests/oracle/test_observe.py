"""observe(): real children, real gcc-built libraries, what the loader mapped and why a load failed."""

from __future__ import annotations

import sys
from pathlib import Path

import pytest

from cudaship.oracle.observe import match_needed, observe
from cudaship.oracle.records import Probe, Step, StepKind
from tests.oracle.builders import CONSTRUCTOR_HANG, CONSTRUCTOR_SEGV, build_so, function, needs_gcc

pytestmark = needs_gcc


@pytest.fixture(scope="module")
def libs(tmp_path_factory: pytest.TempPathFactory) -> dict[str, Path]:
    root = tmp_path_factory.mktemp("oracle-libs")
    base = build_so(root / "a" / "libbase.so.1", function("base_fn"), soname="libbase.so.1")
    gone = build_so(root / "gone" / "libnothere.so.7", function("gone_fn"), soname="libnothere.so.7")
    out = {
        "base": base,
        "runpath": build_so(
            root / "b" / "librunpath.so",
            function("runpath_fn", ["base_fn"]),
            soname="librunpath.so",
            link=[base],
            runpath=["$ORIGIN/../a"],
        ),
        "rpath": build_so(
            root / "b" / "librpath.so",
            function("rpath_fn", ["base_fn"]),
            soname="librpath.so",
            link=[base],
            rpath=["$ORIGIN/../a"],
        ),
        "bare": build_so(
            root / "b" / "libbare.so", function("bare_fn", ["base_fn"]), soname="libbare.so", link=[base]
        ),
        "missing": build_so(root / "b" / "libmissing.so", function("missing_fn", ["gone_fn"]), link=[gone]),
        "segv": build_so(root / "b" / "libsegv.so", CONSTRUCTOR_SEGV),
        "hang": build_so(root / "b" / "libhang.so", CONSTRUCTOR_HANG),
    }
    gone.unlink()
    return out


def test_observe_maps_each_needed_to_the_object_the_loader_used(libs: dict[str, Path]) -> None:
    base = str(libs["base"].resolve())
    bare = Probe(Step(StepKind.DLOPEN, str(libs["bare"])))
    bare_after_base = Probe(Step(StepKind.DLOPEN, str(libs["bare"])), (Step(StepKind.DLOPEN, base),))
    probes = [
        Probe(Step(StepKind.DLOPEN, str(libs["runpath"]))),
        Probe(Step(StepKind.DLOPEN, str(libs["rpath"]))),
        bare,
        bare_after_base,
        Probe(Step(StepKind.DLOPEN, str(libs["missing"]))),
        Probe(Step(StepKind.DLOPEN, str(libs["segv"]))),
        Probe(Step(StepKind.DLOPEN, str(libs["hang"]))),
        Probe.import_("no_such_module_anywhere"),
    ]
    seen: list[str] = []
    obs = observe(sys.executable, probes, timeout=5, jobs=2, on_result=lambda r: seen.append(r.probe.label))
    assert sorted(seen) == sorted(p.label for p in probes)  # one callback per child
    runpath, rpath, alone, after, missing, segv, hang, absent = obs.results
    for r, lib in ((runpath, "runpath"), (rpath, "rpath")):
        assert r.ok, r.message
        obj = r.object(str(libs[lib].resolve()))
        assert obj is not None
        assert {n.name: (n.path, n.how) for n in obj.needed}["libbase.so.1"] == (base, "soname")
        assert base in r.loaded
    assert not alone.ok
    assert "libbase.so.1: cannot open shared object file" in (alone.message or "")
    assert base not in alone.loaded
    # the same library loads once libbase.so.1 is loaded: glibc reuses it by SONAME
    assert after.ok, after.message
    assert obs.needed[str(libs["bare"].resolve())]["libbase.so.1"] == base
    assert after.result is not None and base in after.result.loaded_before
    assert not missing.ok and "libnothere.so.7" in (missing.message or "")
    assert segv.signal == "SIGSEGV" and not segv.ok and not segv.timed_out
    assert segv.stage == f"dlopen {libs['segv']}"
    assert hang.timed_out and not hang.ok and hang.signal is None
    assert "did not finish within 5 s" in (hang.message or "")
    assert not absent.ok and (absent.message or "").startswith("ModuleNotFoundError: ")
    # every child lists the interpreter's own objects: the C library at least
    assert all(any(o.soname == "libc.so.6" for o in r.objects) for r in (runpath, alone, missing))


def test_match_needed_prefers_soname_then_the_loaded_name() -> None:
    loaded = [
        ("/x/libfoo.so", "/x/libfoo.so.1.2", "libfoo.so.1"),
        ("/y/libbar.so.2", "/y/libbar.so.2", None),
    ]
    assert match_needed("libfoo.so.1", loaded) == ("/x/libfoo.so.1.2", "soname")
    assert match_needed("libbar.so.2", loaded) == ("/y/libbar.so.2", "name")
    assert match_needed("libbaz.so", loaded) == (None, None)
