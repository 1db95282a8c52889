"""consistency family on hand-built records: the claimed train against cudart, PTX ISA, cubin toolkits and
requirements; variants against their own trains."""

from __future__ import annotations

from cudaship.knowledge.trains import Train
from cudaship.records.findings import CheckResult, Status
from tests.checks.handmade import by_name, context, library, ptx, run, sass

TRAIN = "consistency: CUDA train"
OLDER = "consistency: device code older than the train"
CLAIM = "consistency: CUDA claim"


def train_checks(results: list[CheckResult]) -> list[CheckResult]:
    """The results but the CUDA-claim check (a +cuXYZ tag claims CUDA; these libraries carry device code)."""
    assert all(r.status is Status.PASS for r in results if r.name == CLAIM)
    return [r for r in results if r.name != CLAIM]


def test_tag_and_sources_agree() -> None:
    lib = library(
        "pkg/libk.so", device=[sass("sm_90", toolkit="13.0"), ptx("compute_90", isa="9.0")], cudart=13
    )
    (result,) = train_checks(
        run(context([lib], version="1.0+cu130", requires=["nvidia-cuda-runtime>=13,<14"]), "consistency")
    )
    assert result.status is Status.PASS
    assert result.reason.startswith("agree: tag +cu130 = 13.0")


def test_a_library_of_another_major_fails() -> None:
    lib = library("pkg/libk.so", device=[sass("sm_90", toolkit="12.8")], cudart=12)
    results = by_name(run(context([lib], version="1.0+cu130"), "consistency"))
    result = results[TRAIN]
    assert result.status is Status.FAIL
    assert [f.message for f in result.evidence] == ["cudart 12: CUDA 12, the wheel is tagged +cu130"]
    # the 12.8 cubins are older than the tag: not a conflict, a warning of its own
    assert results[OLDER].status is Status.FAIL and results[OLDER].rule == "older_code"
    assert "CUDA 12.8 (pkg/libk.so: cubin toolkit 12.8), older than CUDA 13.0" in results[OLDER].reason


def test_train_override_is_the_claim() -> None:
    lib = library("pkg/libk.so", device=[sass("sm_90", toolkit="12.8")], cudart=12)
    result = by_name(run(context([lib], version="1.0", train=Train(13, 0)), "consistency"))[TRAIN]
    assert result.status is Status.FAIL
    assert any("built for CUDA 13.0 (--train)" in f.message for f in result.evidence)


def test_device_code_of_older_toolkits_beside_the_trains_is_no_conflict() -> None:
    """Issue 21, class 6: libcufft.so.12 (nvidia-cufft 12.0.0.61, CUDA 13) carries PTX ISA 7.0-7.8 and CUDA
    11.5/11.8 cubins beside its 13.0 ones: linked from older objects, all run on a CUDA 13 driver."""
    device = [
        sass("sm_75", toolkit="11.5"),
        sass("sm_80", toolkit="11.8"),
        sass("sm_90", toolkit="13.0"),
        ptx("compute_75", isa="7.0"),
        ptx("compute_80", isa="7.8"),
        ptx("compute_90", isa="9.0"),
    ]
    untagged = run(context([library("pkg/libk.so", device=device)], version="1.0"), "consistency")
    assert [(r.name, r.status) for r in untagged] == [(TRAIN, Status.PASS)]
    tagged = train_checks(
        run(context([library("pkg/libk.so", device=device, cudart=13)], version="1.0+cu130"), "consistency")
    )
    assert [(r.name, r.status) for r in tagged] == [(TRAIN, Status.PASS)], tagged


def test_device_code_newer_than_the_train_fails() -> None:
    device = [sass("sm_90", toolkit="13.2"), ptx("compute_90", isa="9.2")]
    result = by_name(
        run(context([library("pkg/libk.so", device=device)], version="1.0+cu130"), "consistency")
    )
    messages = [f.message for f in result[TRAIN].evidence]
    assert result[TRAIN].status is Status.FAIL
    assert "cubins built by CUDA 13.2, newer than CUDA 13.0: the wheel is tagged +cu130" in messages
    assert any(
        m.startswith("PTX ISA 9.2 (CUDA 13.2) is newer than CUDA 13.0 writes (PTX ISA 9.0)") for m in messages
    )
    assert OLDER not in result


