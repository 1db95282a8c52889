"""``cudaship audit --format json``: the versioned report (schema in schemas/audit.schema.json,
docs/audit.md).

Top level: ``schema``, ``tool``, ``version``, ``policy``, ``wheels`` (facts and summary per wheel), ``checks``
(every check of every wheel, each naming its wheel), ``summary`` and ``errors`` (one line per input that could
not be audited; the others are in ``wheels``). Bump :data:`SCHEMA_VERSION` when a field
is
removed, renamed or changes meaning; adding one is not a change of version (``imports`` and ``load`` per
wheel were added in 2: every import's static verdict, and what ``audit --load`` saw, null without it).
"""

from __future__ import annotations

import json
from typing import Any

from cudaship import __version__
from cudaship.checks.records import AuditReport, LoadCheck, WheelAudit
from cudaship.records.findings import CheckResult

#: 2: every check has ``severity`` (error|warning|note) and ``rule``; ``summary.failed`` counts failures of
#: severity error only (``warnings`` and ``notes`` count the others); wheels have ``train_source``, and
#: ``train`` may be given by ``--train`` or inferred, not only read from the local tag.
SCHEMA_VERSION = 2


def _check(check: CheckResult, wheel: WheelAudit) -> dict[str, Any]:
    return {
        "wheel": wheel.facts.filename,
        "name": check.name,
        "family": check.family,
        "status": check.status.value,
        "severity": check.severity.value,
        "rule": check.rule,
        "reason": check.reason,
        "evidence": [f.as_dict() for f in check.evidence],
    }


def _wheel(wheel: WheelAudit) -> dict[str, Any]:
    f = wheel.facts
    return {
        "path": wheel.path,
        "filename": f.filename,
        "name": f.name,
        "version": f.version,
        "local": f.local,
        "train": f.train,
        "train_source": f.train_source,
        "platform": f.platform,
        "machine": f.machine,
        "tags": list(f.tags),
        "files": f.files,
        "native_files": f.native_files,
        "uncompressed_size": f.uncompressed_size,
        "notes": list(wheel.notes),
        "summary": wheel.summary.as_dict(),
        "imports": [i.as_dict() for i in wheel.imports],
        "load": _load(wheel.load),
    }


def _load(load: LoadCheck | None) -> dict[str, Any] | None:
    if load is None:
        return None
    return {
        "skipped": load.skipped,
        "environment": load.environment,
        "stub_libcuda": load.stub_libcuda,
        "line": load.line,
        "libraries": load.libraries,
        "libraries_agree": load.libraries_agree,
        "imports": load.imports,
        "imports_agree": load.imports_agree,
        "probes": [{"label": p.label, "ok": p.ok, "message": p.message} for p in load.probes],
        "comparisons": [
            {"file": c.file, "library": c.library, "static": c.static, "loader": c.loader, "agree": c.agree}
            for c in load.comparisons
        ],
        "notes": list(load.notes),
    }


def as_dict(report: AuditReport) -> dict[str, Any]:
    return {
        "schema": SCHEMA_VERSION,
        "tool": "cudaship",
        "version": __version__,
        "policy": {"source": report.policy_source, "default": report.policy_default},
        "wheels": [_wheel(w) for w in report.wheels],
        "checks": [_check(c, w) for w in report.wheels for c in w.checks],
        "summary": report.summary.as_dict(),
        "errors": list(report.errors),
    }


def render(report: AuditReport) -> str:
    return json.dumps(as_dict(report), indent=2, ensure_ascii=False) + "\n"
