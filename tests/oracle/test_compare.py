"""checks.load.compare on real children: variants, on-demand conventions and agreement counts, without pip."""

from __future__ import annotations

import dataclasses
import sys
from pathlib import Path

from cudaship.checks.load import LoadInputs, compare, on_demand_lookup
from cudaship.checks.records import StaticImport
from cudaship.oracle.observe import observe
from cudaship.oracle.records import Probe
from tests.oracle.builders import build_so, function, needs_gcc

pytestmark = needs_gcc


def _site(tmp_path: Path) -> tuple[Path, dict[str, Path]]:
    site = tmp_path / "site"
    gone11 = build_so(tmp_path / "gone" / "libcudart.so.11.0", function("c11"), soname="libcudart.so.11.0")
    ok = build_so(tmp_path / "ok" / "libcudart.so.12", function("c12"), soname="libcudart.so.12")
    libs = {
        "thing/libthing_cuda118.so": build_so(
            site / "thing" / "libthing_cuda118.so", function("t118", ["c11"]), link=[gone11]
        ),
        "thing/libthing_cuda128.so": build_so(
            site / "thing" / "libthing_cuda128.so", function("t128", ["c12"]), link=[ok], runpath=["$ORIGIN"]
        ),
    }
    (site / "thing" / "libcudart.so.12").write_bytes(ok.read_bytes())
    gone11.unlink()
    return site, libs


def test_a_variant_that_fails_while_a_sibling_loads_is_a_note(tmp_path: Path) -> None:
    site, libs = _site(tmp_path)
    static = (
        StaticImport("thing/libthing_cuda118.so", "libcudart.so.11.0", False, "unresolved", None, "nothing"),
        StaticImport(
            "thing/libthing_cuda128.so",
            "libcudart.so.12",
            True,
            "shipped",
            "thing/libcudart.so.12",
            "shipped",
        ),
    )
    installed = {rel: str(p.resolve()) for rel, p in libs.items()}
    obs = observe(sys.executable, [Probe.dlopen(p) for p in installed.values()], timeout=30)
    check, results = compare(static, obs, LoadInputs(installed=installed, sites=(str(site),), top_level=()))
    by_name = {r.name: r for r in results}
    variant = by_name["load: thing/libthing_cuda118.so"]
    assert variant.rule == "variant"
    assert "libthing_cuda128.so loads" in variant.reason
    assert "libcudart.so.11.0: cannot open shared object file" in variant.evidence[0].message
    assert (check.libraries, check.libraries_agree) == (2, 2)  # the static audit said cuda118 fails too
    row = next(c for c in check.comparisons if c.file == "thing/libthing_cuda128.so")
    assert row.agree is True and row.loader == "loaded thing/libcudart.so.12"


def test_a_static_target_the_loader_did_not_use_is_a_disagreement(tmp_path: Path) -> None:
    site, libs = _site(tmp_path)
    static = (
        StaticImport(
            "thing/libthing_cuda128.so",
            "libcudart.so.12",
            True,
            "requirement",
            "other/libcudart.so.12",
            "req",
        ),
    )
    (site / "other").mkdir()
    (site / "other" / "libcudart.so.12").write_bytes(b"\x7fELF")
    installed = {"thing/libthing_cuda128.so": str(libs["thing/libthing_cuda128.so"].resolve())}
    obs = observe(sys.executable, [Probe.dlopen(p) for p in installed.values()], timeout=30)
    check, results = compare(static, obs, LoadInputs(installed=installed, sites=(str(site),), top_level=()))
    (disagreement,) = [r for r in results if r.rule == "disagreement"]
    assert disagreement.evidence[0].message == (
        "libcudart.so.12: static: resolves (requirement): req; loader: loaded thing/libcudart.so.12"
    )
    assert (check.libraries, check.libraries_agree, check.imports, check.imports_agree) == (1, 0, 1, 0)


def test_on_demand_conventions_come_from_the_knowledge_table() -> None:
    lookup = on_demand_lookup("bitsandbytes", ("torch",))
    found = lookup("bitsandbytes/libbitsandbytes_rocm64.so")
    assert found is not None and "ROCm" in found[0] and "providers.toml" in found[1]
    assert lookup("bitsandbytes/libbitsandbytes_cuda128.so") is None
    assert on_demand_lookup(None, ())("x.so") is None


def test_a_system_verdict_the_loader_satisfied_from_site_packages_is_a_disagreement(tmp_path: Path) -> None:
    site, libs = _site(tmp_path)
    static = (
        StaticImport("thing/libthing_cuda128.so", "libcudart.so.12", True, "system", None, "system library"),
    )
    installed = {"thing/libthing_cuda128.so": str(libs["thing/libthing_cuda128.so"].resolve())}
    obs = observe(sys.executable, [Probe.dlopen(p) for p in installed.values()], timeout=30)
    check, results = compare(static, obs, LoadInputs(installed=installed, sites=(str(site),), top_level=()))
    (disagreement,) = [r for r in results if r.rule == "disagreement"]
    assert (
        "static: resolves (system): system library; loader: loaded thing/libcudart.so.12"
        in disagreement.reason
    )
    # libc.so.6 is not among the static imports here: only the verdicts the audit gave are compared
    assert (check.imports, check.imports_agree) == (1, 0)