def test_without_a_tag_device_code_newer_than_the_imported_cudart_fails() -> None:
    lib = library(
        "pkg/libk.so", device=[sass("sm_90", toolkit="13.0"), ptx("compute_80", isa="7.0")], cudart=12
    )
    (result,) = run(context([lib], version="1.0"), "consistency")
    assert result.status is Status.FAIL
    assert [f.message for f in result.evidence] == [
        "sources disagree: cubin toolkit 13.0 newer than the cudart 12 it imports"
    ]


def test_requirements_whose_versions_are_not_cuda_versions_name_no_cuda_major() -> None:
    """Issue 21, class 5: nvidia-cudnn-frontend 1.x and nvidia-cutlass-dsl 4.x are not CUDA 1 and CUDA 4;
    nvidia-cufft 12.x is CUDA 13's cuFFT; -cu12 names CUDA 12 whatever the version."""
    lib = library("pkg/libk.so", device=[sass("sm_90", toolkit="13.0")], cudart=13)
    requires = [
        "nvidia-cudnn-frontend>=1.5",
        "nvidia-cutlass-dsl>=4.2",
        "nvidia-ml-py>=12.535",
        "nvidia-modelopt>=0.3",
        "nvidia-cufft>=12.0",
        "nvidia-cublas>=13.0",
    ]
    (result,) = train_checks(run(context([lib], version="1.0+cu130", requires=requires), "consistency"))
    assert result.status is Status.PASS, result.evidence
    assert "requirement nvidia-cufft>=12.0" in result.reason
    assert "cudnn-frontend" not in result.reason and "cutlass" not in result.reason
    (result,) = train_checks(
        run(context([lib], version="1.0+cu130", requires=["nvidia-cufft-cu12>=11"]), "consistency")
    )
    assert [f.message for f in result.evidence] == [
        "requires CUDA 12 (nvidia-cufft-cu12>=11), the wheel is tagged +cu130"
    ]


def test_an_inferred_train_is_not_compared_with_its_own_evidence() -> None:
    # no tag: the 12.8 cubins and 12.6 PTX of one major agree; the inferred 12.8 is not a claim to check
    lib = library(
        "pkg/libk.so", device=[sass("sm_90", toolkit="12.8"), ptx("compute_90", isa="8.5")], cudart=12
    )
    (result,) = run(context([lib], version="1.0"), "consistency")
    assert result.status is Status.PASS
    assert result.reason.startswith("agree: no train tag")


def test_variants_agree_with_their_own_trains() -> None:
    libs = [
        library("pkg/libk_cuda118.so", device=[sass("sm_90", toolkit="11.8")], cudart=11),
        library("pkg/libk_cuda130.so", device=[sass("sm_90", toolkit="13.0")], cudart=13),
    ]
    (result,) = train_checks(run(context(libs, version="1.0+cu130"), "consistency"))
    assert result.status is Status.PASS, result.evidence
    assert "pkg/libk_cuda118.so (variant, 11.8)" in result.reason
    # a variant's device code older than its own train is no conflict either
    libs[1] = library("pkg/libk_cuda130.so", device=[sass("sm_90", toolkit="12.8")], cudart=13)
    assert run(context(libs, version="1.0+cu130"), "consistency")[0].status is Status.PASS
    libs[0] = library("pkg/libk_cuda118.so", device=[sass("sm_90", toolkit="12.0")], cudart=12)
    (result,) = train_checks(run(context(libs, version="1.0+cu130"), "consistency"))
    assert result.status is Status.FAIL
    assert result.evidence[0].file == "pkg/libk_cuda118.so"
