"""forbidden_imports and required_imports families on hand-built records."""

from __future__ import annotations

from cudaship.checks.context import AuditContext
from cudaship.records.findings import Status
from tests.checks.handmade import by_name, context, host, library, run

MODULE = "pkg/_C.so"
BACKEND = "pkg/lib/libbackend.so"


def _ctx(policy: dict[str, object]) -> AuditContext:
    return context(
        [
            library(MODULE, host(imports=["libbackend.so", "libc.so.6"], runpath=["$ORIGIN/lib"])),
            library(
                BACKEND, host(imports=["libcudart.so.13"], embedded=["libcuda.so.1"], soname="libbackend.so")
            ),
        ],
        policy=policy,
    )


def test_no_cuda_follows_shipped_libraries() -> None:
    ctx = _ctx({"forbidden_imports": [{"libraries": [MODULE], "no_cuda": True}]})
    (result,) = run(ctx, "forbidden_imports")
    assert result.status is Status.FAIL
    messages = [f.message for f in result.evidence]
    assert any("libcudart.so.13" in m and "through" in m for m in messages)
    assert any("libcuda.so.1 by name" in m for m in messages)


def test_forbidden_pattern_and_unmatched_rule() -> None:
    ctx = _ctx(
        {
            "forbidden_imports": [
                {"libraries": [BACKEND], "patterns": ["libcudart*"]},
                {"libraries": ["pkg/none/*.so"], "patterns": ["x"]},
            ]
        }
    )
    results = run(ctx, "forbidden_imports")
    assert [r.status for r in results] == [Status.FAIL, Status.SKIP]
    assert results[0].evidence[0].symbol == "libcudart.so.13"


def test_required_imports_direct_or_by_name() -> None:
    ctx = _ctx(
        {
            "required_imports": [
                {"libraries": [BACKEND], "patterns": ["libcudart.so.*", "libcuda.so.1"]},
                {"libraries": [BACKEND], "patterns": ["libcuda.so.1"], "dynamic_load": False},
            ]
        }
    )
    results = list(by_name(run(ctx, "required_imports")).values())
    assert results[0].status is Status.PASS
    assert results[0].reason == "imports libcudart.so.13; loads libcuda.so.1 by name"
    assert results[1].status is Status.FAIL
    assert results[1].evidence[0].message == "does not import libcuda.so.1"
