"""collisions family on hand-built records."""

from __future__ import annotations

from cudaship.records.findings import Severity, Status
from tests.checks.handmade import by_name, context, host, library, run


def test_case_and_import_library_collisions() -> None:
    ctx = context(files=["pkg/Readme.txt", "pkg/README.txt", "pkg/a/x.lib", "pkg/b/x.lib"])
    results = by_name(run(ctx, "collisions"))
    case = results["collisions: paths differing only by case"]
    assert case.status is Status.FAIL and "pkg/README.txt" in case.evidence[0].message
    libs = results["collisions: import library names"]
    assert libs.status is Status.FAIL and libs.evidence[0].file == "pkg/b/x.lib"
    # a build-tree hazard, not a load failure (nothing loads a .lib): a warning, as in cuda-cccl's cu12/ and
    # cu13/ import libraries (issue 32: an error means the wheel does not load or run)
    assert (libs.rule, libs.severity) == ("import_library_names", Severity.WARNING)
    assert case.severity is Severity.ERROR
    assert "collisions: SONAME equals file name" not in results  # only with the policy key


def test_soname_matches_filename() -> None:
    ctx = context(
        [
            library("pkg/libgood.so", host(soname="libgood.so")),
            library("pkg/libbad.so", host(soname="libbad.so.1")),
            library("pkg/libnone.so", host()),
        ],
        policy={"collisions": {"soname_matches_filename": ["pkg/*.so"]}},
    )
    result = by_name(run(ctx, "collisions"))["collisions: SONAME equals file name"]
    assert result.status is Status.FAIL
    assert sorted(f.file or "" for f in result.evidence) == ["pkg/libbad.so", "pkg/libnone.so"]
