"""Records of an audit: one :class:`CheckResult` per named check, grouped per wheel in an
:class:`AuditReport`.

Checks return these frozen dataclasses and never print; renderers in :mod:`cudaship.render` turn them into
text, JSON, JUnit XML or markdown.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from enum import Enum


class Status(str, Enum):
    PASS = "pass"
    FAIL = "fail"
    SKIP = "skip"


@dataclass(frozen=True)
class Finding:
    """One piece of evidence: what is wrong (or, for informative checks, what was seen) and where."""

    message: str
    file: str | None = None  #: path inside the wheel
    symbol: str | None = None  #: a symbol or an imported library name
    arch: str | None = None  #: ``sm_90``, ``compute_120``
    requirement: str | None = None  #: a Requires-Dist entry or an expected requirement

    def as_dict(self) -> dict[str, str]:
        out = {"message": self.message}
        for key in ("file", "symbol", "arch", "requirement"):
            value = getattr(self, key)
            if value is not None:
                out[key] = value
        return out


@dataclass(frozen=True)
class CheckResult:
    """A named check: ``family`` is the check family (``ships``, ``archs``, ...), ``name`` is unique per
    wheel."""

    name: str
    family: str
    status: Status
    reason: str  #: one line
    evidence: tuple[Finding, ...] = ()

    @property
    def failed(self) -> bool:
        return self.status is Status.FAIL


def passed(family: str, name: str, reason: str, evidence: tuple[Finding, ...] = ()) -> CheckResult:
    return CheckResult(name, family, Status.PASS, reason, evidence)


def failed(family: str, name: str, reason: str, evidence: tuple[Finding, ...] | list[Finding]) -> CheckResult:
    return CheckResult(name, family, Status.FAIL, reason, tuple(evidence))


def skipped(family: str, name: str, reason: str) -> CheckResult:
    return CheckResult(name, family, Status.SKIP, reason)


def verdict(
    family: str, name: str, findings: list[Finding], ok_reason: str, fail_reason: str | None = None
) -> CheckResult:
    """PASS with ``ok_reason`` when ``findings`` is empty, else FAIL with ``fail_reason`` (default: the
    first)."""
    if not findings:
        return passed(family, name, ok_reason)
    reason = fail_reason or findings[0].message
    if fail_reason is None and len(findings) > 1:
        reason = f"{reason} (and {len(findings) - 1} more)"
    return failed(family, name, reason, findings)


@dataclass(frozen=True)
class Summary:
    total: int
    passed: int
    failed: int
    skipped: int

    @classmethod
    def of(cls, checks: tuple[CheckResult, ...] | list[CheckResult]) -> Summary:
        p = sum(1 for c in checks if c.status is Status.PASS)
        f = sum(1 for c in checks if c.status is Status.FAIL)
        s = sum(1 for c in checks if c.status is Status.SKIP)
        return cls(len(checks), p, f, s)

    def line(self) -> str:
        noun = "check" if self.total == 1 else "checks"
        return f"{self.total} {noun}: {self.passed} passed, {self.failed} failed, {self.skipped} skipped"

    def as_dict(self) -> dict[str, int]:
        return {"total": self.total, "passed": self.passed, "failed": self.failed, "skipped": self.skipped}


@dataclass(frozen=True)
class WheelFacts:
    """What the audit read about the wheel itself, shown at the top of each wheel's report."""

    filename: str
    name: str | None = None
    version: str | None = None
    local: str | None = None
    train: str | None = None  #: ``13.2`` from ``+cu132``
    platform: str | None = None  #: ``linux``, ``windows``, ``macos`` or ``any``
    machine: str | None = None  #: ``x86_64``, ``aarch64`` or None for pure wheels
    tags: tuple[str, ...] = ()
    files: int = 0
    native_files: int = 0
    uncompressed_size: int = 0


@dataclass(frozen=True)
class WheelAudit:
    """Every check run on one wheel."""

    path: str
    facts: WheelFacts
    checks: tuple[CheckResult, ...]
    notes: tuple[str, ...] = ()
    #: members the archive could not give back (corrupt data, bad CRC, unsupported method), with the
    #: reason: the wheel is damaged and those members went unchecked, so the audit exits 2 (bad input)
    unreadable: tuple[tuple[str, str], ...] = ()

    @property
    def summary(self) -> Summary:
        return Summary.of(self.checks)


@dataclass(frozen=True)
class AuditReport:
    """The whole audit: one entry per wheel, in the order given."""

    wheels: tuple[WheelAudit, ...]
    policy_source: str | None  #: file the policy came from; None for the built-in default
    policy_default: bool = False
    notes: tuple[str, ...] = field(default=())
    #: one line per wheel that could not be read at all (not a zip, no dist-info): not in ``wheels``
    errors: tuple[str, ...] = field(default=())

    @property
    def checks(self) -> tuple[CheckResult, ...]:
        return tuple(c for w in self.wheels for c in w.checks)

    @property
    def summary(self) -> Summary:
        return Summary.of(self.checks)

    @property
    def ok(self) -> bool:
        return self.summary.failed == 0

    @property
    def damaged(self) -> tuple[str, ...]:
        """One ``wheel!member: cannot be read: reason`` line per member a wheel could not give back."""
        return tuple(
            f"{w.path}!{member}: cannot be read: {reason}"
            for w in self.wheels
            for member, reason in w.unreadable
        )
