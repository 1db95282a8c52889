"""``cudaship audit --format sarif`` on a real audit with findings: the document has the structure SARIF 2.1.0
requires and GitHub code scanning reads, and says what the JSON report says (one result per failed check, at
its severity, located at the wheel)."""

from __future__ import annotations

import json
from collections.abc import Callable
from pathlib import Path
from typing import Any

import jsonschema
import pytest

from cudaship.cli.main import main
from cudaship.exitcodes import ExitCode

REPO = Path(__file__).resolve().parents[2]
WIN = REPO / "examples" / "policies" / "windows.toml"

_TEXT = {"type": "object", "required": ["text"], "properties": {"text": {"type": "string", "minLength": 1}}}
_LEVEL = {"enum": ["none", "note", "warning", "error"]}
#: What SARIF 2.1.0 (OASIS, sarif-schema-2.1.0.json) requires of the parts cudaship writes, and what GitHub
#: code scanning needs besides (a rule id, a message and a location with a file URI on every result).
SARIF_REQUIRED = {
    "type": "object",
    "required": ["version", "$schema", "runs"],
    "properties": {
        "version": {"const": "2.1.0"},
        "$schema": {"type": "string", "pattern": "sarif-2\\.1\\.0"},
        "runs": {
            "type": "array",
            "minItems": 1,
            "items": {
                "type": "object",
                "required": ["tool", "results"],
                "properties": {
                    "tool": {
                        "type": "object",
                        "required": ["driver"],
                        "properties": {
                            "driver": {
                                "type": "object",
                                "required": ["name", "rules"],
                                "properties": {
                                    "name": {"type": "string", "minLength": 1},
                                    "rules": {
                                        "type": "array",
                                        "items": {
                                            "type": "object",
                                            "required": ["id"],
                                            "properties": {
                                                "id": {"type": "string", "minLength": 1},
                                                "shortDescription": _TEXT,
                                                "defaultConfiguration": {
                                                    "type": "object",
                                                    "properties": {"level": _LEVEL},
                                                },
                                            },
                                        },
                                    },
                                },
                            }
                        },
                    },
                    "invocations": {
                        "type": "array",
                        "items": {"type": "object", "required": ["executionSuccessful"]},
                    },
                    "results": {
                        "type": "array",
                        "items": {
                            "type": "object",
                            "required": ["ruleId", "level", "message", "locations"],
                            "properties": {
                                "ruleId": {"type": "string", "minLength": 1},
                                "ruleIndex": {"type": "integer", "minimum": 0},
                                "level": _LEVEL,
                                "message": _TEXT,
                                "locations": {
                                    "type": "array",
                                    "minItems": 1,
                                    "items": {
                                        "type": "object",
                                        "required": ["physicalLocation"],
                                        "properties": {
                                            "physicalLocation": {
                                                "type": "object",
                                                "required": ["artifactLocation"],
                                                "properties": {
                                                    "artifactLocation": {
                                                        "type": "object",
                                                        "required": ["uri"],
                                                        "properties": {
                                                            "uri": {"type": "string", "minLength": 1}
                                                        },
                                                    },
                                                    "region": {
                                                        "type": "object",
                                                        "properties": {
                                                            "startLine": {"type": "integer", "minimum": 1}
                                                        },
                                                    },
                                                },
                                            }
                                        },
                                    },
                                },
                            },
                        },
                    },
                },
            },
        },
    },
}


def _audit(fmt: str, wheel: str, capsys: pytest.CaptureFixture[str]) -> tuple[int, Any]:
    code = main(["audit", "--no-progress", "--offline", "--policy", str(WIN), "--format", fmt, wheel])
    out, err = capsys.readouterr()
    assert code in (ExitCode.OK, ExitCode.FINDINGS), err
    return code, json.loads(out)


@pytest.mark.slow
def test_sarif_of_an_audit_with_findings(
    synthetic_wheel: Callable[[str], Path],
    monkeypatch: pytest.MonkeyPatch,
    capsys: pytest.CaptureFixture[str],
) -> None:
    wheel = synthetic_wheel("win_cudart_import")
    monkeypatch.delenv("GITHUB_ACTIONS", raising=False)
    monkeypatch.chdir(wheel.parent)  # the wheel named relative to the checkout, as in a CI job
    code, sarif = _audit("sarif", wheel.name, capsys)
    json_code, report = _audit("json", wheel.name, capsys)

    jsonschema.validate(sarif, SARIF_REQUIRED)
    assert code == json_code == ExitCode.FINDINGS
    (run,) = sarif["runs"]
    assert run["tool"]["driver"]["name"] == "cudaship"
    assert run["invocations"][0]["executionSuccessful"] is True
    failed = [c for c in report["checks"] if c["status"] == "fail"]
    assert {c["severity"] for c in failed} == {"error", "note"}  # both kinds of finding
    rules = run["tool"]["driver"]["rules"]
    assert len({r["id"] for r in rules}) == len(rules)  # one descriptor per rule
    results = run["results"]
    assert len(results) == len(failed)
    for result, check in zip(results, failed, strict=True):
        key = f"{check['family']}.{check['rule']}" if check["rule"] else check["family"]
        assert result["ruleId"] == key == rules[result["ruleIndex"]]["id"]
        assert result["level"] == check["severity"]
        assert result["message"]["text"].startswith(check["reason"])
        assert result["properties"]["check"] == check["name"]
        (location,) = result["locations"]
        assert location["physicalLocation"]["artifactLocation"]["uri"] == wheel.name
