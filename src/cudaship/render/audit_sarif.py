"""``cudaship audit --format sarif``: SARIF 2.1.0, what GitHub code scanning uploads
(``github/codeql-action/upload-sarif``) and other static-analysis viewers read.

One run of the tool ``cudaship``; a rule per check key (``family`` or ``family.rule``, what
``[audit.severity]`` names) that failed; a result per failed check, its ``level`` the check's severity
(``error``, ``warning``, ``note``: SARIF's own names), its message the reason and then the evidence, one line
each, and its location the wheel (a file: its path as given, made a URI; line 1, since a wheel has no lines).
Passing and skipped checks are not results (SARIF lists problems). An input that could not be audited is a
tool execution notification of level ``error`` (``executionSuccessful`` is false).
"""

from __future__ import annotations

import os
from pathlib import PureWindowsPath
from urllib.parse import quote

from cudaship import __version__
from cudaship.checks.records import AuditReport, WheelAudit
from cudaship.records.findings import CheckResult, Status
from cudaship.render.audit_text import finding_text
from cudaship.render.jsonify import JSON, dumps
from cudaship.render.style import Style

VERSION = "2.1.0"
SCHEMA = "https://json.schemastore.org/sarif-2.1.0.json"


#: characters a URI path may hold as they are (RFC 3986 sub-delims and ``@``; ``:`` only in a ``file:`` URI,
#: where a relative reference's first segment cannot be read as a scheme)
_PATH_SAFE = "/!$&'()*+,;=@"


def uri(path: str) -> str:
    """A wheel's path as a SARIF ``artifactLocation.uri``: a relative path as a relative URI reference
    (``/`` separators, percent-encoded), an absolute one as a ``file:`` URI."""
    posix = path.replace(os.sep, "/")  # a Windows path's separators; a POSIX name may hold a backslash
    if posix.startswith("/"):
        return "file://" + quote(posix, safe=_PATH_SAFE + ":")
    if os.sep == "\\" and PureWindowsPath(path).drive:
        return "file:///" + quote(posix, safe=_PATH_SAFE + ":")
    return quote(posix, safe=_PATH_SAFE)


def _rule(check: CheckResult) -> dict[str, JSON]:
    return {
        "id": check.key,
        "name": check.family,
        "shortDescription": {"text": f"cudaship audit: {check.key}"},
        "defaultConfiguration": {"level": check.severity.value},
        "properties": {"family": check.family},
    }


def _result(check: CheckResult, wheel: WheelAudit, rule_index: int) -> dict[str, JSON]:
    lines = [check.reason, *(finding_text(f) for f in check.evidence)]
    return {
        "ruleId": check.key,
        "ruleIndex": rule_index,
        "level": check.severity.value,
        "message": {"text": "\n".join(lines)},
        "locations": [
            {
                "physicalLocation": {
                    "artifactLocation": {"uri": uri(wheel.path)},
                    "region": {"startLine": 1},
                }
            }
        ],
        "partialFingerprints": {"cudaship/v1": f"{wheel.facts.name or wheel.facts.filename}:{check.name}"},
        "properties": {
            "wheel": wheel.facts.filename,
            "check": check.name,
            "evidence": [f.as_dict() for f in check.evidence],  # type: ignore[misc]
        },
    }


def render(report: AuditReport, style: Style) -> str:
    rules: dict[str, int] = {}  # check key -> index in the rules, in the order first failed
    descriptors: list[JSON] = []
    results: list[JSON] = []
    for wheel in report.wheels:
        for check in wheel.checks:
            if check.status is not Status.FAIL:
                continue
            if check.key not in rules:
                rules[check.key] = len(descriptors)
                descriptors.append(_rule(check))
            results.append(_result(check, wheel, rules[check.key]))
    notifications: list[JSON] = [{"level": "error", "message": {"text": error}} for error in report.errors]
    doc = {
        "$schema": SCHEMA,
        "version": VERSION,
        "runs": [
            {
                "tool": {"driver": {"name": "cudaship", "version": __version__, "rules": descriptors}},
                "invocations": [
                    {"executionSuccessful": not report.errors, "toolExecutionNotifications": notifications}
                ],
                "results": results,
            }
        ],
    }
    return dumps(doc, ascii=False)
