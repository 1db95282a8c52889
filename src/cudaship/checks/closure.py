"""closure: every import of every shipped library resolves (see :mod:`cudaship.checks.resolve`), every symbol
a
library imports from a sibling library is exported by it (on Windows a missing export is "procedure entry
point
not found" at load time), and no needed library goes unused.

Unused imports: a PE import that takes no symbol; an ELF DT_NEEDED library none of whose symbols the library
uses. For a shipped ELF library that is decided from its exports; for an NVIDIA library that is not shipped,
from
symbol versions and NVIDIA's naming (every C symbol of libcurand starts with ``curand``, of libcudart with
``cuda``, of the driver with ``cu``); other unshipped libraries (the C library, ...) are not judged.
"""

from __future__ import annotations

import posixpath
import re

from packaging.utils import canonicalize_name

from cudaship.binary.records import FileFormat, Import, ImportKind
from cudaship.checks.context import AuditContext
from cudaship.checks.policy import DEFAULT_CUDA_PATTERNS, name_match
from cudaship.checks.records import CheckResult, Finding, StaticImport, passed, verdict
from cudaship.checks.resolve import Resolution, Via, resolve
from cudaship.inspection.records import FileReport
from cudaship.knowledge.libraries import identify
from cudaship.providers.closure import wheel_extras

FAMILY = "closure"

_SONAME_STEM = re.compile(
    r"^(?:lib)?([A-Za-z][A-Za-z_]*?)(?:64)?(?:_\d+)*(?:\.so.*|\.dll|\.dylib)?$", re.IGNORECASE
)
_SPECIAL_PREFIXES = {
    "cudart": ("cuda", "__cuda"),
    "cuda": ("cu",),
    "nvcuda": ("cu",),
    "nvtoolsext": ("nvtx",),
}


def _nvidia_prefixes(library: str) -> tuple[str, ...] | None:
    # only NVIDIA's own libraries: libtorch_cuda.so matches "*cuda*" but is torch's, with C++ symbols
    if name_match(DEFAULT_CUDA_PATTERNS, library) is None or identify(library) is None:
        return None
    m = _SONAME_STEM.match(posixpath.basename(library))
    if m is None:
        return None
    stem = m.group(1).lower()
    special: tuple[str, ...] | None = _SPECIAL_PREFIXES.get(stem)
    return special if special is not None else (stem,)


_LINKER_SYMBOLS = frozenset({"_init", "_fini", "_edata", "_end", "__bss_start"})
_PROVIDED = (Via.REQUIREMENT, Via.OPTIONAL, Via.PRELOADED, Via.RUNTIME, Via.BUILD, Via.ON_DEMAND)


def run(ctx: AuditContext) -> list[CheckResult]:
    results: list[CheckResult] = []
    exports = ctx.exports
    notes: dict[str, list[str]] = {}
    for path, report in sorted(ctx.libraries.items()):
        host = report.host
        assert host is not None
        findings: list[Finding] = []
        provided: list[Finding] = []
        resolved: list[tuple[Import, Resolution]] = []
        for imp in host.imports:
            res = resolve(ctx, path, report, imp)
            resolved.append((imp, res))
            ctx.static_imports.append(
                StaticImport(path, imp.library, res.ok, res.via.value, res.target, res.detail)
            )
            if not res.ok:
                findings.append(
                    Finding(f"{imp.library} does not resolve: {res.detail}", file=path, symbol=imp.library)
                )
                continue
            problem = _extra_problem(ctx, res)
            if problem is not None:
                findings.append(Finding(f"{imp.library}: {problem}", file=path, symbol=imp.library))
                continue
            if res.via in _PROVIDED:
                provided.append(
                    Finding(
                        res.detail + (f" ({res.note})" if res.note else ""), file=path, symbol=imp.library
                    )
                )
                if res.note:
                    notes.setdefault(res.note, []).append(imp.library)
            elif res.via is Via.SHIPPED and res.target is not None and ctx.policy.closure.exports:
                findings.extend(_missing_exports(path, imp, res.target, exports.get(res.target, frozenset())))
        counts: dict[str, int] = {}
        for _imp, res in resolved:
            counts[res.via.value] = counts.get(res.via.value, 0) + 1
        summary = ", ".join(f"{n} {via}" for via, n in counts.items()) or "no imports"
        name = f"closure: {path}"
        if findings:
            results.append(verdict(FAMILY, name, findings, ""))
        else:
            results.append(
                passed(FAMILY, name, f"{len(resolved)} imports resolve ({summary})", tuple(provided))
            )
        if ctx.policy.closure.unused_imports:
            shim = ctx.providers.shim(path)
            if shim is not None:
                results.append(
                    passed(
                        FAMILY,
                        f"closure: unused imports in {path}",
                        f"a loader shim: its {len(resolved)} needed libraries exist to be loaded ({shim})",
                    )
                )
                continue
            unused = _unused(path, report, resolved, exports)
            results.append(
                verdict(
                    FAMILY,
                    f"closure: unused imports in {path}",
                    unused,
                    f"every needed library of {len(resolved)} is used",
                )
            )
    results.extend(_required_extras(ctx))
    loaded = _loaded_by_name(ctx)
    if loaded is not None:
        results.append(loaded)
    if ctx.scan.dist.metadata.requires_dist:
        ctx.notes.append(_providers_line(ctx))
    for note, libraries in notes.items():
        names = sorted(set(libraries))
        shown = ", ".join(names[:6]) + (f" and {len(names) - 6} more" if len(names) > 6 else "")
        ctx.notes.append(f"{note}: {shown}")
    return results


