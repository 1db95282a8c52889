"""record family on hand-built records: RECORD problems and unreadable members fail, readable files pass."""

from __future__ import annotations

from cudaship.records.findings import Severity, Status
from cudaship.wheel.records import RecordProblem
from tests.checks.handmade import by_name, context, library, run


def test_clean_wheel_passes() -> None:
    results = by_name(run(context([library("pkg/libfoo.so")], files=["pkg/__init__.py"]), "record"))
    assert results["record: hashes and sizes"].status is Status.PASS
    assert results["record: native files readable"].reason == "1 native file read"


def test_record_problems_and_unreadable_members_fail_naming_the_file() -> None:
    ctx = context(
        files=["pkg/a.py"],
        record_problems=[RecordProblem("hash", "pkg/a.py", "pkg/a.py: sha256 differs from RECORD")],
        unreadable=[("pkg/b.so", "truncated deflate stream")],
    )
    result = by_name(run(ctx, "record"))["record: hashes and sizes"]
    assert result.status is Status.FAIL and result.severity is Severity.ERROR
    assert [f.file for f in result.evidence] == ["pkg/a.py", "pkg/b.so"]


def test_a_native_file_that_cannot_be_read_fails() -> None:
    ctx = context([library("pkg/libbad.so", error="truncated ELF section table")])
    result = by_name(run(ctx, "record"))["record: native files readable"]
    assert result.status is Status.FAIL
    assert result.evidence[0].file == "pkg/libbad.so"
    assert "truncated ELF" in result.reason
