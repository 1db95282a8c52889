"""``--format json`` for ``cudaship program``: the records as JSON, with ``"schema": 1``."""

from __future__ import annotations

import dataclasses
import json
from enum import Enum
from typing import Any

from cudaship.program.records import CheckReport, ProgramInfo, RunReport

SCHEMA = 1


def _plain(value: Any) -> Any:
    if isinstance(value, Enum):
        return value.value
    if dataclasses.is_dataclass(value) and not isinstance(value, type):
        return {f.name: _plain(getattr(value, f.name)) for f in dataclasses.fields(value)}
    if isinstance(value, (list, tuple)):
        return [_plain(v) for v in value]
    if isinstance(value, dict):
        return {str(k): _plain(v) for k, v in value.items()}
    return value


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
        "metadata": dict(info.metadata),
        "members": members,
        "notes": list(info.notes),
    }


def render_inspect(infos: list[ProgramInfo]) -> str:
    return json.dumps({"schema": SCHEMA, "programs": [_program(i) for i in infos]}, indent=2) + "\n"


def render_check(report: CheckReport) -> str:
    data = {
        "schema": SCHEMA,
        "directory": report.directory,
        "passed": report.passed,
        "provenance": _plain(report.provenance),
        "target": _plain(report.target),
        "checks": _plain(report.items),
        "program": _program(report.program) if report.program else None,
    }
    return json.dumps(data, indent=2, ensure_ascii=False) + "\n"


def render_run(report: RunReport) -> str:
    data = {"schema": SCHEMA, **_plain(report)}
    return json.dumps(data, indent=2, ensure_ascii=False) + "\n"
