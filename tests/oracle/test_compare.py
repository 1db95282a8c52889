"""checks.load.compare on real children: variants, on-demand conventions and agreement counts, without pip."""

from __future__ import annotations

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
