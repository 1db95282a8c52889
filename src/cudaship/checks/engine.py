"""The audit engine: scan each wheel once, run every check family the policy enables, collect every result.

A check never stops the run: an unexpected error inside one family becomes that family's FAIL (naming the
error), and the other families still run. A wheel that cannot be read at all (not a zip, no dist-info) is a
:class:`~cudaship.errors.WheelError`; the CLI reports it and exits 2.
"""

from __future__ import annotations

import os
import threading
from collections.abc import Callable, Sequence
from concurrent.futures import ThreadPoolExecutor

from cudaship.archive.pool import Workers, worker_count
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
from cudaship.checks.records import AuditReport, CheckResult, Finding, WheelAudit, WheelFacts, failed
from cudaship.checks.wheelscan import ScannedWheel, ScanObserver, scan_wheel
from cudaship.errors import CudashipError

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


def audit_scanned(scan: ScannedWheel, policy: Policy) -> WheelAudit:
    """Run the policy's check families over a wheel already scanned."""
    platform, notes = wheel_platform(scan)
    ctx = AuditContext(scan=scan, policy=policy, platform=platform, notes=notes)
    results: list[CheckResult] = []
    for family, fn in CHECKS.items():
        if not policy.runs(family):
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
        name=meta.name,
        version=meta.version,
        local=meta.local,
        train=train.version if train is not None else None,
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
    pool: Workers | None = None,
) -> WheelAudit:
    """Scan the wheel at ``path`` once and run the policy's checks on it (members read on ``pool`` when
    given, else on ``workers`` threads)."""
    hooks = observer or AuditObserver()
    hooks.wheel_started(str(path))
    scan = scan_wheel(path, observer=hooks, workers=workers, pool=pool)
    return audit_scanned(scan, policy)


def audit_wheels(
    paths: Sequence[str | os.PathLike[str]],
    policy: Policy,
    *,
    observer: AuditObserver | None = None,
    workers: int | None = None,
) -> AuditReport:
    """Audit each wheel; the report groups the checks per wheel, in the order of ``paths``.

    ``workers`` threads (default: the usable CPUs, at most 4) read members; with several wheels, up to
    that many wheels are read at once and their members share the workers and one memory budget."""
    hooks = observer or AuditObserver()
    count = worker_count(workers)
    outcomes: list[WheelAudit | str]
    if len(paths) <= 1 or count == 1:
        outcomes = [_audit_one(path, policy, hooks, workers=count) for path in paths]
    else:
        with Workers(count) as pool:
            sizes = [_size(path) for path in paths]
            hooks.wheels_planned(len(paths), sum(sizes))
            lock = pool.hooks_lock

            def one(path: str | os.PathLike[str], size: int) -> WheelAudit | str:
                mine = _OneOfMany(hooks, lock, size)
                with lock:
                    hooks.wheel_started(str(path))
                try:
                    return _audit_one(path, policy, mine, pool=pool, started=True)
                finally:
                    mine.finish()
                    with lock:
                        hooks.wheel_finished(str(path))

            with ThreadPoolExecutor(min(count, len(paths)), thread_name_prefix="cudaship-wheel") as wheels:
                futures = [wheels.submit(one, path, size) for path, size in zip(paths, sizes, strict=True)]
                outcomes = [future.result() for future in futures]
    audits = [o for o in outcomes if isinstance(o, WheelAudit)]
    errors = [o for o in outcomes if isinstance(o, str)]
    return AuditReport(
        wheels=tuple(audits),
        policy_source=policy.source,
        policy_default=policy.is_default,
        errors=tuple(errors),
    )


def _audit_one(
    path: str | os.PathLike[str],
    policy: Policy,
    hooks: AuditObserver,
    *,
    workers: int | None = None,
    pool: Workers | None = None,
    started: bool = False,
) -> WheelAudit | str:
    """The wheel's audit, or the one-line error of a wheel that cannot be read (the others still are)."""
    try:
        if started:
            scan = scan_wheel(path, observer=hooks, workers=workers, pool=pool)
            return audit_scanned(scan, policy)
        return audit_wheel(path, policy, observer=hooks, workers=workers, pool=pool)
    except CudashipError as e:
        return str(e.with_path(str(path)))


def _size(path: str | os.PathLike[str]) -> int:
    try:
        return os.stat(path).st_size
    except OSError:
        return 0
