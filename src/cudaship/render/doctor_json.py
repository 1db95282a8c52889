"""``cudaship doctor --format json``: the machine and each file's verdict per GPU."""

from __future__ import annotations

import json
from typing import Any

from cudaship.analysis.doctor import Checked, DoctorReport
from cudaship.probe.records import ProbeResult

SCHEMA_VERSION = 1


def _file(c: Checked, result: ProbeResult) -> dict[str, Any]:
    return {
        "path": c.verdicts.path,
        "container": c.verdicts.container,
        "distribution": c.distribution,
        "device_code": c.verdicts.has_device_code,
        "no_kernels": c.verdicts.no_kernels,
        "error": c.verdicts.error,
        "gpus": [
            {
                "index": gpu.index,
                "capability": gpu.capability.capability,
                "verdict": v.verdict.value,
                "reason": v.reason,
                "entry": v.entry.arch if v.entry else None,
                "min_driver": v.min_driver,
                "min_driver_reason": v.min_driver_reason,
            }
            for gpu, v in (c.per_gpu(result.gpus) if c.verdicts.has_device_code else [])
        ],
    }


def render(report: DoctorReport) -> str:
    result = report.probe
    drv = result.driver
    doc = {
        "schema": SCHEMA_VERSION,
        "driver": {
            "version": drv.version,
            "cuda": drv.cuda.version if drv.cuda else None,
            "sources": list(result.sources),
        },
        "gpus": [
            {
                "index": g.index,
                "name": g.name,
                "capability": g.capability.capability,
                "generation": g.capability.generation,
                "memory_bytes": g.memory_bytes,
                "memory_pools": g.memory_pools,
            }
            for g in result.gpus
        ],
        "notes": list(result.notes),
        "scanned_environment": report.scanned_environment,
        "files": [_file(c, result) for c in report.checked],
    }
    return json.dumps(doc, indent=2, ensure_ascii=False) + "\n"
