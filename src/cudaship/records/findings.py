"""The one finding model: what ``audit``, ``program check`` and ``doctor --env`` decide, renderers print.

* :class:`Status`: how a check ended. ``skip`` is its own status: a check that checked nothing (no train to
  compare with, a CPU program, another OS's wheel) never reads as a pass.
* :class:`Severity`: how much a failure matters (``error`` fails the command; ``warning`` and ``note`` are
  reported and do not).
* :class:`Finding`: one piece of evidence, a message and its subject (the file, symbol, arch, requirement,
  distribution, library ... it is about).
* :class:`CheckResult`: one named check of one mechanism (``family``: an audit check family, ``program``,
  ``environment``, ``confirm``), with its rule inside the family, status, severity, one-line reason and
  evidence.

``doctor --env`` judges each finding on its own (one rule, its own severity): :func:`judged` makes that a
failed :class:`CheckResult` whose one piece of evidence (:attr:`CheckResult.subject`) names what it is about.
The per-GPU answer of ``gpus`` and ``doctor`` (:class:`cudaship.knowledge.runs_on.Verdict`: native, JIT or
no, per capability) is a different record; its :attr:`~cudaship.knowledge.runs_on.Verdict.status` speaks this
vocabulary.
"""

from __future__ import annotations

from dataclasses import dataclass
from enum import Enum


class Status(str, Enum):
    PASS = "pass"
    FAIL = "fail"
    SKIP = "skip"  #: checked nothing (not decidable with what was given): never a pass


class Severity(str, Enum):
    """How much a failure matters. In ``audit`` the policy sets it (``[audit.severity]``): only a failed check
    of severity ``error`` fails the audit (exit 1); ``warning`` and ``note`` are reported and do not.
    ``program check`` reports a failure of severity ``warning`` as ``warn``: it passes, but a person should
    know."""

    ERROR = "error"
    WARNING = "warning"
    NOTE = "note"


SEVERITIES: tuple[str, ...] = tuple(s.value for s in Severity)


@dataclass(frozen=True)
class Finding:
    """One piece of evidence: what is wrong (or, for informative checks, what was seen) and where."""

    message: str
    file: str | None = None  #: path inside the wheel; the importing (or concerned) file of an environment
    symbol: str | None = None  #: a symbol or an imported library name
    arch: str | None = None  #: ``sm_90``, ``compute_120``
    requirement: str | None = None  #: a Requires-Dist entry or an expected requirement
    distribution: str | None = (
        None  #: the distribution owning :attr:`file`: ``nvidia-cusparse-cu12 12.5.8.93``
    )
    library: str | None = None  #: an import as written
    target: str | None = None  #: the file the loader picks for :attr:`library`
    target_distribution: str | None = None  #: the distribution owning :attr:`target`
    version: str | None = None
    source: str | None = None  #: where a knowledge rule comes from

    def as_dict(self) -> dict[str, str]:
        """The message and the audit's subject fields that are set (the audit report's evidence)."""
        out = {"message": self.message}
        for key in ("file", "symbol", "arch", "requirement"):
            value = getattr(self, key)
            if value is not None:
                out[key] = value
        return out


@dataclass(frozen=True)
class CheckResult:
    """A named check: ``family`` is the mechanism that decided it (an audit check family such as ``ships`` or
    ``archs``; ``program``; ``environment``; ``confirm``), ``name`` is unique per subject (wheel, program).
    ``rule`` names the kind of check inside its family when the family has several
    (``closure.unused_imports``: ``rule="unused_imports"``), so a policy can set its severity; in ``audit``
    ``severity`` is set by the engine from the policy (checks leave the default)."""

    name: str
    family: str
    status: Status
    reason: str  #: one line
    evidence: tuple[Finding, ...] = ()
    rule: str | None = None
    severity: Severity = Severity.ERROR

    @property
    def failed(self) -> bool:
        """Failed, whatever its severity (see :attr:`is_error`)."""
        return self.status is Status.FAIL

    @property
    def is_error(self) -> bool:
        """Failed with severity ``error``: fails the command."""
        return self.status is Status.FAIL and self.severity is Severity.ERROR

    @property
    def key(self) -> str:
        """``family`` or ``family.rule``: what ``[audit.severity]`` keys name."""
        return f"{self.family}.{self.rule}" if self.rule else self.family

    @property
    def subject(self) -> Finding:
        """The first piece of evidence (what a finding judged on its own is about); the bare reason when
        there is none."""
        return self.evidence[0] if self.evidence else Finding(self.reason)


def passed(
    family: str, name: str, reason: str, evidence: tuple[Finding, ...] = (), *, rule: str | None = None
) -> CheckResult:
    return CheckResult(name, family, Status.PASS, reason, evidence, rule)


def failed(
    family: str,
    name: str,
    reason: str,
    evidence: tuple[Finding, ...] | list[Finding] = (),
    *,
    rule: str | None = None,
    severity: Severity = Severity.ERROR,
) -> CheckResult:
    return CheckResult(name, family, Status.FAIL, reason, tuple(evidence), rule, severity)


def skipped(family: str, name: str, reason: str, *, rule: str | None = None) -> CheckResult:
    return CheckResult(name, family, Status.SKIP, reason, (), rule)


def verdict(
    family: str,
    name: str,
    findings: list[Finding],
    ok_reason: str,
    fail_reason: str | None = None,
    *,
    rule: str | None = None,
) -> CheckResult:
    """PASS with ``ok_reason`` when ``findings`` is empty, else FAIL with ``fail_reason`` (default: the
    first)."""
    if not findings:
        return passed(family, name, ok_reason, rule=rule)
    reason = fail_reason or findings[0].message
    if fail_reason is None and len(findings) > 1:
        reason = f"{reason} (and {len(findings) - 1} more)"
    return failed(family, name, reason, findings, rule=rule)


def judged(family: str, rule: str, severity: Severity, message: str, **subject: str | None) -> CheckResult:
    """A finding judged on its own (``doctor --env``): rule ``rule`` of ``family`` failed with ``severity``;
    ``subject`` names what it is about (:class:`Finding`'s fields)."""
    return failed(family, rule, message, (Finding(message, **subject),), rule=rule, severity=severity)
