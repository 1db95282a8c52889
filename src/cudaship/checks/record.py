"""RECORD: every file's hash and size verified; a mismatch, a missing file or an unlisted file fails."""

from __future__ import annotations

from cudaship.checks.context import AuditContext
from cudaship.records.findings import CheckResult, Finding, verdict
from cudaship.words import agree, count

FAMILY = "record"


def run(ctx: AuditContext) -> list[CheckResult]:
    scan = ctx.scan
    findings = [Finding(p.message, file=p.path) for p in scan.record_problems]
    findings += [Finding(f"{name}: cannot be read: {reason}", file=name) for name, reason in scan.unreadable]
    hashed = sum(1 for e in scan.dist.record if e.digest)
    results = [
        verdict(
            FAMILY,
            "record: hashes and sizes",
            findings,
            f"{count(hashed, 'file')} {agree(hashed, 'matches', 'match')} RECORD (hash and size), none "
            "missing, none unlisted",
        )
    ]
    unread = [
        Finding(f"{path}: {report.error}", file=path)
        for path, report in sorted(ctx.reports.items())
        if report.error is not None
    ]
    results.append(
        verdict(
            FAMILY,
            "record: native files readable",
            unread,
            f"{count(len(ctx.reports), 'native file')} read",
        )
    )
    return results
