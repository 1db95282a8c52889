"""requirements family on hand-built records: declared requirements per platform (templates from the train)
and CUDA imports provided by a requirement (offline: the knowledge table)."""

from __future__ import annotations

from cudaship.checks.records import Status
from tests.checks.handmade import by_name, context, host, library, run

POLICY = {"requirements": {"linux": ["nvidia-cuda-runtime{cu}>={major},<{next_major}"]}}


def test_declared_requirements_follow_the_train() -> None:
    good = context(version="1.0+cu130", requires=["nvidia-cuda-runtime>=13,<14"], policy=POLICY)
    assert by_name(run(good, "requirements"))["requirements: declared for linux"].status is Status.PASS
    wrong = context(version="1.0+cu126", requires=["nvidia-cuda-runtime>=13,<14"], policy=POLICY)
    result = by_name(run(wrong, "requirements"))["requirements: declared for linux"]
    assert result.status is Status.FAIL


def test_a_cuda_import_without_a_requirement_fails() -> None:
    ctx = context([library("pkg/libk.so", host(imports=["libcudart.so.13"]))], version="1.0+cu130")
    result = by_name(run(ctx, "requirements"))["requirements: CUDA imports provided"]
    assert result.status is Status.FAIL
    assert result.evidence[0].symbol == "libcudart.so.13"


def test_no_cuda_import_passes() -> None:
    ctx = context([library("pkg/libk.so", host(imports=["libc.so.6"]))])
    result = by_name(run(ctx, "requirements"))["requirements: CUDA imports provided"]
    assert result.status is Status.PASS
