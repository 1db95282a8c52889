"""Variants in the audit: a library that is one of several alternatives (``libbitsandbytes_cuda118.so`` ...
``_cuda132.so``, ``_rocm64.so``; see :mod:`cudaship.knowledge.variants`) is loaded only in the environment it
was built for. When its imports do not resolve against the wheel's requirements but a sibling's do, it is
the variant for another environment (a torch built for CUDA 11.8, a ROCm build), not a broken wheel. A CUDA
variant counts as another environment's only when some other CUDA variant resolves (a ``_cpu`` sibling that
resolves does not excuse CUDA variants that all fail).

So, after every family has run: a failed ``closure: <variant>`` whose group has a member that resolves, and a
failed ``requirements: CUDA imports provided`` whose every finding is about such variants, get the rule
``variant`` (a note by default; ``[audit.severity] "closure.variant" = "error"`` demands that every variant
resolve). A group none of whose members resolves keeps its errors: the wheel works nowhere.
"""

from __future__ import annotations

import dataclasses
import posixpath
from collections.abc import Sequence

from cudaship.checks.context import AuditContext
from cudaship.records.findings import CheckResult, Status
from cudaship.words import agree

RULE = "variant"
REQUIREMENTS_CHECK = "requirements: CUDA imports provided"


def _closure_path(result: CheckResult) -> str | None:
    if result.family != "closure" or not result.name.startswith("closure: "):
        return None
    rest = result.name[len("closure: ") :]
    return None if rest.startswith("unused imports in ") else rest


def served_variants(ctx: AuditContext, results: Sequence[CheckResult]) -> dict[str, list[str]]:
    """Group -> the members whose closure check passed (the variants this wheel's requirements serve)."""
    served: dict[str, list[str]] = {}
    for r in results:
        path = _closure_path(r)
        variant = ctx.variants.get(path) if path is not None else None
        if variant is not None and r.status is Status.PASS:
            served.setdefault(variant.group, []).append(path or "")
    return served


def mark_alternatives(ctx: AuditContext, results: list[CheckResult]) -> list[CheckResult]:
    """``results`` with the failures of variants for other environments given the rule ``variant``."""
    if not ctx.variants:
        return results
    served = served_variants(ctx, results)

    def other_environment(path: str | None) -> str | None:
        variant = ctx.variants.get(path) if path is not None else None
        if variant is None:
            return None
        siblings_served = served.get(variant.group, [])
        if variant.is_cuda:  # a CUDA variant is for another environment only if some CUDA variant is served
            siblings_served = [p for p in siblings_served if ctx.variants[p].is_cuda]
        if not siblings_served:
            return None
        siblings = sorted(posixpath.basename(p) for p in siblings_served)
        shown = ", ".join(siblings)  # a skip reason has no evidence: every sibling, never cut
        return (
            f"the {variant.label} variant, one of the alternatives {variant.group}: for another environment "
            f"than these requirements provide ({shown} {agree(len(siblings), 'resolves', 'resolve')})"
        )

    out: list[CheckResult] = []
    for r in results:
        if r.status is not Status.FAIL or r.rule is not None:
            out.append(r)
            continue
        path = _closure_path(r)
        why = other_environment(path)
        if why is None and r.family == "requirements" and r.name == REQUIREMENTS_CHECK and r.evidence:
            reasons = {other_environment(f.file) for f in r.evidence}
            if None not in reasons:
                why = "every finding is about variants for other environments than these requirements provide"
        if why is None:
            out.append(r)
            continue
        out.append(dataclasses.replace(r, rule=RULE, reason=f"{r.reason} — {why}"))
    return out
