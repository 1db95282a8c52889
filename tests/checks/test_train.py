"""The wheel's train: --train, the local tag, else inferred (and the report says from what)."""

from __future__ import annotations

from cudaship.knowledge.trains import Train
from tests.checks.handmade import context, host, library, ptx, sass


def test_override_then_tag() -> None:
    ctx = context(version="1.0+cu126", train=Train(13, 0))
    assert (ctx.train_or_error, ctx.train_source) == (Train(13, 0), "--train 13.0")
    ctx = context(version="1.0+cu126")
    assert (ctx.train_or_error, ctx.train_source) == (Train(12, 6), "local tag +cu126")


def test_exact_cuda_toolkit_requirement() -> None:
    ctx = context(requires=["cuda-toolkit[cublas,cudart]==13.0.3; platform_system == 'Linux'", "numpy"])
    assert ctx.train_or_error == Train(13, 0)
    assert ctx.train_source == "inferred from the requirement cuda-toolkit==13.0.3"


def test_exact_runtime_pin() -> None:
    ctx = context(requires=["nvidia-cuda-runtime-cu12==12.8.90"])
    assert ctx.train_or_error == Train(12, 8)


def test_major_from_requirements_minor_from_device_code() -> None:
    lib = library("pkg/libk.so", device=[sass("sm_90", toolkit="12.6"), ptx("compute_90", isa="8.5")])
    ctx = context([lib], requires=["nvidia-cublas-cu12>=12.1", "nvidia-cuda-runtime-cu12>=12.1"])
    assert ctx.train_or_error == Train(12, 6)
    assert "nvidia-cublas-cu12" in ctx.train_source and "12.6" in ctx.train_source


def test_major_from_cudart_import() -> None:
    ctx = context([library("pkg/libk.so", host(imports=["libcudart.so.13"]), cudart=13)])
    assert ctx.train_or_error == Train(13, 0)
    assert "13.0 assumed" in ctx.train_source


def test_nothing_to_infer_says_why() -> None:
    ctx = context([library("pkg/libk.so")], version="2.0")
    assert isinstance(ctx.train_or_error, str)
    assert ctx.train_source.startswith("none: version 2.0 has no local tag")


def test_variants_do_not_decide_the_wheel_train() -> None:
    libs = [
        library("pkg/libk_cuda118.so", device=[sass("sm_90", toolkit="11.8")], cudart=11),
        library("pkg/libk_cuda130.so", device=[sass("sm_90", toolkit="13.0")], cudart=13),
    ]
    ctx = context(libs)
    assert isinstance(ctx.train_or_error, str)
    assert (
        ctx.train_source
        == "none for the wheel: its CUDA libraries are variants, each with its own train (11.8, 13.0)"
    )
    assert ctx.train_of("pkg/libk_cuda118.so") == Train(11, 8)


def test_policy_declares_variants() -> None:
    libs = [library("pkg/kernels_old.so"), library("pkg/kernels_new.so")]
    policy = {
        "variants": {"groups": {"kernels": {"pkg/kernels_old.so": "12.6", "pkg/kernels_new.so": "13.0"}}}
    }
    ctx = context(libs, policy=policy)
    assert ctx.train_of("pkg/kernels_old.so") == Train(12, 6)
    assert ctx.variants["pkg/kernels_new.so"].group == "kernels"
    off = context(
        [library("pkg/k_cuda118.so"), library("pkg/k_cuda128.so")], policy={"variants": {"by_name": False}}
    )
    assert off.variants == {}


def test_bad_variant_declarations_name_the_key() -> None:
    import pytest

    from cudaship.checks.table import parse_audit_table
    from cudaship.errors import PolicyError

    with pytest.raises(
        PolicyError, match=r"audit\.variants\.groups\.k: a group of alternatives needs at least two"
    ):
        parse_audit_table({"variants": {"groups": {"k": {"a.so": "12.8"}}}}, "t.toml")
    wrong_train = r"audit\.variants\.groups\.k\.\"b\.so\": 'twelve' is not a CUDA train"
    with pytest.raises(PolicyError, match=wrong_train):
        parse_audit_table({"variants": {"groups": {"k": {"a.so": "12.8", "b.so": "twelve"}}}}, "t.toml")
    with pytest.raises(PolicyError, match=r"audit\.variants\.nope: unknown key"):
        parse_audit_table({"variants": {"nope": 1}}, "t.toml")
