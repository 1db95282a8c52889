"""``--format json`` for ``cudaship program``: the records as JSON, with ``"schema": 1``."""

from __future__ import annotations

import json
from typing import TYPE_CHECKING, Any

from cudaship.inspection.program_records import ProgramInfo
from cudaship.program.records import CheckReport, RunReport, outcome
from cudaship.render.jsonify import fields, to_json

if TYPE_CHECKING:
    from cudaship.program.export import ExportResult

SCHEMA = 1


def _program(info: ProgramInfo) -> dict[str, Any]:
    members = []
    for m in info.members:
        entry: dict[str, Any] = {"name": m.name, "role": m.role.value, "size": m.size}
        if m.report is not None:
            r = m.report
            entry["format"] = r.format.value if r.format else None
            entry["imports"] = [i.library for i in r.host.imports] if r.host else []
            entry["device_code"] = [
                {"kind": d.kind.value, "arch": d.arch, "toolkit_version": d.toolkit_version}
                for d in r.device_code
            ]
            entry["error"] = r.error
        members.append(entry)
    return {
        "path": info.path,
        "kind": info.kind.value,
        "device": info.device,
        "platform": info.platform,
        "machine": info.machine,
        "cpu_isa": info.cpu_isa,
        "compute_capability": info.compute_capability,
        "models": list(info.models),
        "backends": list(info.backends),
        "sass": list(info.sass),
        "ptx": list(info.ptx),
        "cudart_majors": list(info.cudart_majors),
        "recorded_toolkits": list(info.recorded_toolkits),
        "cuda_train": info.train.version,
        "train_evidence": info.train.source,
        "metadata": dict(info.metadata),
        "members": members,
        "notes": list(info.notes),
    }


def render_inspect(infos: list[ProgramInfo]) -> str:
    return json.dumps({"schema": SCHEMA, "programs": [_program(i) for i in infos]}, indent=2) + "\n"


def render_export(result: ExportResult) -> str:
    data = {
        "schema": SCHEMA,
        "directory": str(result.directory),
        "export_s": result.export_s,
        "provenance": to_json(result.provenance),
        "warnings": list(result.warnings),
        "notes": list(result.notes),
        "problems": list(result.problems),
        "passed": not result.problems,
    }
    return json.dumps(data, indent=2) + "\n"


def render_check(report: CheckReport) -> str:
    data = {
        "schema": SCHEMA,
        "directory": report.directory,
        "passed": report.passed,
        "provenance": to_json(report.provenance),
        "target": to_json(report.target),
        "checks": [{"name": i.name, "status": outcome(i), "message": i.reason} for i in report.items],
        "program": _program(report.program) if report.program else None,
    }
    return json.dumps(data, indent=2, ensure_ascii=False) + "\n"


def render_run(report: RunReport) -> str:
    data = {"schema": SCHEMA, **fields(report)}
    return json.dumps(data, indent=2, ensure_ascii=False) + "\n"


_STR_OR_NULL = {"type": ["string", "null"]}
_NUM_OR_NULL = {"type": ["number", "null"]}

#: JSON Schema (draft 2020-12) of ``program inspect|check|run --format json``, schema 1.
JSON_SCHEMA: dict[str, Any] = {
    "$schema": "https://json-schema.org/draft/2020-12/schema",
    "$id": "https://cudaship.invalid/schemas/program-1.json",
    "$defs": {
        "program": {
            "type": "object",
            "required": [
                "path",
                "kind",
                "device",
                "platform",
                "sass",
                "ptx",
                "cudart_majors",
                "members",
                "notes",
            ],
            "properties": {
                "path": {"type": "string"},
                "kind": {"enum": ["pt2", "pte"]},
                "device": _STR_OR_NULL,
                "platform": _STR_OR_NULL,
                "machine": _STR_OR_NULL,
                "compute_capability": _STR_OR_NULL,
                "sass": {"type": "array", "items": {"type": "string", "pattern": "^sm_[0-9]+[af]?$"}},
                "ptx": {"type": "array", "items": {"type": "string", "pattern": "^compute_[0-9]+[af]?$"}},
                "cudart_majors": {"type": "array", "items": {"type": "integer"}},
                "cuda_train": _STR_OR_NULL,
                "train_evidence": _STR_OR_NULL,
                "members": {
                    "type": "array",
                    "items": {
                        "type": "object",
                        "required": ["name", "role", "size"],
                        "properties": {
                            "name": {"type": "string"},
                            "role": {
                                "enum": [
                                    "wrapper-library",
                                    "library",
                                    "cubin",
                                    "metadata",
                                    "source",
                                    "weights",
                                    "other",
                                ]
                            },
                            "size": {"type": "integer", "minimum": 0},
                        },
                    },
                },
                "notes": {"type": "array", "items": {"type": "string"}},
            },
        },
        "environment": {
            "type": ["object", "null"],
            "properties": {
                "driver": _STR_OR_NULL,
                "capability": _STR_OR_NULL,
                "memory_pools": {"type": ["boolean", "null"]},
                "cudart": {"type": "array", "items": {"type": "string"}},
                "compiler_on_path": _STR_OR_NULL,
            },
        },
    },
    "type": "object",
    "required": ["schema"],
    "properties": {"schema": {"const": SCHEMA}},
    "oneOf": [
        {
            "required": ["programs"],
            "properties": {"programs": {"type": "array", "items": {"$ref": "#/$defs/program"}}},
        },
        {
            "required": ["checks", "passed", "target"],
            "properties": {
                "passed": {"type": "boolean"},
                "checks": {
                    "type": "array",
                    "items": {
                        "type": "object",
                        "required": ["name", "status", "message"],
                        "properties": {"status": {"enum": ["pass", "fail", "warn", "skip"]}},
                    },
                },
                "program": {"oneOf": [{"type": "null"}, {"$ref": "#/$defs/program"}]},
            },
        },
        {
            "required": ["directory", "export_s", "provenance", "warnings", "notes", "problems", "passed"],
            "properties": {
                "export_s": {"type": "number"},
                "provenance": {"type": "object"},
                "warnings": {"type": "array", "items": {"type": "string"}},
                "notes": {"type": "array", "items": {"type": "string"}},
                "problems": {"type": "array", "items": {"type": "string"}},
                "passed": {"type": "boolean"},
            },
        },
        {
            "required": ["ok", "runs", "tolerance", "run_directory"],
            "properties": {
                "ok": {"type": "boolean"},
                "max_abs_diff": _NUM_OR_NULL,
                "load_s": _NUM_OR_NULL,
                "latency_ms": _NUM_OR_NULL,
                "eager_latency_ms": _NUM_OR_NULL,
                "signal": _STR_OR_NULL,
                "failure": _STR_OR_NULL,
                "environment": {"$ref": "#/$defs/environment"},
            },
        },
    ],
}
