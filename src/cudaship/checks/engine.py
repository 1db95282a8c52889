"""The audit engine: scan each wheel once, run every check family the policy enables, collect every result.

A check never stops the run: an unexpected error inside one family becomes that family's FAIL (naming the
error), and the other families still run. A wheel that cannot be read at all (not a zip, no dist-info) is a
:class:`~cudaship.errors.WheelError`; the CLI reports it and exits 2.
"""

from __future__ import annotations

import dataclasses
import os
from collections.abc import Sequence

from cudaship.checks.context import AuditContext, wheel_platform
from cudaship.checks.policy import Policy
from cudaship.checks.records import (
    AuditReport,
    CheckResult,
    Finding,
    Severity,
    WheelAudit,
    WheelFacts,
    failed,
)
from cudaship.checks.table import FAMILIES, rule_of
from cudaship.checks.variants import mark_alternatives
from cudaship.checks.wheelscan import ScannedWheel, ScanObserver, scan_wheel
from cudaship.errors import CudashipError
from cudaship.knowledge.trains import Train
from cudaship.providers.options import ProviderOptions

#: the rule of a family's own failure to run (an unreadable input it needed, a bug): always an error
RUN_ERROR_RULE = "error"


class AuditObserver(ScanObserver):
    """Progress hooks for the CLI (all do nothing by default)."""

    def wheel_started(self, path: str) -> None:
        """A wheel is about to be read."""


def with_severity(result: CheckResult, policy: Policy) -> CheckResult:
    """``result`` with its rule named and its severity set by the policy (a family's failure to run stays an
    error whatever the policy says)."""
    if result.rule == RUN_ERROR_RULE:
        return dataclasses.replace(result, severity=Severity.ERROR)
    rule = rule_of(result)
    return dataclasses.replace(result, rule=rule, severity=policy.severity(result.family, rule))


def audit_scanned(
    scan: ScannedWheel,
    policy: Policy,
    providers: ProviderOptions | None = None,
    *,
    train: Train | None = None,
) -> WheelAudit:
    """Run the policy's check families over a wheel already scanned; ``providers`` says where declared
    requirements are looked up (default: the knowledge table only); ``train`` overrides the wheel's CUDA
    train (``--train``)."""
    platform, notes = wheel_platform(scan)
    ctx = AuditContext(
        scan=scan,
        policy=policy,
        platform=platform,
        notes=notes,
        provider_options=providers or ProviderOptions(),
        train_override=train,
    )
    results: list[CheckResult] = []
    for family in FAMILIES:
        if not policy.runs(family.name):
            continue
        name = family.name
        try:
            results.extend(family.run(ctx))
        except CudashipError as e:
            results.append(
                failed(name, f"{name}: error", e.message, [Finding(e.message)], rule=RUN_ERROR_RULE)
            )
        except Exception as e:  # a bug in one check must not hide the others
            message = f"internal error in the {name} checks: {type(e).__name__}: {e}"
            results.append(failed(name, f"{name}: error", message, [Finding(message)], rule=RUN_ERROR_RULE))
    results = [with_severity(r, policy) for r in mark_alternatives(ctx, results)]
    train_found = ctx.train
    meta = scan.dist.metadata
    facts = WheelFacts(
        filename=scan.filename,
        name=meta.name,
        version=meta.version,
        local=meta.local,
        train=train_found.version if train_found is not None else None,
        train_source=ctx.train_source,
        platform=platform.os,
        machine=platform.machine,
        tags=scan.dist.wheel.tags,
        files=len(scan.members),
        native_files=len(scan.reports),
        uncompressed_size=scan.uncompressed_size,
    )
    return WheelAudit(path=scan.path, facts=facts, checks=tuple(results), notes=tuple(ctx.notes))


def audit_wheel(
    path: str | os.PathLike[str],
    policy: Policy,
    *,
    observer: AuditObserver | None = None,
    workers: int | None = None,
    providers: ProviderOptions | None = None,
    train: Train | None = None,
) -> WheelAudit:
    """Scan the wheel at ``path`` once and run the policy's checks on it."""
    hooks = observer or AuditObserver()
    hooks.wheel_started(str(path))
    scan = scan_wheel(path, observer=hooks, workers=workers)
    return audit_scanned(scan, policy, providers, train=train)


def audit_wheels(
    paths: Sequence[str | os.PathLike[str]],
    policy: Policy,
    *,
    observer: AuditObserver | None = None,
    workers: int | None = None,
    providers: ProviderOptions | None = None,
    train: Train | None = None,
) -> AuditReport:
    """Audit each wheel in turn; the report groups the checks per wheel. ``train`` (``--train``) overrides
    every wheel's CUDA train."""
    audits: list[WheelAudit] = []
    errors: list[str] = []
    for path in paths:
        try:
            audits.append(
                audit_wheel(
                    path, policy, observer=observer, workers=workers, providers=providers, train=train
                )
            )
        except CudashipError as e:  # an unreadable wheel: report it, audit the others
            errors.append(str(e.with_path(str(path))))
    return AuditReport(
        wheels=tuple(audits),
        policy_source=policy.source,
        policy_default=policy.is_default,
        errors=tuple(errors),
    )