def test_an_entry_found_by_the_packages_run_time_lookup_is_a_note_and_not_compared(tmp_path: Path) -> None:
    """The CuPy case: an extension whose library cuda-pathfinder loads on first use fails a plain dlopen; the
    static model says ``runtime`` for that import, so the failure is a note and nothing of it is counted."""
    site, libs = _site(tmp_path)
    static = (
        StaticImport(
            "thing/libthing_cuda118.so",
            "libcudart.so.11.0",
            True,
            "runtime",
            "nvidia/cuda_runtime/lib/libcudart.so.11.0",
            "found at run time by cuda-pathfinder",
        ),
    )
    installed = {"thing/libthing_cuda118.so": str(libs["thing/libthing_cuda118.so"].resolve())}
    obs = observe(sys.executable, [Probe.dlopen(p) for p in installed.values()], timeout=30)
    check, results = compare(static, obs, LoadInputs(installed=installed, sites=(str(site),), top_level=()))
    (note,) = [r for r in results if r.name == "load: thing/libthing_cuda118.so"]
    assert note.rule == "runtime" and "found at run time by the package" in note.reason
    assert (check.libraries, check.imports) == (0, 0)  # not counted either way
    (row,) = check.comparisons
    assert row.agree is None and row.loader.startswith("not found: OSError: libcudart.so.11.0")


def test_a_dependency_found_only_in_a_local_toolkit_fails_the_library_and_its_dependents(
    tmp_path: Path,
) -> None:
    """libinner.so needs libfakert.so.13, which only the "toolkit" holds (an absolute RUNPATH into it), and
    libcuda.so.1 (the toolkit's stub, standing in for the driver: not the toolkit's); libouter.so needs
    libinner.so. Both load here; neither does on a machine without that toolkit."""
    from cudaship.checks.load import overruled
    from cudaship.records.findings import Severity, Status, failed

    tk = tmp_path / "toolkit"
    fakert = build_so(tk / "lib64" / "libfakert.so.13", function("fakert"), soname="libfakert.so.13")
    stub = build_so(tk / "lib64" / "stubs" / "libcuda.so", function("cuInit"), soname="libcuda.so.1")
    site = tmp_path / "site"
    inner = build_so(
        site / "pkg" / "libinner.so",
        function("inner", ["fakert", "cuInit"]),
        soname="libinner.so",
        link=[fakert, stub],
        runpath=[str(tk / "lib64")],
    )
    outer = build_so(
        site / "pkg" / "libouter.so", function("outer", ["inner"]), link=[inner], runpath=["$ORIGIN"]
    )
    static = (
        StaticImport("pkg/libinner.so", "libfakert.so.13", False, "unresolved", None, "not shipped"),
        StaticImport("pkg/libinner.so", "libcuda.so.1", True, "driver", None, "the driver"),
        StaticImport("pkg/libouter.so", "libinner.so", True, "shipped", "pkg/libinner.so", "shipped"),
    )
    installed = {"pkg/libinner.so": str(inner.resolve()), "pkg/libouter.so": str(outer.resolve())}
    obs = observe(
        sys.executable,
        [Probe.dlopen(p) for p in installed.values()],
        timeout=30,
        stub=True,
        stub_path=str(stub),
    )
    assert all(r.ok for r in obs.results), [r.message for r in obs.results]
    root = str(tk.resolve()) + "/"
    inputs = LoadInputs(
        installed=installed,
        sites=(str(site),),
        top_level=(),
        local_toolkit=lambda p: "a test toolkit" if p.startswith(root) else None,
    )
    check, results = compare(static, obs, inputs)
    by_name = {r.name: r for r in results}
    for lib in ("pkg/libinner.so", "pkg/libouter.so"):
        assert by_name[f"load: {lib}"].rule == "toolkit", by_name
        assert "libfakert.so.13 from " in by_name[f"load: {lib}"].reason
        assert "libcuda" not in by_name[f"load: {lib}"].reason  # the stub stands in for the driver
    assert (check.libraries, check.libraries_agree) == (2, 2)  # the static model says neither loads
    closure = failed("closure", "closure: pkg/libouter.so", "libinner.so does not load", [])
    closure = dataclasses.replace(closure, severity=Severity.ERROR)
    (kept,) = overruled((closure,), check)
    assert kept.status is Status.FAIL and kept.severity is Severity.ERROR  # loaded only through the toolkit
