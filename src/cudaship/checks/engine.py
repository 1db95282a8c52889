"""The audit engine: scan each wheel once, run every check family the policy enables, collect every result.

A check never stops the run: an unexpected error inside one family becomes that family's FAIL (naming the
error), and the other families still run. A wheel that cannot be read at all (not a zip, no dist-info) is a
:class:`~cudaship.errors.WheelError`; the CLI reports it and exits 2.
"""

from __future__ import annotations

import dataclasses
import datetime as dt
import os
import threading
from collections.abc import Sequence
from concurrent.futures import ThreadPoolExecutor

from cudaship.checks.closure import copy_groups
from cudaship.checks.context import AuditContext
from cudaship.checks.cuda_content import cuda_evidence
from cudaship.checks.policy import Policy
from cudaship.checks.providers import RequirementsAhead
from cudaship.checks.records import AuditReport, Resolution, WheelAudit, WheelFacts, canonical
from cudaship.checks.table import FAMILIES, rule_of
from cudaship.checks.variants import mark_alternatives
from cudaship.errors import CudashipError
from cudaship.inspection.scan import ScannedWheel, ScanObserver, Workers, scan, worker_count
from cudaship.knowledge.trains import Train
from cudaship.providers.constraints import format_date, resolved_projects
from cudaship.providers.options import ProviderOptions
from cudaship.providers.records import Closure
from cudaship.records.files import ContainerKind
from cudaship.records.findings import CheckResult, Finding, Severity, failed
from cudaship.records.platform import TargetPlatform
from cudaship.safe_read import file_size
from cudaship.waits import wait_interruptibly
from cudaship.wheel.records import DistInfo

#: the rule of a family's own failure to run (an unreadable input it needed, a bug): always an error
RUN_ERROR_RULE = "error"

#: Check families that read a wheel's dist-info (RECORD, Requires-Dist, variant.json): not run on a program.
WHEEL_ONLY: tuple[str, ...] = ("record", "requirements", "variant")


class AuditObserver(ScanObserver):
    """Progress hooks for the CLI (all do nothing by default).

    With one wheel, ``planned`` and ``advanced`` count that wheel's compressed member bytes. With several,
    :meth:`wheels_planned` is called once with the wheels' file sizes, ``planned`` is not called, and
    ``advanced`` adds up to that total as the wheels (read at the same time) progress. Hooks are never
    called concurrently."""

    def wheels_planned(self, count: int, total_bytes: int) -> None:
        """Several wheels will be audited: ``count`` of them, ``total_bytes`` in all."""

    def wheel_started(self, path: str) -> None:
        """A wheel is about to be read."""

    def wheel_finished(self, path: str) -> None:
        """A wheel is read and checked (or could not be read)."""


class _OneOfMany(AuditObserver):
    """One wheel's hooks when several are audited at once: forwards progress to the shared observer, and
    at the end the bytes of the wheel file that no member accounted for, so the total comes out exact."""

    def __init__(self, inner: AuditObserver, lock: threading.Lock, size: int) -> None:
        self.inner = inner
        self.lock = lock
        self.size = size
        self.done = 0

    def advanced(self, nbytes: int) -> None:
        # called with the pool's hooks lock held
        self.done += nbytes
        self.inner.advanced(nbytes)

    def finish(self) -> None:
        with self.lock:
            self.inner.advanced(max(self.size - self.done, 0))


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
    ahead: RequirementsAhead | None = None,
) -> WheelAudit:
    """Run the policy's check families over a wheel already scanned; ``providers`` says where declared
    requirements are looked up (default: the knowledge table only); ``train`` overrides the wheel's CUDA
    train (``--train``); ``ahead``: the requirements' resolution started during the scan, if any."""
    platform, notes = scan.platform, list(scan.platform_notes)
    program = scan.kind is not ContainerKind.WHEEL
    if program:
        notes = [*notes, *_program_notes(scan, policy)]
    ctx = AuditContext(
        scan=scan,
        policy=policy,
        platform=platform,
        notes=notes,
        provider_options=providers or ProviderOptions(),
        train_override=train,
        requirements_ahead=ahead,
    )
    results: list[CheckResult] = []
    for family in FAMILIES:
        if not policy.runs(family.name) or (program and family.name in WHEEL_ONLY):
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
    closure = _closure(ctx)
    meta = scan.dist.metadata
    facts = WheelFacts(
        filename=scan.filename,
        name=None if program else meta.name,
        version=None if program else meta.version,
        local=meta.local,
        train=train_found.version if train_found is not None else None,
        train_source=ctx.train_source,
        platform=platform.os,
        machine=platform.machine,
        tags=scan.dist.wheel.tags,
        files=len(scan.members),
        native_files=len(scan.reports),
        uncompressed_size=scan.uncompressed_size,
        cuda_code=cuda_evidence(ctx) is not None,
    )
    return canonical(
        WheelAudit(
            path=scan.path,
            facts=facts,
            checks=tuple(results),
            notes=tuple(ctx.notes),
            unreadable=tuple(scan.unreadable),
            imports=tuple(ctx.static_imports),
            copies=() if program else copy_groups(ctx),
            host_packages=tuple(sorted(ctx.host_packages)),
            resolved=closure.pins() if closure is not None else (),
            undated=closure.undated if closure is not None else (),
        )
    )


