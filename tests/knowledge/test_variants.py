"""Recognising variants (alternative libraries, one loaded at run time) by name."""

from __future__ import annotations

from cudaship.knowledge.trains import Train
from cudaship.knowledge.variants import declared, recognise

BNB = [
    "bitsandbytes/libbitsandbytes_cpu.so",
    "bitsandbytes/libbitsandbytes_cuda118.so",
    "bitsandbytes/libbitsandbytes_cuda132.so",
    "bitsandbytes/libbitsandbytes_rocm64.so",
    "bitsandbytes/libbitsandbytes_xpu2025.so",
]


def test_bitsandbytes_layout() -> None:
    found = recognise(BNB)
    assert set(found) == set(BNB)
    assert {v.group for v in found.values()} == {"bitsandbytes/libbitsandbytes_*.so"}
    assert found["bitsandbytes/libbitsandbytes_cuda118.so"].train == Train(11, 8)
    assert found["bitsandbytes/libbitsandbytes_cuda132.so"].train == Train(13, 2)
    assert found["bitsandbytes/libbitsandbytes_rocm64.so"].backend == "rocm"
    assert found["bitsandbytes/libbitsandbytes_cpu.so"].train is None


def test_cu_suffix_and_windows_names() -> None:
    found = recognise(["pkg/_C_cu126.pyd", "pkg/_C_cu128.pyd", "pkg/other.pyd"])
    assert {p: v.train for p, v in found.items()} == {
        "pkg/_C_cu126.pyd": Train(12, 6),
        "pkg/_C_cu128.pyd": Train(12, 8),
    }


def test_not_variants() -> None:
    # one file alone, torch's own libraries, a CUDA name without a version, groups without a CUDA member
    assert recognise(["pkg/libk_cuda128.so"]) == {}
    assert (
        recognise(["torch/lib/libtorch_cuda.so", "torch/lib/libtorch_cpu.so", "torch/lib/libc10_cuda.so"])
        == {}
    )
    assert recognise(["a/libx_rocm64.so", "a/libx_cpu.so"]) == {}
    # different directories or extensions are different groups
    assert recognise(["a/libk_cuda118.so", "b/libk_cuda128.so"]) == {}


def test_declared_variant() -> None:
    v = declared("kernels", "pkg/kernels_new.so", "12.8")
    assert (v.group, v.train, v.is_cuda) == ("kernels", Train(12, 8), True)
    assert declared("kernels", "pkg/k_cu126.so", None).train == Train(12, 6)
