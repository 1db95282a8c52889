"""archs family on hand-built records: relocatable-only PTX, forward-compatible PTX, the expected list per
train, and variants judged against their own trains."""

from __future__ import annotations

from cudaship.knowledge.trains import Train
from cudaship.records.files import FileReport
from cudaship.records.findings import CheckResult, Severity, Status
from tests.checks.handmade import by_name, context, library, ptx, run, sass

LIB = "pkg/lib/libk.so"
ARCHS_TABLE = {"cu128": {"x86_64": "8.0 9.0 12.0"}, "cu130": {"x86_64": "8.0 9.0 10.0 12.0"}}


def test_default_flags_relocatable_and_missing_forward_ptx_as_warnings() -> None:
    ctx = context(
        [
            library(LIB, device=[sass("sm_80"), sass("sm_90"), ptx("compute_90", relocatable=True)]),
            library("pkg/lib/libj.so", device=[sass("sm_80"), sass("sm_90")]),
            library("pkg/lib/libok.so", device=[sass("sm_80"), ptx("compute_90")]),
        ]
    )
    results = by_name(run(ctx, "archs"))
    reloc = results[f"archs: loadable PTX in {LIB}"]
    assert (reloc.status, reloc.severity, reloc.rule) == (Status.FAIL, Severity.WARNING, "relocatable_ptx")
    # the relocatable library is not flagged twice
    assert f"archs: forward-compatible PTX in {LIB}" not in results
    forward = results["archs: forward-compatible PTX in pkg/lib/libj.so"]
    assert (forward.status, forward.severity, forward.rule) == (Status.FAIL, Severity.WARNING, "forward_ptx")
    assert forward.evidence[0].arch == "compute_90"
    assert results["archs: forward-compatible PTX in pkg/lib/libok.so"].status is Status.PASS


def test_policy_severity_makes_a_warning_an_error() -> None:
    lib = library(LIB, device=[sass("sm_90"), ptx("compute_90", relocatable=True)])
    ctx = context([lib], policy={"severity": {"archs.relocatable_ptx": "error"}})
    assert by_name(run(ctx, "archs"))[f"archs: loadable PTX in {LIB}"].severity is Severity.ERROR
    ctx = context([lib], policy={"severity": {"archs": "note"}})
    assert by_name(run(ctx, "archs"))[f"archs: loadable PTX in {LIB}"].severity is Severity.NOTE


def _configured(version: str, libs: list[FileReport], train: Train | None = None) -> dict[str, CheckResult]:
    from cudaship.checks.table import parse_audit_table
    from cudaship.knowledge.arch_table import ArchTable

    table = ArchTable.from_mapping(ARCHS_TABLE, "test.toml")
    policy = parse_audit_table({"archs": {"ptx": "newest"}}, "test.toml", table)
    return by_name(run(context(libs, version=version, policy=policy, train=train), "archs"))


def test_expected_list_from_the_tag() -> None:
    good = library(LIB, device=[sass("sm_80"), sass("sm_90"), sass("sm_120"), ptx("compute_120")])
    results = _configured("1.0+cu128", [good])
    assert "cu128 x86_64 (local tag +cu128)" in results["archs: expected arch list"].reason
    assert results[f"archs: {LIB}"].status is Status.PASS


def test_a_dropped_arch_fails_naming_it() -> None:
    dropped = library(LIB, device=[sass("sm_80"), sass("sm_120"), ptx("compute_120")])
    result = _configured("1.0+cu128", [dropped])[f"archs: {LIB}"]
    assert result.status is Status.FAIL and result.severity is Severity.ERROR
    assert [f.arch for f in result.evidence] == ["sm_90"]


def test_train_override_and_inference() -> None:
    lib = library(
        LIB, device=[sass("sm_80"), sass("sm_90"), sass("sm_100"), sass("sm_120"), ptx("compute_120")]
    )
    results = _configured("1.0", [lib], train=Train(13, 0))
    assert "cu130 x86_64 (--train 13.0)" in results["archs: expected arch list"].reason
    assert results[f"archs: {LIB}"].status is Status.PASS
    # no tag, no --train: the PTX ISA says CUDA 13.0
    inferred = library(
        LIB,
        device=[sass("sm_80"), sass("sm_90"), sass("sm_100"), sass("sm_120"), ptx("compute_120", isa="9.0")],
    )
    reason = _configured("1.0", [inferred])["archs: expected arch list"].reason
    assert "cu130 x86_64 (inferred from the device code" in reason
    assert "from inferred" not in reason  # the source reads on its own, as everywhere it is named


def test_variants_are_judged_against_their_own_train() -> None:
    libs = [
        library(
            "pkg/libk_cuda128.so", device=[sass("sm_80"), sass("sm_90"), sass("sm_120"), ptx("compute_120")]
        ),
        library(
            "pkg/libk_cuda130.so",
            device=[sass("sm_80"), sass("sm_90"), sass("sm_100"), sass("sm_120"), ptx("compute_120")],
        ),
    ]
    results = _configured("1.0+cu130", libs)
    assert results["archs: pkg/libk_cuda128.so"].status is Status.PASS
    assert results["archs: pkg/libk_cuda130.so"].status is Status.PASS
    # the cu128 variant missing sm_90 of ITS list fails; sm_100 is not expected of it
    libs[0] = library("pkg/libk_cuda128.so", device=[sass("sm_80"), sass("sm_120"), ptx("compute_120")])
    failed = _configured("1.0+cu130", libs)["archs: pkg/libk_cuda128.so"]
    assert [f.arch for f in failed.evidence] == ["sm_90"]


def test_static_libraries_are_not_judged_for_run_time_ptx() -> None:
    """cudadevrt.lib / libcudadevrt.a are linked at build time: neither PTX check applies."""
    from dataclasses import replace

    from tests.checks.handmade import host

    static = replace(host(), kind="static-library")
    lib = library(
        "pkg/lib/cudadevrt.lib", static, device=[sass("sm_90"), ptx("compute_90", relocatable=True)]
    )
    assert run(context([lib]), "archs") == []
