"""The one count of a set of :class:`~cudaship.records.findings.CheckResult`: how many passed, failed (by
severity) and were skipped. ``audit`` (per wheel and in all), ``program check`` (checks passed of those
decided) and ``doctor --env`` (findings per severity) each print their own line from it."""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass

from cudaship import words
from cudaship.records.findings import CheckResult, Severity, Status


@dataclass(frozen=True)
class Summary:
    """Counts of a set of checks. ``failed`` counts failures of severity error only (they fail the command);
    ``warnings`` and ``notes`` count failures of those severities. Field order is the JSON's."""

    total: int = 0
    passed: int = 0
    failed: int = 0
    warnings: int = 0
    notes: int = 0
    skipped: int = 0

    @classmethod
    def of(cls, checks: Iterable[CheckResult]) -> Summary:
        counts = {"passed": 0, "failed": 0, "warnings": 0, "notes": 0, "skipped": 0}
        total = 0
        for c in checks:
            total += 1
            if c.status is Status.FAIL:
                counts[_FAILED[c.severity]] += 1
            else:
                counts["passed" if c.status is Status.PASS else "skipped"] += 1
        return cls(total, **counts)

    @property
    def decided(self) -> int:
        """Checks that did not skip (``program check``: a warning or note passes, an error fails)."""
        return self.total - self.skipped

    def line(self) -> str:
        """``55 checks: 50 passed, 1 failed, 4 warnings, 0 skipped`` (warnings and notes only when some)."""
        parts = [f"{self.passed} passed", f"{self.failed} failed"]
        if self.warnings:
            parts.append(words.count(self.warnings, "warning"))
        if self.notes:
            parts.append(words.count(self.notes, "note"))
        parts.append(f"{self.skipped} skipped")
        return f"{words.count(self.total, 'check')}: {', '.join(parts)}"

    def by_severity(self) -> dict[Severity, int]:
        """Failures per severity, in :class:`Severity` order (``doctor --env``: each finding is a failure)."""
        return {Severity.ERROR: self.failed, Severity.WARNING: self.warnings, Severity.NOTE: self.notes}


_FAILED = {Severity.ERROR: "failed", Severity.WARNING: "warnings", Severity.NOTE: "notes"}
