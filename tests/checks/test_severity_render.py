"""Severities in every audit format: a warning or note is shown as such, counted apart, and never fails the
audit (exit 0; JUnit: not a failure)."""

from __future__ import annotations

import json
import xml.etree.ElementTree as ET

from cudaship.checks.records import AuditReport, WheelAudit, WheelFacts
from cudaship.records.findings import CheckResult, Finding, Severity, Status
from cudaship.render import audit_json, audit_junit, audit_markdown, audit_text
from cudaship.render.jsonify import to_json
from cudaship.render.style import Style


def _report(error: bool) -> AuditReport:
    checks = [
        CheckResult(
            "archs: loadable PTX in a.so",
            "archs",
            Status.FAIL,
            "PTX only relocatable",
            (Finding("x", file="a.so"),),
            "relocatable_ptx",
            Severity.WARNING,
        ),
        CheckResult(
            "closure: b.so",
            "closure",
            Status.FAIL,
            "variant for another environment",
            (),
            "variant",
            Severity.NOTE,
        ),
        CheckResult("record: hashes and sizes", "record", Status.PASS, "ok"),
    ]
    if error:
        checks.append(
            CheckResult(
                "closure: c.so", "closure", Status.FAIL, "libx.so does not resolve", (Finding("libx.so"),)
            )
        )
    facts = WheelFacts(
        "p-1.0-py3-none-any.whl",
        "p",
        "1.0",
        train="13.0",
        train_source="inferred from the requirement cuda-toolkit==13.0.3",
    )
    return AuditReport((WheelAudit("p.whl", facts, tuple(checks)),), None, True)


def test_summary_counts_and_ok() -> None:
    report = _report(error=False)
    assert report.ok
    assert to_json(report.summary) == {
        "total": 3,
        "passed": 1,
        "failed": 0,
        "warnings": 1,
        "notes": 1,
        "skipped": 0,
    }
    assert report.summary.line() == "3 checks: 1 passed, 0 failed, 1 warning, 1 note, 0 skipped"
    assert not _report(error=True).ok


def test_text() -> None:
    text = audit_text.render(_report(error=False), Style())
    assert "  WARN  archs: loadable PTX in a.so" in text
    assert "  NOTE  closure: b.so" in text
    assert "train: inferred from the requirement cuda-toolkit==13.0.3" in text
    annotations = audit_text.github_annotations(_report(error=True))
    assert annotations.startswith("::warning title=")
    assert "::notice title=" in annotations and "::error title=" in annotations


def test_json() -> None:
    doc = json.loads(audit_json.render(_report(error=True), Style()))
    assert doc["schema"] == 2
    severities = {c["name"]: (c["status"], c["severity"], c["rule"]) for c in doc["checks"]}
    assert severities["archs: loadable PTX in a.so"] == ("fail", "warning", "relocatable_ptx")
    assert severities["closure: c.so"] == ("fail", "error", None)
    assert doc["summary"]["failed"] == 1 and doc["summary"]["warnings"] == 1
    assert doc["wheels"][0]["train_source"].startswith("inferred")


def test_junit_warnings_are_not_failures() -> None:
    root = ET.fromstring(audit_junit.render(_report(error=False), Style()))
    assert root.get("failures") == "0"
    assert not root.findall(".//failure")
    case = root.find(".//testcase[@name='archs: loadable PTX in a.so']")
    assert case is not None
    out = case.find("system-out")
    assert out is not None and (out.text or "").startswith("warning: PTX only relocatable")
    prop = case.find("properties/property[@name='severity']")
    assert prop is not None and prop.get("value") == "warning"
    root = ET.fromstring(audit_junit.render(_report(error=True), Style()))
    assert root.get("failures") == "1"
    assert [c.get("name") for c in root.findall(".//testcase") if c.find("failure") is not None] == [
        "closure: c.so"
    ]


def test_markdown() -> None:
    md = audit_markdown.render(_report(error=False), Style())
    assert "| ⚠️ warning | archs: loadable PTX in a.so |" in md
    assert "| 📝 note | closure: b.so |" in md
    assert md.splitlines()[2].startswith("⚠️ **3 checks: 1 passed, 0 failed, 1 warning, 1 note")
