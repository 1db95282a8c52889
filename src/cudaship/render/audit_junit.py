"""``cudaship audit --format junit``: JUnit XML with one testcase per check (one testsuite per wheel), so CI
dashboards list every check; failures carry the reason as message and the evidence as text.

Only checks that failed with severity error are ``<failure>``s: a warning or a note is a passing testcase
whose ``<system-out>`` starts with ``warning:`` / ``note:`` and that carries a ``severity`` property (JUnit
has no warning outcome; a dashboard that counted them as failures would fail builds the audit passes).
An input that could not be audited is a testsuite named after it with one testcase in ``<error>``."""

from __future__ import annotations

import xml.etree.ElementTree as ET

from cudaship.checks.records import AuditReport
from cudaship.records.findings import Severity, Status
from cudaship.render.audit_text import finding_text
from cudaship.render.style import Style


def render(report: AuditReport, style: Style) -> str:
    total = report.summary
    root = ET.Element(
        "testsuites",
        name="cudaship audit",
        tests=str(total.total),
        failures=str(total.failed),
        skipped=str(total.skipped),
        errors=str(len(report.errors)),
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
            ("train_source", wheel.facts.train_source),
            ("platform", " ".join(x for x in (wheel.facts.platform, wheel.facts.machine) if x)),
            ("loader", wheel.load.line if wheel.load is not None else None),
            ("loader_environment", wheel.load.environment if wheel.load is not None else None),
        ):
            if value:
                ET.SubElement(props, "property", name=key, value=value)
        for check in wheel.checks:
            case = ET.SubElement(
                suite, "testcase", classname=f"cudaship.audit.{check.family}", name=check.name
            )
            if check.status is Status.FAIL:  # what the severity of a passing check would be is noise
                case_props = ET.SubElement(case, "properties")
                ET.SubElement(case_props, "property", name="severity", value=check.severity.value)
                if check.rule:
                    ET.SubElement(case_props, "property", name="rule", value=check.rule)
            if check.status is Status.FAIL and check.severity is not Severity.ERROR:
                out = ET.SubElement(case, "system-out")
                lines = [f"{check.severity.value}: {check.reason}"]
                lines += [finding_text(f) for f in check.evidence]
                out.text = "\n".join(lines)
            elif check.status is Status.FAIL:
                failure = ET.SubElement(case, "failure", message=check.reason, type=check.family)
                failure.text = "\n".join(finding_text(f) for f in check.evidence) or check.reason
            elif check.status is Status.SKIP:
                ET.SubElement(case, "skipped", message=check.reason)
            else:
                out = ET.SubElement(case, "system-out")
                out.text = check.reason
    for error in report.errors:  # an input that could not be audited: a suite of one testcase in error
        label, _, _reason = error.partition(": ")
        suite = ET.SubElement(root, "testsuite", name=label, tests="1", failures="0", skipped="0", errors="1")
        case = ET.SubElement(suite, "testcase", classname="cudaship.audit.input", name="read")
        ET.SubElement(case, "error", message=error, type="input").text = error
    ET.indent(root)
    return '<?xml version="1.0" encoding="UTF-8"?>\n' + ET.tostring(root, encoding="unicode") + "\n"
