"""The default audit's arch coverage (rule ``archs.coverage``): every library with device code runs, natively
or by PTX JIT, on every GPU its CUDA train supports on the wheel's machine; a warning by default, an error by
policy; skipped, saying why, when no train is known. Hand-built records for each rule of the decision, then
real wheels (bitsandbytes, whose per-CUDA libraries differ in what they carry, and cupy)."""

from __future__ import annotations

from pathlib import Path

import pytest

from cudaship.checks.engine import audit_wheels
from cudaship.checks.table import default_policy
from cudaship.knowledge.gpus import gpu_groups, train_gpus
from cudaship.knowledge.releases import release_for
from cudaship.knowledge.trains import Train
from cudaship.records.findings import CheckResult, Severity, Status
from tests.checks.handmade import by_name, context, library, ptx, run, sass

LIB = "pkg/lib/libk.so"
NAME = f"archs: GPU coverage of {LIB}"
#: What torch 2.8's cu128 build carries (TORCH_CUDA_ARCH_LIST 7.0 ... 12.0, no PTX)
TORCH_CU128 = [sass(f"sm_{n}") for n in (70, 75, 80, 86, 90, 100, 120)]


def _coverage(results: list[CheckResult]) -> dict[str, CheckResult]:
    return {n: r for n, r in by_name(results).items() if n.startswith("archs: GPU coverage")}


def test_train_gpus_come_from_the_data_per_machine() -> None:
    x86 = [g.capability for g in train_gpus(Train(12, 8), "x86_64")]
    assert x86 == ["5.0", "5.2", "6.0", "6.1", "7.0", "7.5", "8.0", "8.6", "8.9", "9.0", "10.0", "12.0"]
    # CUDA 13.0 dropped Maxwell to Volta; Jetson Thor (11.0) and DGX Spark (12.1) are Arm only
    arm = [g.capability for g in train_gpus(Train(13, 0), "aarch64")]
    assert arm == ["7.5", "8.0", "9.0", "10.0", "10.3", "11.0", "12.1"]
    assert "11.0" not in [
        g.capability for g in train_gpus(Train(12, 9), "aarch64")
    ]  # Thor: JetPack before 13
    # every capability offered is one the release compiles for, on a machine a CUDA driver serves
    for release in (release_for(Train(11, 8)), release_for(Train(13, 2))):
        for machine in ("x86_64", "aarch64"):
            for group in train_gpus(release.train, machine):
                assert group.arch.sm in release.sms and machine in group.machines
    assert train_gpus(Train(13, 0), "ppc64le") == ()
    assert all(g.machines or g.arch.capability in ("5.3", "6.2", "7.2", "8.7") for g in gpu_groups())


def test_a_gap_is_a_warning_naming_each_gpu_and_an_error_by_policy() -> None:
    lib = library(LIB, device=TORCH_CU128)
    result = _coverage(run(context([lib], version="2.8.0+cu128"), "archs"))[NAME]
    assert (result.status, result.severity, result.rule) == (Status.FAIL, Severity.WARNING, "coverage")
    assert result.reason == (
        "does not run on 4 of the 12 GPU capabilities CUDA 12.8 supports on x86_64: 5.0 5.2 6.0 6.1 "
        "(Maxwell, Pascal)"
    )
    assert [f.arch for f in result.evidence] == ["sm_50", "sm_52", "sm_60", "sm_61"]
    assert result.evidence[3].message.startswith("does not run on 6.1 Pascal (GTX 1080 Ti, GTX 1080), which")
    gate = context([lib], version="2.8.0+cu128", policy={"severity": {"archs.coverage": "error"}})
    assert _coverage(run(gate, "archs"))[NAME].severity is Severity.ERROR
    # the same library for CUDA 13.0, which no longer supports Maxwell to Volta: it covers every GPU
    ok = _coverage(run(context([lib], version="2.9.0+cu130"), "archs"))[NAME]
    assert ok.status is Status.PASS
    assert ok.reason.startswith(
        "runs on every GPU CUDA 13.0 supports on x86_64: 7.5 8.0 8.6 8.9 9.0 10.0 10.3"
    )


def test_ptx_covers_newer_gpus_by_jit_never_older_ones() -> None:
    only_ptx = library(LIB, device=[ptx("compute_50")])
    result = _coverage(run(context([only_ptx], version="1.0+cu128"), "archs"))[NAME]
    assert result.status is Status.PASS and "(0 native, 12 by PTX JIT)" in result.reason
    newer = library(LIB, device=[sass("sm_80"), ptx("compute_80")])
    failed = _coverage(run(context([newer], version="1.0+cu130"), "archs"))[NAME]
    assert [f.arch for f in failed.evidence] == ["sm_75"]  # 9.0 ... 12.0 JIT from compute_80


def test_arch_specific_code_runs_only_on_its_gpu_and_says_so() -> None:
    lib = library(LIB, device=[sass("sm_90a"), sass("sm_100a")])
    result = _coverage(run(context([lib], version="1.0+cu130"), "archs"))[NAME]
    assert result.status is Status.PASS
    assert result.reason.startswith("arch-specific device code only (sm_90a sm_100a)")
    assert result.reason.endswith("it runs on 9.0 10.0")


