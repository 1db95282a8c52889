"""RECORD: every file's hash and size verified; a mismatch, a missing file or an unlisted file fails."""

from __future__ import annotations

from cudaship.checks.context import AuditContext
from cudaship.records.files import FileReport
from cudaship.records.findings import CheckResult, Finding, skipped, verdict
from cudaship.words import agree, count

FAMILY = "record"


def run(ctx: AuditContext) -> list[CheckResult]:
    scan = ctx.scan
    findings = [Finding(p.message, file=p.path) for p in scan.record_problems]
    findings += [Finding(f"{name}: cannot be read: {reason}", file=name) for name, reason in scan.unreadable]
    hashed = sum(1 for e in scan.dist.record if e.digest)
    if scan.unfetched and not findings:
        read = sum(1 for e in scan.dist.record if e.digest and e.path not in set(scan.unfetched))
        results = [_unfetched(scan.unfetched, read)]
    else:
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
    scripts = [_script_phrase(ctx, path, r) for path, r in sorted(ctx.reports.items()) if r.linker_script]
    said = f" ({count(len(scripts), 'GNU ld linker script')}, for the link editor only: {'; '.join(scripts)})"
    results.append(
        verdict(
            FAMILY,
            "record: native files readable",
            unread,
            f"{count(len(ctx.reports), 'native file')} read" + (said if scripts else ""),
        )
    )
    return results


def _script_phrase(ctx: AuditContext, path: str, report: FileReport) -> str:
    """``pkg/lib/libfoo.so names libfoo.so.1 (shipped beside it)``: what a linker script points to, and
    whether the wheel holds it (a plain name is looked up in the script's directory first; an absolute path
    names a file of the machine that links)."""
    assert report.linker_script is not None
    directory = path.rpartition("/")[0]
    files = set(ctx.files)
    said = []
    for name in report.linker_script.inputs:
        if name.startswith("/"):
            said.append(f"{name} (a path on the machine that links)")
        elif name.startswith("-l"):
            said.append(f"{name} (found on the link editor's search path)")
        else:
            here = f"{directory}/{name}" if directory else name
            said.append(f"{name} ({'shipped beside it' if here in files else 'not in the wheel'})")
    return f"{path} names {', '.join(said) if said else 'nothing'}"


def _unfetched(unfetched: tuple[str, ...], checked: int) -> CheckResult:
    """The wheel was read in part (``cudaship survey``): the members read match RECORD, the others were not
    read, so RECORD is not verified for them. A skip, never a pass (nothing was checked for those files) nor
    a failure (nothing is known against the wheel)."""
    return skipped(
        FAMILY,
        "record: hashes and sizes",
        f"not verified: {count(len(unfetched), 'file')} of the wheel "
        f"{agree(len(unfetched), 'was', 'were')} not fetched (the survey reads only the dist-info, the "
        "native members and the Python files, and takes cached native members' facts by RECORD's hash); the "
        f"{count(checked, 'file')} read match RECORD, none missing, none unlisted",
    )
