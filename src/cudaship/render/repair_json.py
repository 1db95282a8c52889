"""``cudaship repair --format json``: the plan and the sizes of every wheel."""

from __future__ import annotations

import json
from dataclasses import asdict
from typing import Any

from cudaship.repair.records import RepairReport, WheelRepair

SCHEMA_VERSION = 1


def _wheel(w: WheelRepair) -> dict[str, Any]:
    doc: dict[str, Any] = {"path": w.path, "error": w.error}
    if w.plan is not None:
        plan = asdict(w.plan)
        plan["changed"] = w.plan.changed
        plan["bytes_removed"] = w.plan.bytes_removed
        doc["plan"] = plan
        doc["size"] = {
            "before": w.size_before,
            "after": w.size_after,
            "uncompressed_before": w.uncompressed_before,
            "uncompressed_after": w.uncompressed_after,
        }
        doc["output"] = w.output
        doc["unchanged_copy"] = w.unchanged_copy
    return doc


def render(report: RepairReport) -> str:
    doc = {
        "schema": SCHEMA_VERSION,
        "dry_run": report.dry_run,
        "directory": report.directory,
        "wheels": [_wheel(w) for w in report.wheels],
    }
    return json.dumps(doc, indent=2)
