"""The checks table is the one list of check families: the engine runs it, the policy parser accepts its
sections and severity keys, the JSON schema's family enum and docs/policy.md's table are derived from it."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from cudaship.checks import table
from cudaship.checks.table import default_policy, parse_audit_table
from cudaship.errors import PolicyError
from cudaship.records.findings import Severity

REPO = Path(__file__).resolve().parents[2]


def test_names_are_unique_and_rules_too() -> None:
    names = table.family_names()
    assert len(names) == len(set(names))
    for family in table.FAMILIES:
        rules = [r.name for r in family.rules]
        assert len(rules) == len(set(rules)), family.name


def test_json_schema_family_enum_is_the_table() -> None:
    schema = json.loads((REPO / "src/cudaship/render/schemas/audit.schema.json").read_text())
    check = schema["properties"]["checks"]["items"]["properties"]
    assert check["family"]["enum"] == list(table.family_names())
    assert check["severity"]["enum"] == [s.value for s in Severity]


def test_docs_table_is_generated_from_the_table() -> None:
    text = (REPO / "docs/policy.md").read_text()
    start, end = text.index(table.DOC_START), text.index(table.DOC_END) + len(table.DOC_END)
    assert text[start:end] == table.markdown(), "regenerate with: python -m cudaship.checks.table"


def test_policy_accepts_every_section_and_severity_key_of_the_table() -> None:
    for key in table.severity_keys():
        policy = parse_audit_table({"severity": {key: "note"}}, "t.toml")
        family, _, rule = key.partition(".")
        assert policy.severity(family, rule or None) is Severity.NOTE
    with pytest.raises(PolicyError, match=r'audit\.severity\."closure\.nope": unknown check family or rule'):
        parse_audit_table({"severity": {"closure.nope": "note"}}, "t.toml")
    with pytest.raises(PolicyError, match=r"audit\.severity\.closure: must be one of error, warning, note"):
        parse_audit_table({"severity": {"closure": "fatal"}}, "t.toml")
    with pytest.raises(PolicyError, match="unknown key"):
        parse_audit_table({"nosuchfamily": {}}, "t.toml")


def test_defaults_come_from_the_table() -> None:
    policy = default_policy()
    assert policy.families == table.default_families()
    for family in table.FAMILIES:
        assert policy.severity(family.name, None) is family.severity
        for rule in family.rules:
            assert policy.severity(family.name, rule.name) is rule.severity
    # the three the issue names are warnings by default
    assert policy.severity("closure", "unused_imports") is Severity.WARNING
    assert policy.severity("archs", "relocatable_ptx") is Severity.WARNING
    assert policy.severity("archs", "forward_ptx") is Severity.WARNING


def test_specific_setting_wins_over_family_setting() -> None:
    policy = parse_audit_table({"severity": {"closure": "note", "closure.unused_imports": "error"}}, "t.toml")
    assert policy.severity("closure", "unused_imports") is Severity.ERROR
    assert policy.severity("closure", None) is Severity.NOTE
    assert policy.severity("closure", "variant") is Severity.NOTE


def test_engine_runs_the_table_in_order() -> None:
    from cudaship.checks import engine

    assert engine.FAMILIES is table.FAMILIES
