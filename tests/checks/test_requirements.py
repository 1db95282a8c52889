"""requirements family on hand-built records: declared requirements per platform (templates from the train)
and CUDA imports provided by a requirement (offline: the knowledge table)."""

from __future__ import annotations

from cudaship.records.findings import Severity, Status
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
    # the import resolves nowhere: the closure check's error reports it; this check refers to it (a note)
    closure = by_name(run(ctx, "closure"))["closure: pkg/libk.so"]
    assert (closure.status, closure.severity) == (Status.FAIL, Severity.ERROR)
    assert closure.evidence[0].symbol == "libcudart.so.13"
    assert (result.rule, result.severity) == ("closure", Severity.NOTE)
    assert "closure: pkg/libk.so" in result.reason and "declare nvidia-cuda-runtime" in result.reason


def test_a_cuda_import_without_a_requirement_is_an_error_when_closure_does_not_run() -> None:
    ctx = context(
        [library("pkg/libk.so", host(imports=["libcudart.so.13"]))],
        version="1.0+cu130",
        policy={"checks": ["requirements"]},
    )
    result = by_name(run(ctx, "requirements"))["requirements: CUDA imports provided"]
    assert (result.status, result.rule, result.severity) == (Status.FAIL, None, Severity.ERROR)


def test_no_cuda_import_passes() -> None:
    ctx = context([library("pkg/libk.so", host(imports=["libc.so.6"]))])
    result = by_name(run(ctx, "requirements"))["requirements: CUDA imports provided"]
    assert result.status is Status.PASS
