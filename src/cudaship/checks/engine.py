"""The audit engine: scan each wheel once, run every check family the policy enables, collect every result.

A check never stops the run: an unexpected error inside one family becomes that family's FAIL (naming the
error), and the other families still run. A wheel that cannot be read at all (not a zip, no dist-info) is a
:class:`~cudaship.errors.WheelError`; the CLI reports it and exits 2.
"""

from __future__ import annotations

import os
from collections.abc import Callable, Sequence
from pathlib import Path

from cudaship.checks import (
    archs,
    closure,
    collisions,
    consistency,
    imports,
    ownership,
    record,
    requirements,
    ships,
)
from cudaship.checks.context import AuditContext, wheel_platform
from cudaship.checks.policy import Policy
from cudaship.checks.programscan import WHEEL_ONLY, scan_program
from cudaship.checks.records import AuditReport, CheckResult, Finding, WheelAudit, WheelFacts, failed
from cudaship.checks.wheelscan import ScannedWheel, ScanObserver, scan_wheel
from cudaship.errors import CudashipError
from cudaship.inspection.records import ContainerKind
from cudaship.inspection.walk import is_program

CheckFn = Callable[[AuditContext], list[CheckResult]]

#: family -> the function that runs it, in report order
CHECKS: dict[str, CheckFn] = {
    "record": record.run,
    "ships": ships.run,
    "forbidden_imports": imports.run_forbidden,
    "required_imports": imports.run_required,
    "archs": archs.run,
    "requirements": requirements.run,
    "ownership": ownership.run,
    "closure": closure.run,
    "collisions": collisions.run,
    "consistency": consistency.run,
}


class AuditObserver(ScanObserver):
    """Progress hooks for the CLI (all do nothing by default)."""

    def wheel_started(self, path: str) -> None:
        """A wheel is about to be read."""


def audit_scanned(scan: ScannedWheel, policy: Policy) -> WheelAudit:
    """Run the policy's check families over a wheel already scanned."""
    platform, notes = wheel_platform(scan)
    program = scan.kind is not ContainerKind.WHEEL
    if program:
        notes = [*notes, *_program_notes(scan, policy)]
    ctx = AuditContext(scan=scan, policy=policy, platform=platform, notes=notes)
    results: list[CheckResult] = []
    for family, fn in CHECKS.items():
        if not policy.runs(family) or (program and family in WHEEL_ONLY):
            continue
        try:
            results.extend(fn(ctx))
        except CudashipError as e:
            results.append(failed(family, f"{family}: error", e.message, [Finding(e.message)]))
        except Exception as e:  # a bug in one check must not hide the others
            message = f"internal error in the {family} checks: {type(e).__name__}: {e}"
            results.append(failed(family, f"{family}: error", message, [Finding(message)]))
    train = ctx.train
    meta = scan.dist.metadata
    facts = WheelFacts(
        filename=scan.filename,
        name=None if program else meta.name,
        version=None if program else meta.version,
        local=meta.local,
        train=train.version if train is not None else None,
        platform=platform.os,
        machine=platform.machine,
        tags=scan.dist.wheel.tags,
        files=len(scan.members),
        native_files=len(scan.reports),
        uncompressed_size=scan.uncompressed_size,
    )
    return WheelAudit(
        path=scan.path,
        facts=facts,
        checks=tuple(results),
        notes=tuple(ctx.notes),
        unreadable=tuple(scan.unreadable),
    )


def _program_notes(scan: ScannedWheel, policy: Policy) -> list[str]:
    title = scan.kind.noun
    train = (
        f"CUDA train {scan.program_train}, from {scan.train_evidence}"
        if scan.program_train
        else "no CUDA train recorded"
    )
    notes = [f"{title}: its libraries and cubins audited as members; {train}"]
    skipped = [f for f in WHEEL_ONLY if policy.runs(f)]
    if skipped:
        notes.append(f"{', '.join(skipped)}: wheel-only checks (dist-info), not run on a program")
    return [*notes, *scan.program_notes]


def audit_wheel(
    path: str | os.PathLike[str],
    policy: Policy,
    *,
    observer: AuditObserver | None = None,
    workers: int | None = None,
) -> WheelAudit:
    """Scan the wheel at ``path`` once and run the policy's checks on it."""
    hooks = observer or AuditObserver()
    hooks.wheel_started(str(path))
    if is_program(Path(path)):
        scan = scan_program(path, observer=hooks)
    else:
        scan = scan_wheel(path, observer=hooks, workers=workers)
    return audit_scanned(scan, policy)


def audit_wheels(
    paths: Sequence[str | os.PathLike[str]],
    policy: Policy,
    *,
    observer: AuditObserver | None = None,
    workers: int | None = None,
) -> AuditReport:
    """Audit each wheel in turn; the report groups the checks per wheel."""
    audits: list[WheelAudit] = []
    errors: list[str] = []
    for path in paths:
        try:
            audits.append(audit_wheel(path, policy, observer=observer, workers=workers))
        except CudashipError as e:  # an unreadable wheel: report it, audit the others
            errors.append(str(e.with_path(str(path))))
    return AuditReport(
        wheels=tuple(audits),
        policy_source=policy.source,
        policy_default=policy.is_default,
        errors=tuple(errors),
    )
