"""ships: required files and globs are present; an import library ships if and only if its DLL does, and
names that DLL (read from the COFF import library itself)."""

from __future__ import annotations

import posixpath

from cudaship.checks.context import AuditContext, canonical_imports
from cudaship.checks.policy import glob_match
from cudaship.records.findings import CheckResult, Finding, failed, passed, verdict
from cudaship.words import count, cut_list

FAMILY = "ships"


def run(ctx: AuditContext) -> list[CheckResult]:
    policy = ctx.policy.ships
    results: list[CheckResult] = []
    files = ctx.files
    for pattern in policy.required:
        matches = [f for f in files if glob_match(pattern, f)]
        name = f"ships: {pattern}"
        if matches:
            shown = (
                matches[0] if len(matches) == 1 else f"{count(len(matches), 'file')}: {cut_list(matches, 1)}"
            )
            evidence = tuple(Finding(f"matches {pattern}", file=m) for m in matches)  # the rest of the list
            results.append(passed(FAMILY, name, f"shipped: {shown}", evidence))
        else:
            results.append(
                failed(
                    FAMILY,
                    name,
                    f"{pattern} is not in the wheel",
                    [Finding("required, not shipped", file=pattern)],
                )
            )
    results.extend(_import_library_pairs(ctx))
    return results


def _pairs(ctx: AuditContext) -> list[tuple[str, str]]:
    pairs = list(ctx.policy.ships.import_libraries)
    listed = {lib for lib, _ in pairs}
    if ctx.policy.ships.pair_siblings:
        for lib in sorted(ctx.import_libraries):
            if lib in listed:
                continue
            stem = lib[: -len(".lib")] if lib.lower().endswith(".lib") else lib
            pairs.append((lib, stem + ".dll"))
    return pairs


def _import_library_pairs(ctx: AuditContext) -> list[CheckResult]:
    results: list[CheckResult] = []
    files_lower = {f.lower(): f for f in ctx.files}
    for lib, dll in _pairs(ctx):
        name = f"ships: import library {lib}"
        lib_present = lib.lower() in files_lower
        dll_present = dll.lower() in files_lower
        if not lib_present and not dll_present:
            results.append(passed(FAMILY, name, f"neither {lib} nor {dll} ships"))
            continue
        if lib_present and not dll_present:
            results.append(
                failed(FAMILY, name, f"{lib} ships without its DLL {dll}", [Finding("DLL missing", file=dll)])
            )
            continue
        if dll_present and not lib_present:
            results.append(
                failed(
                    FAMILY,
                    name,
                    f"{dll} ships without its import library {lib}",
                    [Finding("import library missing", file=lib)],
                )
            )
            continue
        report = ctx.import_libraries.get(files_lower[lib.lower()])
        if report is None or report.host is None:
            results.append(
                failed(
                    FAMILY,
                    name,
                    f"{lib} is not a readable COFF import library",
                    [Finding("unreadable", file=lib)],
                )
            )
            continue
        dlls = [i.library for i in canonical_imports(report)]
        want = posixpath.basename(dll).lower()
        findings = []
        if want not in {d.lower() for d in dlls}:
            findings.append(
                Finding(
                    f"{lib} names {', '.join(dlls) or 'no DLL'}, not {posixpath.basename(dll)}",
                    file=lib,
                    symbol=", ".join(dlls),
                )
            )
        results.append(
            verdict(
                FAMILY,
                name,
                findings,
                f"{lib} and {dll} ship together; the import library names {posixpath.basename(dll)}",
            )
        )
    return results
