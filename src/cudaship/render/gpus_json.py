"""``cudaship gpus --format json`` (schema in schemas/gpus.schema.json; bump SCHEMA_VERSION on any change
that removes or renames a field)."""

from __future__ import annotations

import json
from typing import Any

from cudaship import __version__
from cudaship.analysis.gpus import CapabilityVerdict, FileVerdicts, GpuReport, GroupVerdicts
from cudaship.knowledge.gpus import group_for
from cudaship.render import variant_here
from cudaship.render.jsonify import pick

#: 2: a wheel's verdicts count variants (alternatives, one loaded) by their best and do not let a library no
#: other file imports sink a GPU the others serve; groups have ``variants``.
SCHEMA_VERSION = 2


def _verdicts(verdicts: tuple[CapabilityVerdict, ...]) -> dict[str, Any]:
    return {
        cv.capability.capability: {
            "verdict": cv.verdict.verdict.value,
            "reason": cv.verdict.reason,
            "min_driver": cv.verdict.min_driver,
            "min_driver_reason": cv.verdict.min_driver_reason,
            "entry": cv.verdict.entry.arch if cv.verdict.entry else None,
            "file": cv.file,
        }
        for cv in verdicts
    }


def _file(f: FileVerdicts) -> dict[str, Any]:
    return {
        **pick(f, "path", "container", "platform"),
        "build_cuda": f.build_cuda.version if f.build_cuda else None,
        "device_code": f.has_device_code,
        **pick(f, "no_kernels", "error"),
        "verdicts": _verdicts(f.verdicts),
    }


def _group(g: GroupVerdicts) -> dict[str, Any]:
    return {
        **pick(g, "path", "kind", "files"),
        "verdicts": _verdicts(g.verdicts),
        **pick(g, "min_driver", "min_driver_reason"),
        "variants": [
            {
                "group": vg.group,
                "variants": [
                    {
                        "file": v.label,
                        "name": v.name,
                        "build_cuda": v.build_cuda.version if v.build_cuda else None,
                        **pick(v, "serves", "min_driver", "min_driver_reason"),
                    }
                    for v in vg.variants
                ],
            }
            for vg in g.variant_groups
        ],
    }


def to_json(report: GpuReport) -> dict[str, Any]:
    capabilities = []
    for cap in report.capabilities:
        group = group_for(cap)
        capabilities.append(
            {
                "capability": cap.capability,
                "generation": group.generation if group else cap.generation,
                "gpus": list(group.names) if group else [],
                "asked": list(report.asked_names(cap)),
            }
        )
    driver = report.driver
    return {
        "schema": SCHEMA_VERSION,
        "tool": {"name": "cudaship", "version": __version__},
        "inputs": list(report.inputs),
        "driver": None
        if driver is None
        else {
            "version": driver.version,
            "cuda": driver.cuda.version if driver.cuda else None,
        },
        "capabilities": capabilities,
        "files": [_file(f) for f in report.files],
        "wheels": [_group(w) for w in report.wheels],
        "overall": _group(report.overall),
        "variant_releases": variant_here.to_json(report.variants),
        "required": None
        if not report.required
        else {
            "met": not report.unmet,
            "unmet": [cv.capability.capability for cv in report.unmet],
        },
    }


def render(report: GpuReport) -> str:
    return json.dumps(to_json(report), indent=2, ensure_ascii=False) + "\n"
