"""consistency family on hand-built records: the claimed train against cudart, PTX ISA, cubin toolkits and
requirements; variants against their own trains."""

from __future__ import annotations

from cudaship.checks.records import Status
from cudaship.knowledge.trains import Train
from tests.checks.handmade import context, library, ptx, run, sass


def test_tag_and_sources_agree() -> None:
    lib = library(
        "pkg/libk.so", device=[sass("sm_90", toolkit="13.0"), ptx("compute_90", isa="9.0")], cudart=13
    )
    (result,) = run(
        context([lib], version="1.0+cu130", requires=["nvidia-cuda-runtime>=13,<14"]), "consistency"
    )
    assert result.status is Status.PASS
    assert result.reason.startswith("agree: tag +cu130 = 13.0")


def test_a_library_of_another_major_fails() -> None:
    lib = library("pkg/libk.so", device=[sass("sm_90", toolkit="12.8")], cudart=12)
    (result,) = run(context([lib], version="1.0+cu130"), "consistency")
    assert result.status is Status.FAIL
    assert any("the wheel is tagged +cu130" in f.message for f in result.evidence)


def test_train_override_is_the_claim() -> None:
    lib = library("pkg/libk.so", device=[sass("sm_90", toolkit="12.8")], cudart=12)
    (result,) = run(context([lib], version="1.0", train=Train(13, 0)), "consistency")
    assert result.status is Status.FAIL
    assert any("built for CUDA 13.0 (--train)" in f.message for f in result.evidence)


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
    (result,) = run(context(libs, version="1.0+cu130"), "consistency")
    assert result.status is Status.PASS, result.evidence
    assert "pkg/libk_cuda118.so (variant, 11.8)" in result.reason
    libs[0] = library("pkg/libk_cuda118.so", device=[sass("sm_90", toolkit="12.0")], cudart=12)
    (result,) = run(context(libs, version="1.0+cu130"), "consistency")
    assert result.status is Status.FAIL
    assert result.evidence[0].file == "pkg/libk_cuda118.so"
