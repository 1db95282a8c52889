"""ownership family on hand-built records: sentinels defined once, by the owner."""

from __future__ import annotations

from cudaship.records.findings import Status
from tests.checks.handmade import by_name, context, host, library, run

POLICY = {
    "ownership": {"components": {"alloc": {"owner": "alloc", "sentinels": ["alloc_new", "alloc_free"]}}}
}


def test_owner_defines_every_sentinel_once() -> None:
    ctx = context([library("pkg/liballoc.so", host(exports=["alloc_new", "alloc_free"]))], policy=POLICY)
    result = by_name(run(ctx, "ownership"))["ownership: alloc"]
    assert result.status is Status.PASS


def test_duplicate_and_foreign_definitions_fail() -> None:
    ctx = context(
        [
            library("pkg/liballoc.so", host(exports=["alloc_new"])),
            library("pkg/libother.so", host(exports=["alloc_new"])),
        ],
        policy=POLICY,
    )
    result = by_name(run(ctx, "ownership"))["ownership: alloc"]
    messages = [f.message for f in result.evidence]
    assert result.status is Status.FAIL
    assert any("defined by 2 libraries" in m for m in messages)
    assert any("whose name does not start with alloc" in m for m in messages)
    assert any("partly present: alloc_free" in m for m in messages)


def test_missing_owner_fails() -> None:
    ctx = context([library("pkg/libx.so", host(exports=["x"]))], policy=POLICY)
    result = by_name(run(ctx, "ownership"))["ownership: alloc"]
    assert "no shipped library named alloc*" in result.reason