def test_per_arch_builds_are_judged_together() -> None:
    """``k_sm75.so``, ``k_sm80.so``, ``k_sm90.so``: one caller picks the build for the GPU it finds."""
    libs = [
        library("pkg/k_sm75.so", device=[sass("sm_75")]),
        library("pkg/k_sm80.so", device=[sass("sm_80")]),
        library("pkg/k_sm90.so", device=[sass("sm_90"), ptx("compute_90")]),
    ]
    results = _coverage(run(context(libs, version="1.0+cu130"), "archs"))
    assert list(results) == ["archs: GPU coverage of pkg/k_*.so"]
    result = results["archs: GPU coverage of pkg/k_*.so"]
    assert result.status is Status.PASS and "(3 per-arch builds judged together)" in result.reason
    # without the 7.5 build, the group misses 7.5, and says so for the group
    gap = _coverage(run(context(libs[1:], version="1.0+cu130"), "archs"))["archs: GPU coverage of pkg/k_*.so"]
    assert gap.status is Status.FAIL and [f.arch for f in gap.evidence] == ["sm_75"]
    # an arch token alone does not group libraries of different names
    alone = _coverage(run(context([libs[0], library("pkg/j_sm80.so", device=[sass("sm_80")])]), "archs"))
    assert set(alone) == {"archs: GPU coverage"}  # no train: one skip for the wheel


def test_no_train_is_a_skip_saying_why_never_a_pass() -> None:
    results = _coverage(run(context([library(LIB, device=TORCH_CU128)], version="1.0"), "archs"))
    (result,) = results.values()
    assert result.status is Status.SKIP and result.rule == "coverage"
    assert result.reason.startswith("skipped: no CUDA train known to take the supported GPUs from (")
    assert "give --train or a local version tag (+cu130)" in result.reason


def test_machines_and_platforms_without_cuda_are_skipped() -> None:
    mac = context([library(LIB, device=TORCH_CU128)], version="1.0+cu128", platform="macos")
    (result,) = _coverage(run(mac, "archs")).values()
    assert result.status is Status.SKIP and "no NVIDIA driver serves macos aarch64" in result.reason
    arm = context(
        [library(LIB, device=[*TORCH_CU128, ptx("compute_120")])], version="1.0+cu130", platform="aarch64"
    )
    result = _coverage(run(arm, "archs"))[NAME]
    # 11.0 (Thor) is 11.x: sm_100 does not run there, compute_120 is newer; 7.5 is the T4G on Arm
    assert result.status is Status.FAIL and [f.arch for f in result.evidence] == ["sm_110"]


def test_a_project_arch_table_replaces_the_default_coverage() -> None:
    from cudaship.checks.table import parse_audit_table
    from cudaship.knowledge.arch_table import ArchTable

    table = ArchTable.from_mapping({"cu128": {"x86_64": "7.0 7.5 8.0 8.6 9.0 10.0 12.0"}}, "test.toml")
    policy = parse_audit_table({"archs": {"ptx": "none"}}, "test.toml", table)
    results = run(context([library(LIB, device=TORCH_CU128)], version="1.0+cu128", policy=policy), "archs")
    assert _coverage(results) == {}
    assert by_name(results)[f"archs: {LIB}"].status is Status.PASS


@pytest.mark.slow
def test_real_bitsandbytes_each_cuda_library_against_its_own_train(bitsandbytes_linux_wheel: Path) -> None:
    """bitsandbytes 0.50.2 carries SASS from sm_60 (CUDA 11.8-12.6) or sm_70 (12.8) up: the warnings name
    exactly the GPUs those CUDA versions support and it leaves out; the CUDA 13 libraries cover theirs."""
    (wheel,) = audit_wheels([bitsandbytes_linux_wheel], default_policy()).wheels
    results = _coverage(list(wheel.checks))
    gaps = {
        name.rsplit("_", 1)[1]: [f.arch for f in r.evidence]
        for name, r in results.items()
        if r.status is Status.FAIL
    }
    assert gaps == {
        "cuda118.so": ["sm_35", "sm_37", "sm_50", "sm_52"],
        "cuda121.so": ["sm_50", "sm_52"],
        "cuda124.so": ["sm_50", "sm_52"],
        "cuda126.so": ["sm_50", "sm_52"],
        "cuda128.so": ["sm_50", "sm_52", "sm_60", "sm_61"],
    }
    for tag in ("cuda130.so", "cuda132.so"):
        result = results[f"archs: GPU coverage of bitsandbytes/libbitsandbytes_{tag}"]
        assert result.status is Status.PASS and "(8 native)" in result.reason
    assert all(r.severity is Severity.WARNING for r in results.values() if r.status is Status.FAIL)
    assert not wheel.summary.failed  # a warning does not fail the audit


def test_a_train_with_no_known_gpu_on_the_machine_is_skipped_not_passed(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """Were the data to know no GPU of the train on the wheel's machine, nothing is checked: a skip."""
    monkeypatch.setattr("cudaship.checks.archs.train_gpus", lambda train, machine: ())
    ctx = context([library(LIB, device=TORCH_CU128)], version="1.0+cu128", platform="aarch64")
    (result,) = _coverage(run(ctx, "archs")).values()
    assert result.status is Status.SKIP
    assert result.reason == "skipped: cudaship's data knows no GPU that CUDA 12.8 supports on aarch64"