def _closure(ctx: AuditContext) -> Closure | None:
    """The closure of the requirements, when a check resolved it (it is computed on first use only)."""
    providers = ctx.__dict__.get("providers")  # a cached property: absent when no check needed it
    return providers.closure if providers is not None else None


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
    pool: Workers | None = None,
    providers: ProviderOptions | None = None,
    train: Train | None = None,
) -> WheelAudit:
    """Scan the wheel at ``path`` once and run the policy's checks on it (members read on ``pool`` when
    given, else on ``workers`` threads)."""
    hooks = observer or AuditObserver()
    hooks.wheel_started(str(path))
    return _scan_and_check(path, policy, hooks, workers, pool, providers, train)


def _scan_and_check(
    path: str | os.PathLike[str],
    policy: Policy,
    hooks: AuditObserver,
    workers: int | None,
    pool: Workers | None,
    providers: ProviderOptions | None,
    train: Train | None,
) -> WheelAudit:
    """Scan, then check. The requirements' resolution starts as soon as the dist-info is read, on a thread
    of its own, when the closure checks will need it (they always do for a wheel with requirements)."""
    ahead = RequirementsAhead(providers or ProviderOptions()) if policy.runs("closure") else None

    def on_dist(dist: DistInfo, platform: TargetPlatform) -> None:
        if ahead is not None:
            ahead.start(dist, platform)  # the platform audit_scanned will use

    scanned = scan(path, observer=hooks, workers=workers, pool=pool, on_dist=on_dist)
    return audit_scanned(scanned, policy, providers, train=train, ahead=ahead)


def audit_wheels(
    paths: Sequence[str | os.PathLike[str]],
    policy: Policy,
    *,
    observer: AuditObserver | None = None,
    workers: int | None = None,
    providers: ProviderOptions | None = None,
    train: Train | None = None,
) -> AuditReport:
    """Audit each wheel; the report groups the checks per wheel, in the order of ``paths``. ``train``
    (``--train``) overrides every wheel's CUDA train; ``providers`` says where requirements are looked up.

    ``workers`` threads (default: the usable CPUs, at most 4) read members; with several wheels, up to
    that many wheels are read at once and their members share the workers and one memory budget."""
    hooks = observer or AuditObserver()
    count = worker_count(workers)
    begun = dt.datetime.now(dt.timezone.utc)
    outcomes: list[WheelAudit | str]
    if count == 1:
        outcomes = [
            _audit_one(path, policy, hooks, workers=count, providers=providers, train=train) for path in paths
        ]
    elif len(paths) <= 1:
        with Workers(count) as pool:
            # the processes start while the directory is read
            pool.prestart_for([file_size(path) for path in paths])
            outcomes = [
                _audit_one(path, policy, hooks, pool=pool, providers=providers, train=train) for path in paths
            ]
    else:
        with Workers(count) as pool:
            sizes = [file_size(path) for path in paths]
            pool.prestart_for(sizes)
            hooks.wheels_planned(len(paths), sum(sizes))
            lock = pool.hooks_lock

            def one(path: str | os.PathLike[str], size: int) -> WheelAudit | str:
                mine = _OneOfMany(hooks, lock, size)
                with lock:
                    hooks.wheel_started(str(path))
                try:
                    return _audit_one(
                        path, policy, mine, pool=pool, started=True, providers=providers, train=train
                    )
                finally:
                    mine.finish()
                    with lock:
                        hooks.wheel_finished(str(path))

            wheels = ThreadPoolExecutor(min(count, len(paths)), thread_name_prefix="cudaship-wheel")
            try:
                futures = [wheels.submit(one, path, size) for path, size in zip(paths, sizes, strict=True)]
                outcomes = [wait_interruptibly(future) for future in futures]  # Ctrl-C at once
            except KeyboardInterrupt:  # Ctrl-C: the wheels not started are dropped, the workers end (pool)
                wheels.shutdown(wait=False, cancel_futures=True)
                raise
            wheels.shutdown(wait=True)
    audits = [o for o in outcomes if isinstance(o, WheelAudit)]
    errors = [o for o in outcomes if isinstance(o, str)]
    return AuditReport(
        wheels=tuple(audits),
        policy_source=policy.source,
        policy_default=policy.is_default,
        errors=tuple(errors),
        resolution=None if providers is None else resolution_of(audits, providers, begun),
    )


def resolution_of(wheels: Sequence[WheelAudit], providers: ProviderOptions, begun: dt.datetime) -> Resolution:
    """What the wheels' requirements were resolved against and to (the report's ``resolution``): the index,
    the date (a replay's own, else when the audit began), the constraints, every project's version."""
    return Resolution(
        indexes=(providers.index_url,) if providers.index_url else (),
        resolved_at=providers.resolved_at or format_date(begun),
        exclude_newer=format_date(providers.exclude_newer) if providers.exclude_newer else None,
        constraints=providers.constraints.origins,
        offline=providers.offline,
        projects=resolved_projects(p for w in wheels for p in w.resolved),
        undated=tuple(sorted({name for w in wheels for name in w.undated})),
    )


def _audit_one(
    path: str | os.PathLike[str],
    policy: Policy,
    hooks: AuditObserver,
    *,
    workers: int | None = None,
    pool: Workers | None = None,
    started: bool = False,
    providers: ProviderOptions | None = None,
    train: Train | None = None,
) -> WheelAudit | str:
    """The wheel's audit, or the one-line error of a wheel that cannot be read (the others still are)."""
    try:
        if started:
            return _scan_and_check(path, policy, hooks, workers, pool, providers, train)
        return audit_wheel(
            path, policy, observer=hooks, workers=workers, pool=pool, providers=providers, train=train
        )
    except CudashipError as e:
        return str(e.with_path(str(path)))
