"""forbidden_imports and required_imports: import patterns per library glob.

``no_cuda`` forbids any CUDA library, directly or through other shipped libraries (following the imports that
resolve to shipped files), including names stored for dlopen/LoadLibrary. Required imports may be met by a
name stored for dynamic loading (how a statically linked CUDA runtime reaches the driver) unless the rule says
``dynamic_load = false``.
"""

from __future__ import annotations

from collections import deque

from cudaship.checks.context import AuditContext, canonical_imports
from cudaship.checks.policy import ImportRule, any_match, name_match
from cudaship.checks.resolve import shipped_dependencies
from cudaship.records.findings import CheckResult, Finding, skipped, verdict

FORBIDDEN = "forbidden_imports"
REQUIRED = "required_imports"


def _targets(ctx: AuditContext, rule: ImportRule, family: str, results: list[CheckResult]) -> list[str]:
    """Shipped libraries the rule applies to; with none, a SKIP for the rule goes to ``results``."""
    targets = [p for p in sorted(ctx.libraries) if any_match(rule.libraries, p)]
    if not targets:
        title = f"{family.replace('_', ' ')}: {', '.join(rule.libraries)}"
        results.append(skipped(family, title, f"no shipped library matches ({rule.key})"))
    return targets


def _label(rule: ImportRule) -> str:
    if rule.description:
        return rule.description
    parts = list(rule.patterns)
    if rule.no_cuda:
        parts.append("no CUDA")
    return ", ".join(parts)


def run_forbidden(ctx: AuditContext) -> list[CheckResult]:
    results: list[CheckResult] = []
    for rule in ctx.policy.forbidden_imports:
        for path in _targets(ctx, rule, FORBIDDEN, results):
            findings = _forbidden_findings(ctx, path, rule)
            ok = f"imports none of {_label(rule)}" if rule.patterns else "depends on no CUDA library"
            if rule.no_cuda and rule.patterns:
                ok = f"imports none of {', '.join(rule.patterns)} and depends on no CUDA library"
            results.append(verdict(FORBIDDEN, f"forbidden imports: {path} ({_label(rule)})", findings, ok))
    return results


def _forbidden_findings(ctx: AuditContext, path: str, rule: ImportRule) -> list[Finding]:
    report = ctx.libraries[path]
    assert report.host is not None
    findings: list[Finding] = []
    for imp in canonical_imports(report):
        hit = name_match(rule.patterns, imp.library)
        if hit is not None:
            findings.append(
                Finding(f"imports {imp.library} (forbidden: {hit})", file=path, symbol=imp.library)
            )
    if rule.no_cuda:
        findings.extend(_cuda_dependencies(ctx, path, rule.cuda_patterns))
    return findings


def _cuda_dependencies(ctx: AuditContext, root: str, patterns: tuple[str, ...]) -> list[Finding]:
    """CUDA libraries ``root`` depends on, directly, by stored name, or through shipped libraries."""
    findings: list[Finding] = []
    queue: deque[tuple[str, tuple[str, ...]]] = deque([(root, (root,))])
    seen = {root}
    while queue:
        path, chain = queue.popleft()
        report = ctx.libraries[path]
        assert report.host is not None
        via = "" if len(chain) == 1 else f" through {' -> '.join(chain)}"
        for imp in canonical_imports(report):
            hit = name_match(patterns, imp.library)
            if hit is not None:
                findings.append(
                    Finding(f"depends on CUDA library {imp.library}{via}", file=root, symbol=imp.library)
                )
        for stored in report.host.embedded_library_names:
            if name_match(patterns, stored) is not None:
                findings.append(
                    Finding(
                        f"loads CUDA library {stored} by name (dlopen/LoadLibrary){via}",
                        file=root,
                        symbol=stored,
                    )
                )
        for _imp, target in shipped_dependencies(ctx, path):
            if target not in seen and target in ctx.libraries:
                seen.add(target)
                queue.append((target, (*chain, target)))
    return findings


def run_required(ctx: AuditContext) -> list[CheckResult]:
    results: list[CheckResult] = []
    for rule in ctx.policy.required_imports:
        for path in _targets(ctx, rule, REQUIRED, results):
            report = ctx.libraries[path]
            assert report.host is not None
            findings: list[Finding] = []
            how: list[str] = []
            for pattern in rule.patterns:
                direct = [i.library for i in canonical_imports(report) if name_match((pattern,), i.library)]
                stored = (
                    [n for n in report.host.embedded_library_names if name_match((pattern,), n)]
                    if rule.dynamic_load
                    else []
                )
                if direct:
                    how.append(f"imports {direct[0]}")
                elif stored:
                    how.append(f"loads {stored[0]} by name")
                else:
                    missing = (
                        f"neither imports nor loads by name {pattern}"
                        if rule.dynamic_load
                        else f"does not import {pattern}"
                    )
                    findings.append(Finding(missing, file=path, symbol=pattern))
            results.append(
                verdict(
                    REQUIRED, f"required imports: {path} ({_label(rule)})", findings, "; ".join(how) or "ok"
                )
            )
    return results
