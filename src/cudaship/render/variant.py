"""``cudaship variant properties`` and ``variant release``. Properties: ``text`` (one ``namespace :: feature
:: value`` per line, each with why as ``#`` comments), ``args`` (``-p '...'`` options, as ``variantlib
make-variant`` takes them) and ``json`` (the properties as ``variant.json`` nests them, with the reasons).
Release: ``text`` (a table of the machines judged, the variant each gets and whether it runs, then the
checks) and ``json``."""

from __future__ import annotations

import shlex
from collections.abc import Mapping
from typing import Any

from cudaship.checks.variant_props import PropertiesReport
from cudaship.checks.variant_release import ReleaseReport
from cudaship.records.findings import CheckResult
from cudaship.render.jsonify import dumps
from cudaship.render.style import Renderer, Style

SCHEMA_VERSION = 1


def text(report: PropertiesReport, style: Style) -> str:
    head = f"# {report.wheel}" + (f" (variant {report.label})" if report.label else "")
    lines = [head, "# properties its binaries justify (nvidia-variant-provider's syntax):"]
    if not report.justified:
        lines.append("# none: no CUDA runtime and no device code in the wheel (a null variant)")
    for j in report.justified:
        lines += [j.property.text, f"#   {j.why}"]
    if report.label is not None:
        justified = {j.property.text for j in report.justified}
        for d in report.declared:
            if d not in justified:
                lines.append(f"# declared, not justified here: {d} (see `cudaship audit`'s variant checks)")
    return "\n".join(lines) + "\n"


def args(report: PropertiesReport, style: Style) -> str:
    return " ".join(f"-p {shlex.quote(j.property.text)}" for j in report.justified) + "\n"


def as_json(report: PropertiesReport, style: Style) -> str:
    nested: dict[str, dict[str, list[str]]] = {}
    for j in report.justified:
        p = j.property
        nested.setdefault(p.namespace, {}).setdefault(p.feature, []).append(p.value)
    doc: Mapping[str, Any] = {
        "schema": SCHEMA_VERSION,
        "wheel": report.wheel,
        "label": report.label,
        "properties": nested,
        "reasons": [{"property": j.property.text, "why": j.why} for j in report.justified],
        "declared": list(report.declared),
    }
    return dumps(doc)


FORMATS: Mapping[str, Renderer[PropertiesReport]] = {"text": text, "args": args, "json": as_json}


# --- variant release ------------------------------------------------------------------------------------


def _status(c: CheckResult) -> str:
    if c.status.value == "pass":
        return "PASS"
    if c.status.value == "skip":
        return "SKIP"
    return c.severity.value.upper()


def release_text(report: ReleaseReport, style: Style) -> str:
    lines = [
        f"variants: {', '.join(report.labels) or 'none'}"
        + (f" (index {report.index})" if report.index else "")
    ]
    if report.picks:
        lines.append("")
        lines.append("GPU   driver  variant      runs")
        for p in report.picks:
            runs = "-" if p.runs is None else ("yes" if p.runs else "NO")
            label = p.label if p.label is not None else "(nothing)"
            lines.append(f"{p.capability:<5} {p.cuda:<7} {label:<12} {runs:<4} {p.reason}")
    lines.append("")
    for c in report.checks:
        lines.append(f"  {_status(c):<7} {c.name} — {c.reason}")
        if c.failed:
            lines += [f"          {f.message}" for f in c.evidence[:20]]
            if len(c.evidence) > 20:
                lines.append(f"          ... and {len(c.evidence) - 20} more")
    return "\n".join(lines) + "\n"


def release_json(report: ReleaseReport, style: Style) -> str:
    doc = {
        "schema": SCHEMA_VERSION,
        "wheels": list(report.wheels),
        "index": report.index,
        "labels": list(report.labels),
        "picks": [
            {"gpu": p.capability, "cuda": p.cuda, "variant": p.label, "runs": p.runs, "reason": p.reason}
            for p in report.picks
        ],
        "checks": [
            {
                "name": c.name,
                "status": c.status.value,
                "severity": c.severity.value,
                "rule": c.rule,
                "reason": c.reason,
                "evidence": [f.message for f in c.evidence],
            }
            for c in report.checks
        ],
    }
    return dumps(doc)


RELEASE_FORMATS: Mapping[str, Renderer[ReleaseReport]] = {"text": release_text, "json": release_json}
