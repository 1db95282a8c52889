"""collisions: no two shipped files whose paths differ only by case (one file on Windows and macOS); no two
import libraries with one name (they overwrite each other in a build tree); SONAME equals the file name where
the policy asks."""

from __future__ import annotations

import posixpath
from collections.abc import Callable, Iterable

from cudaship.checks.context import AuditContext
from cudaship.checks.policy import any_match
from cudaship.records.binary import FileFormat
from cudaship.records.findings import CheckResult, Finding, verdict
from cudaship.words import count

FAMILY = "collisions"


def _shared(paths: Iterable[str], key: Callable[[str], str]) -> list[list[str]]:
    """The paths that share a key, in groups of two or more (groups and paths in first-seen order)."""
    by_key: dict[str, list[str]] = {}
    for path in paths:
        by_key.setdefault(key(path), []).append(path)
    return [group for group in by_key.values() if len(group) > 1]


def run(ctx: AuditContext) -> list[CheckResult]:
    results: list[CheckResult] = []
    findings = [
        Finding(f"paths differ only by case: {', '.join(paths)}", file=paths[0])
        for paths in _shared(ctx.files, str.lower)
    ]
    results.append(
        verdict(
            FAMILY,
            "collisions: paths differing only by case",
            findings,
            f"{count(len(ctx.files), 'path')}, all distinct ignoring case",
        )
    )

    libs = [path for path in ctx.files if path.lower().endswith(".lib")]
    findings = [
        Finding(
            f"import library name {posixpath.basename(paths[0])} is used {count(len(paths), 'time')}: "
            + ", ".join(paths),
            file=paths[1],
        )
        for paths in _shared(libs, lambda path: posixpath.basename(path).lower())
    ]
    results.append(
        verdict(
            FAMILY,
            "collisions: import library names",
            findings,
            f"{count(len(libs), 'import library', 'import libraries')}, names distinct",
        )
    )

    patterns = ctx.policy.collisions.soname_matches_filename
    if patterns:
        findings = []
        checked = 0
        for path, report in sorted(ctx.libraries.items()):
            if report.format is not FileFormat.ELF or not any_match(patterns, path):
                continue
            checked += 1
            assert report.host is not None
            base = posixpath.basename(path)
            if report.host.soname is None:
                findings.append(Finding(f"{path} has no SONAME", file=path))
            elif report.host.soname != base:
                findings.append(
                    Finding(
                        f"SONAME {report.host.soname} differs from the file name {base}",
                        file=path,
                        symbol=report.host.soname,
                    )
                )
        reason = (
            f"{count(checked, 'library')}: SONAME equals the file name"
            if checked
            else f"no ELF library matches {', '.join(patterns)}"
        )
        results.append(verdict(FAMILY, "collisions: SONAME equals file name", findings, reason))
    return results
