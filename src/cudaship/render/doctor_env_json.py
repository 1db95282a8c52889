"""``doctor --env`` as JSON (``render/schemas/doctor-env.schema.json``, version :data:`SCHEMA_VERSION`).

Every import of every library is listed with the file the loader picks, the rule that picked it and the
distribution that owns the file, so a script can answer "which libcudart does torch get" without parsing text.
"""

from __future__ import annotations

import json
from typing import Any

from cudaship.checks.environment import EnvReport
from cudaship.records.findings import CheckResult, Severity

SCHEMA_VERSION = 1


def _finding(f: CheckResult) -> dict[str, Any]:
    out: dict[str, Any] = {"rule": f.name, "severity": f.severity.value, "message": f.reason}
    for key in (
        "file",
        "distribution",
        "library",
        "target",
        "target_distribution",
        "symbol",
        "version",
        "source",
    ):
        value = getattr(f.subject, key)
        if value is not None:
            out[key] = value
    return out


def _confirm(report: EnvReport) -> dict[str, Any]:
    c = report.confirm
    assert c is not None
    return {
        "python": c.python,
        "timeout": c.timeout,
        "driver": c.driver,
        "notes": list(c.notes),
        "agree": c.agree,
        "disagree": c.disagree,
        "not_compared": c.not_compared,
        "children": [
            {
                "module": child.module,
                "distribution": child.distribution,
                "before": list(child.before),
                "ok": child.ok,
                "message": child.message,
                "timed_out": child.timed_out,
                "seconds": child.seconds,
                "mapped": child.mapped,
                "compared": child.compared,
                "disagreed": child.disagreed,
            }
            for child in c.children
        ],
        "disagreements": [
            {
                "importer": d.importer,
                "name": d.name,
                "static": d.static,
                "static_how": d.static_how,
                "loader": d.loader,
                "module": d.module,
            }
            for d in c.disagreements
        ],
    }


def render_json(report: EnvReport) -> str:
    env, s, gpu = report.env, report.settings, report.gpu
    owners = {lib.path: lib.owner.label for lib in env.libraries}
    loaded = {o.path: o for o in report.graph.loaded}
    imports: dict[str, list[dict[str, Any]]] = {}
    for e in report.graph.edges:
        imports.setdefault(e.importer, []).append(
            {
                "name": e.name,
                "kind": e.kind.value,
                "file": e.target,
                "distribution": owners.get(e.target) if e.target else None,
                "how": e.how.value if e.how else None,
                "provider": e.provider,
            }
        )
    doc = {
        "schema": SCHEMA_VERSION,
        "environment": {
            "sites": list(env.sites),
            "os": env.os,
            "distributions": [
                {"name": d.dist.name, "version": d.dist.version, "site": d.site} for d in env.distributions
            ],
        },
        "loader": {
            "os": s.os,
            "system_checked": s.system_checked,
            "ld_library_path": list(s.ld_library_path),
            "ld_cache": s.ld_cache,
            "ld_cache_entries": s.cache_entries,
            "dll_directories": list(s.dll_directories),
            "dll_path": list(s.dll_path),
        },
        "gpus": {
            "checked": gpu.probe is not None and bool(gpu.probe.gpus),
            "capabilities": sorted({g.capability.capability for g in gpu.probe.gpus}) if gpu.probe else [],
            "note": gpu.note,
        },
        "libraries": [
            {
                "path": lib.path,
                "distribution": lib.owner.label,
                "loaded": lib.path in loaded and loaded[lib.path].reachable,
                "error": lib.report.error,
                "imports": imports.get(lib.path, []),
            }
            for lib in env.libraries
        ],
        "findings": [_finding(f) for f in report.findings],
        **({"confirm": _confirm(report)} if report.confirm is not None else {}),
        "summary": {s.value: sum(1 for f in report.findings if f.severity is s) for s in Severity},
    }
    return json.dumps(doc, indent=2, ensure_ascii=False) + "\n"
