"""``cudaship audit --format json``: the versioned report (schema in schemas/audit.schema.json,
docs/audit.md).

Top level: ``schema``, ``tool``, ``version``, ``policy``, ``wheels`` (facts and summary per wheel), ``checks``
(every check of every wheel, each naming its wheel), ``summary`` and ``errors`` (one line per input that could
not be audited; the others are in ``wheels``) and ``resolution`` (what the requirements were resolved
against and to: index, date, constraints, every project's version; ``audit --replay`` reads it back).
Bump :data:`SCHEMA_VERSION` when a field is removed, renamed or changes meaning; adding one is not a change
of version (``imports`` and ``load`` per wheel were added in 2: every import's static verdict, and what
``audit --load`` saw, null without it; ``resolution`` was added in 2 as well).
"""

from __future__ import annotations

from cudaship import __version__
from cudaship.checks.records import AuditReport, WheelAudit
from cudaship.records.findings import CheckResult
from cudaship.render.jsonify import JSON, dumps, fields, pick, to_json
from cudaship.render.style import Style

#: 2: every check has ``severity`` (error|warning|note) and ``rule``; ``summary.failed`` counts failures of
#: severity error only (``warnings`` and ``notes`` count the others); wheels have ``train_source``, and
#: ``train`` may be given by ``--train`` or inferred, not only read from the local tag.
SCHEMA_VERSION = 2


def _check(check: CheckResult, wheel: WheelAudit) -> dict[str, JSON]:
    return {
        "wheel": wheel.facts.filename,
        **pick(check, "name", "family", "status", "severity", "rule", "reason"),
        "evidence": to_json([f.as_dict() for f in check.evidence]),  # the subject fields that are set
    }


def _wheel(wheel: WheelAudit) -> dict[str, JSON]:
    return {
        "path": wheel.path,
        **fields(wheel.facts),
        **pick(wheel, "notes", "summary", "imports"),
        "load": None if wheel.load is None else pick(wheel.load, *_LOAD),
    }


#: ``audit --load``'s record in the report: its fields, with its one-line verdict after where it ran
_LOAD = (
    "skipped",
    "environment",
    "stub_libcuda",
    "line",
    "libraries",
    "libraries_agree",
    "imports",
    "imports_agree",
    "probes",
    "comparisons",
    "notes",
)


def as_dict(report: AuditReport) -> dict[str, JSON]:
    return {
        "schema": SCHEMA_VERSION,
        "tool": "cudaship",
        "version": __version__,
        "policy": {"source": report.policy_source, "default": report.policy_default},
        "wheels": [_wheel(w) for w in report.wheels],
        "checks": [_check(c, w) for w in report.wheels for c in w.checks],
        **pick(report, "summary", "errors", "resolution"),
    }


def render(report: AuditReport, style: Style) -> str:
    return dumps(as_dict(report), ascii=False)
