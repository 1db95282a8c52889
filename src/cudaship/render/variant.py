"""``cudaship variant properties``: ``text`` (one ``namespace :: feature :: value`` per line, each with why as
``#`` comments), ``args`` (``-p '...'`` options, as ``variantlib make-variant`` takes them) and ``json`` (the
properties as ``variant.json`` nests them, with the reasons)."""

from __future__ import annotations

import shlex
from collections.abc import Mapping
from typing import Any

from cudaship.checks.variant_props import PropertiesReport
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
