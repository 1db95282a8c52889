"""``cudaship audit --format junit``: JUnit XML with one testcase per check (one testsuite per wheel), so CI
dashboards list every check; failures carry the reason as message and the evidence as text."""

from __future__ import annotations

import xml.etree.ElementTree as ET

from cudaship.checks.records import AuditReport, Status
from cudaship.render.audit_text import finding_text


def render(report: AuditReport) -> str:
    total = report.summary
    root = ET.Element(
        "testsuites",
        name="cudaship audit",
        tests=str(total.total),
        failures=str(total.failed),
        skipped=str(total.skipped),
        errors="0",
    )
    for wheel in report.wheels:
        s = wheel.summary
        suite = ET.SubElement(
            root,
            "testsuite",
            name=wheel.facts.filename,
            tests=str(s.total),
            failures=str(s.failed),
            skipped=str(s.skipped),
            errors="0",
        )
        props = ET.SubElement(suite, "properties")
        for key, value in (
            ("policy", report.policy_source or "built-in default"),
            ("version", wheel.facts.version),
            ("train", wheel.facts.train),
            ("platform", " ".join(x for x in (wheel.facts.platform, wheel.facts.machine) if x)),
        ):
            if value:
                ET.SubElement(props, "property", name=key, value=value)
        for check in wheel.checks:
            case = ET.SubElement(
                suite, "testcase", classname=f"cudaship.audit.{check.family}", name=check.name
            )
            if check.status is Status.FAIL:
                failure = ET.SubElement(case, "failure", message=check.reason, type=check.family)
                failure.text = "\n".join(finding_text(f) for f in check.evidence) or check.reason
            elif check.status is Status.SKIP:
                ET.SubElement(case, "skipped", message=check.reason)
            else:
                out = ET.SubElement(case, "system-out")
                out.text = check.reason
    ET.indent(root)
    return '<?xml version="1.0" encoding="UTF-8"?>\n' + ET.tostring(root, encoding="unicode") + "\n"