def _loaded_by_name(ctx: AuditContext) -> CheckResult | None:
    """NVIDIA libraries a shipped binary loads by a stored name (dlopen / LoadLibrary): where each comes from.

    Informative: a load by name is usually a fallback (another CUDA major's name) or an optional feature, so
    one nothing provides is said in the evidence ("no requirement installs it"), not a failure."""
    evidence: list[Finding] = []
    missing: set[str] = set()
    for path, report in sorted(ctx.libraries.items()):
        assert report.host is not None
        imported = {i.library.lower() for i in report.host.imports}
        for stored in report.host.embedded_library_names:
            lib = identify(stored)
            if lib is None or lib.driver or stored.lower() in imported:
                continue
            base = posixpath.basename(stored)
            shipped = ctx.by_name.get(base.lower())
            provided = ctx.providers.named(base)
            if shipped:
                where = f"shipped at {shipped[0]}"
            elif provided is not None:
                where = f"{provided.reached.label()} at {provided.path}"
            else:
                missing.add(base)
                where = "no requirement installs it: that load fails unless it is installed otherwise"
            evidence.append(
                Finding(f"{base} loaded by name (dlopen/LoadLibrary) ← {where}", file=path, symbol=base)
            )
    if not evidence:
        return None
    return passed(
        FAMILY,
        "closure: libraries loaded by name",
        f"{len(evidence)} NVIDIA library names stored for dlopen/LoadLibrary"
        + (f", {len(missing)} installed by nothing declared" if missing else ", each provided"),
        tuple(evidence),
    )


def _providers_line(ctx: AuditContext) -> str:
    p = ctx.providers
    c = p.closure
    fetched = p.fetched
    cost = (
        f"{fetched.requests} requests, {fetched.bytes / 1024:.0f} KiB fetched, "
        f"{fetched.cache_hits} from the cache"
        if fetched.requests or fetched.cache_hits
        else "no network"
    )
    line = f"providers: {len(c.reached)} distributions from {', '.join(c.sources) or 'no source'} ({cost})"
    extra = list(p.notes)
    if extra:
        line += "; " + "; ".join(extra[:3]) + (f" (and {len(extra) - 3} more)" if len(extra) > 3 else "")
    return line


def _extra_problem(ctx: AuditContext, res: Resolution) -> str | None:
    """With ``required_extras`` set, a provider that only an unlisted extra installs is a failure."""
    wanted = ctx.policy.closure.required_extras
    if wanted is None or res.via not in (Via.OPTIONAL, Via.PRELOADED, Via.RUNTIME):
        return None
    extra = canonicalize_name(res.extra) if res.extra else None
    if extra is None or extra in {canonicalize_name(e) for e in wanted}:
        return None
    listed = ", ".join(wanted) if wanted else "none"
    return (
        f"provided only when installed as {ctx.scan.dist.metadata.name}[{extra}] ({res.detail}); "
        f"the policy's required extras: {listed}"
    )


def _required_extras(ctx: AuditContext) -> list[CheckResult]:
    wanted = ctx.policy.closure.required_extras
    if not wanted:
        return []
    meta = ctx.scan.dist.metadata
    offered = set(wheel_extras(meta.requires_dist))
    findings = [
        Finding(f"the policy requires the extra {e!r}, which {meta.name} does not offer", requirement=e)
        for e in wanted
        if canonicalize_name(e) not in offered
    ]
    return [
        verdict(
            FAMILY,
            "closure: required extras",
            findings,
            f"offers the extras the policy requires: {', '.join(wanted)}",
        )
    ]


def _missing_exports(path: str, imp: Import, target: str, exported: frozenset[str]) -> list[Finding]:
    findings = []
    for sym in imp.symbols:
        if sym.name is None or sym.name in exported:
            continue
        findings.append(
            Finding(
                f"imports {sym.name} from {imp.library}, which {target} does not export"
                + (" (procedure entry point not found)" if target.lower().endswith((".dll", ".pyd")) else ""),
                file=path,
                symbol=sym.name,
            )
        )
    return findings


def _unused(
    path: str,
    report: FileReport,
    resolved: list[tuple[Import, Resolution]],
    exports: dict[str, frozenset[str]],
) -> list[Finding]:
    host = report.host
    assert host is not None
    findings: list[Finding] = []
    if report.format is FileFormat.PE:
        for imp, _res in resolved:
            if imp.kind in (ImportKind.IMPORT, ImportKind.DELAY) and not imp.symbols:
                findings.append(
                    Finding(
                        f"imports {imp.library} but takes no symbol from it", file=path, symbol=imp.library
                    )
                )
        return findings
    if report.format is not FileFormat.ELF:
        return findings
    undefined = [s for s in host.undefined_symbols if s.name]
    if not (set(host.exports) - _LINKER_SYMBOLS):
        return findings  # a loader shim (torch's libtorch_global_deps.so): its DT_NEEDED exist to be loaded
    for imp, res in resolved:
        if imp.kind is not ImportKind.NEEDED or imp.symbols:
            continue
        base = posixpath.basename(imp.library)
        if any(s.version and s.version == base for s in host.undefined_symbols):
            continue
        if res.via is Via.SHIPPED and res.target is not None:
            provided = exports.get(res.target, frozenset())
            if not any(s.name in provided for s in undefined):
                findings.append(
                    Finding(
                        f"DT_NEEDED {imp.library}: none of its exports is used", file=path, symbol=imp.library
                    )
                )
            continue
        prefixes = _nvidia_prefixes(imp.library)
        if prefixes is None:
            continue
        lowered = tuple(p.lower() for p in prefixes)
        if not any(s.name and s.name.lower().startswith(lowered) for s in undefined):
            findings.append(
                Finding(
                    f"DT_NEEDED {imp.library}: no {'/'.join(prefixes)}* symbol is used from it",
                    file=path,
                    symbol=imp.library,
                )
            )
    return findings
