"""ownership: each component (named by sentinel symbols) is defined by exactly one shipped library, whose file
name starts with the component's owner. A partly present component fails; an owner defining none fails.

A sentinel is a symbol name, or a glob (``*``, ``?``, ``[``) over exported symbol names.
"""

from __future__ import annotations

import posixpath
import re

from cudaship.checks.context import AuditContext
from cudaship.checks.globs import compile_glob
from cudaship.records.findings import CheckResult, Finding, verdict
from cudaship.words import agree, count

FAMILY = "ownership"
_GLOB = re.compile(r"[*?\[]")


def _definers(exports: dict[str, frozenset[str]], sentinel: str) -> list[str]:
    if _GLOB.search(sentinel):
        glob = compile_glob(sentinel, flat=True)  # compiled when the policy was loaded
        return [p for p, names in exports.items() if any(glob.match(n) for n in names)]
    return [p for p, names in exports.items() if sentinel in names]


def _stem(path: str) -> str:
    base = posixpath.basename(path)
    return base[3:] if base.startswith("lib") else base


def run(ctx: AuditContext) -> list[CheckResult]:
    exports = ctx.exports
    results: list[CheckResult] = []
    for component in ctx.policy.components:
        findings: list[Finding] = []
        defined: dict[str, list[str]] = {s: _definers(exports, s) for s in component.sentinels}
        owners = {p for paths in defined.values() for p in paths if _stem(p).startswith(component.owner)}
        for sentinel, paths in defined.items():
            if len(paths) > 1:
                findings.append(
                    Finding(
                        f"{sentinel} is defined by {count(len(paths), 'library')}: {', '.join(paths)}",
                        file=paths[1],
                        symbol=sentinel,
                    )
                )
            for p in paths:
                if not _stem(p).startswith(component.owner):
                    findings.append(
                        Finding(
                            f"{sentinel} is defined by {p}, whose name does not start with {component.owner}",
                            file=p,
                            symbol=sentinel,
                        )
                    )
        present = [s for s, paths in defined.items() if paths]
        missing = [s for s, paths in defined.items() if not paths]
        if present and missing:
            for s in missing:
                findings.append(Finding(f"partly present: {s} is defined by no shipped library", symbol=s))
        if not present:
            owner_files = [p for p in exports if _stem(p).startswith(component.owner)]
            where = ", ".join(owner_files) if owner_files else f"no shipped library named {component.owner}*"
            findings.append(
                Finding(
                    f"owner {component.owner} defines none of its sentinels ({where})",
                    symbol=component.sentinels[0],
                )
            )
        owner_list = ", ".join(sorted(owners)) or component.owner
        results.append(
            verdict(
                FAMILY,
                f"ownership: {component.name}",
                findings,
                f"{count(len(component.sentinels), 'sentinel')}, "
                f"{agree(len(component.sentinels), 'defined once', 'each defined once')}, by {owner_list}",
            )
        )
    return results
