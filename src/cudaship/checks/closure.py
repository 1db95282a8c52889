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

import dataclasses
import posixpath
import re

from packaging.utils import canonicalize_name

from cudaship.analysis.loader import is_extension_module
from cudaship.checks.context import AuditContext, canonical_imports
from cudaship.checks.judgement import judge, vendored_copies
from cudaship.checks.policy import DEFAULT_CUDA_PATTERNS, name_match
from cudaship.checks.records import StaticImport
from cudaship.checks.resolve import Resolution, Via, resolve, via_counts
from cudaship.knowledge.libraries import identify
from cudaship.knowledge.system_libraries import LibraryFamily, family_member
from cudaship.knowledge.variants import numbered_siblings
from cudaship.providers.closure import wheel_extras
from cudaship.records.binary import FileFormat, Import, ImportKind
from cudaship.records.files import FileReport
from cudaship.records.findings import CheckResult, Finding, Status, failed, passed, verdict
from cudaship.records.judgement import Met
from cudaship.words import agree, count, cut_list, size

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
_PROVIDED = (
    Via.REQUIREMENT,
    Via.OPTIONAL,
    Via.PRELOADED,
    Via.RUNTIME,
    Via.BUILD,
    Via.ON_DEMAND,
    Via.LOADED,
)


#: resolutions that load only through a mechanism worth a warning of its own: (rule, check name prefix)
_CONDITIONAL = {
    Via.PACKAGE_PRELOAD: "package_preload",
    Via.HOST: "undeclared_host",
    Via.DISTRIBUTION: "distribution_library",
    Via.COMPUTED: "computed_path",
}


def run(ctx: AuditContext) -> list[CheckResult]:
    results: list[CheckResult] = []
    exports = ctx.exports
    notes: dict[str, list[str]] = {}
    copies = _copies(ctx)
    per_path: list[tuple[str, CheckResult]] = []
    unused_per_path: list[tuple[str, CheckResult]] = []
    #: (rule, cause) -> evidence: one result per cause, listing every library and import it concerns
    causes: dict[tuple[str, str], list[Finding]] = {}
    resolved_by_path: dict[str, list[tuple[Import, Resolution]]] = {}
    for path, report in sorted(ctx.libraries.items()):
        host = report.host
        assert host is not None
        findings: list[Finding] = []
        provided: list[Finding] = []
        resolved: list[tuple[Import, Resolution]] = []
        resolved_by_path[path] = resolved
        for imp in canonical_imports(report):
            res = resolve(ctx, path, report, imp)
            resolved.append((imp, res))
            judged = judge(res)
            ctx.static_imports.append(
                StaticImport(
                    path,
                    imp.library,
                    res.ok,
                    res.via.value,
                    res.target,
                    res.detail,
                    res.extra,
                    judged.met.value,
                    judged.certain,
                )
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
            rule = _CONDITIONAL.get(res.via)
            if res.via is Via.LOADED and res.note is not None:
                rule = "loaded_first"
            if rule is not None:
                cause = res.cause or res.detail
                causes.setdefault((rule, cause), []).append(
                    Finding(f"{imp.library}: {res.detail}", file=path, symbol=imp.library)
                )
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
        summary = via_counts((res.via for _imp, res in resolved), _via_count) or "no imports"
        name = f"closure: {path}"
        unmet = [res for _imp, res in resolved if not res.ok]
        if findings and unmet and len(unmet) == len(findings) and all(r.optional for r in unmet):
            # an optional library (loaded by name at run time, or behind an extra): its unmet needs are the
            # feature's, a note naming how to get them (issue 32, classes 2 and 3)
            per_path.append((path, dataclasses.replace(verdict(FAMILY, name, findings, ""), rule="optional")))
        elif findings:
            per_path.append((path, verdict(FAMILY, name, findings, "")))
        else:
            per_path.append(
                (path, passed(FAMILY, name, _resolve_reason(len(resolved), summary), tuple(provided)))
            )
        if ctx.policy.closure.unused_imports:
            shim = ctx.providers.shim(path)
            if shim is not None:
                results.append(
                    passed(
                        FAMILY,
                        f"closure: unused imports in {path}",
                        f"a loader shim: its {count(len(resolved), 'needed library')} "
                        f"{agree(len(resolved), 'exists', 'exist')} to be loaded ({shim})",
                    )
                )
                continue
            unused = _unused(path, report, resolved, exports)
            unused_per_path.append(
                (
                    path,
                    verdict(
                        FAMILY,
                        f"closure: unused imports in {path}",
                        unused,
                        _used_reason(len(resolved)),
                    ),
                )
            )
    kept = _merge_copies(per_path, copies)
    _follow_dependencies(ctx, per_path, resolved_by_path, kept, copies)
    families = _family_variants(ctx, resolved_by_path, kept)
    kept_unused = _merge_copies(unused_per_path, copies)
    shims = {r.name: r for r in results}
    results = []
    for path in sorted(ctx.libraries):
        for r in (kept.get(path), shims.get(f"closure: unused imports in {path}"), kept_unused.get(path)):
            if r is not None:
                results.append(r)
    results.extend(_cause_results(causes))
    results.extend(families)
    results.extend(_vendored(ctx))
    results.extend(_build_paths(ctx))
    results.extend(_required_extras(ctx))
    loaded = _loaded_by_name(ctx)
    if loaded is not None:
        results.append(loaded)
    if ctx.scan.dist.metadata.requires_dist:
        ctx.notes.append(_providers_line(ctx))
        # a provider's file that could not be read: one note each, naming it (never the end of the audit)
        ctx.notes.extend(f"provider left out: {line}" for line in ctx.providers.closure.unreadable)
    for note, libraries in notes.items():
        names = sorted(set(libraries))
        ctx.notes.append(f"{note}: {', '.join(names)}")  # a note has no evidence: every name, never cut
    return results


_CAUSE_TITLES = {
    "package_preload": "closure: preloaded by the package's Python code in",
    "undeclared_host": "closure: undeclared host package",
    "loaded_first": "closure: needs a sibling loaded first:",
    "distribution_library": "closure: needs the system library",
    "computed_path": "closure: library paths computed at run time by",
}


#: how a warning the static model cannot be sure of begins (issue 32: uncertain, naming `--load`)
_UNCERTAIN = "uncertain, `cudaship audit --load` runs the real loader"


def _cause_results(causes: dict[tuple[str, str], list[Finding]]) -> list[CheckResult]:
    """One failed check (a warning by default: the rule's severity) per cause, its evidence every library
    and import that depends on it (issue 21, class 9: one cause, reported once)."""
    out: list[CheckResult] = []
    for (rule, cause), evidence in sorted(causes.items()):
        files = sorted({f.file for f in evidence if f.file})
        shown = cut_list(files, 4, where="each in the evidence")
        first = evidence[0].message.split(": ", 1)[1]
        if rule == "computed_path":
            reason = (
                f"{_UNCERTAIN}: {count(len(evidence), 'import')} of {shown} "
                f"{agree(len(evidence), 'is', 'are')} off the search path, and {cause} decides at run time "
                f"where they are found: {first}"
            )
        elif rule == "package_preload":
            reason = (
                f"{_UNCERTAIN}: {count(len(evidence), 'import')} of {shown} found only because "
                f"the package's Python code loads them first: {first}"
            )
        elif rule == "loaded_first":
            reason = f"{_UNCERTAIN}: {first} (in {shown})"
        else:
            reason = f"{first} (in {shown})"
        out.append(failed(FAMILY, f"{_CAUSE_TITLES[rule]} {cause}", reason, evidence, rule=rule))
    return out


def _family_variants(
    ctx: AuditContext,
    resolved_by_path: dict[str, list[tuple[Import, Resolution]]],
    kept: dict[str, CheckResult],
) -> list[CheckResult]:
    """Variants per release of a system library family (torchcodec's ``libtorchcodec_core4.so`` ...
    ``core9.so``, each importing another major of FFmpeg's libavcodec: siblings that differ by a number,
    :func:`cudaship.knowledge.variants.numbered_siblings`, whose unmet imports are one family's libraries of
    different releases, data/distribution_libraries.toml ``[[family]]``). The package loads the first that
    loads; the user's system has one release. So each variant's unmet family imports are not its error (rule
    ``variant``, a note, in ``kept``), and the group is one warning naming the family, its packages and the
    releases the variants span: at least one of them must load (rule ``distribution_library``)."""
    groups: dict[str, list[str]] = {}
    for path, (group, _number) in sorted(numbered_siblings(ctx.libraries).items()):
        groups.setdefault(group, []).append(path)
    #: family name -> (the family, (group, its size), evidence, the releases spanned)
    by_family: dict[str, tuple[LibraryFamily, list[tuple[str, int]], list[Finding], set[str]]] = {}
    for group, members in sorted(groups.items()):
        #: member -> (family, the releases its unmet family imports name, those imports)
        needs: dict[str, tuple[LibraryFamily, set[str], list[str]]] = {}
        for path in members:
            unmet = [(imp, res) for imp, res in resolved_by_path.get(path, []) if not res.ok]
            found = [(imp, family_member(imp.library)) for imp, _res in unmet]
            fams = {f[0].name for _imp, f in found if f is not None}
            if len(fams) != 1:
                continue
            family = next(f[0] for _imp, f in found if f is not None)
            releases: set[str] | None = None
            for _imp, f in found:
                if f is not None:
                    own = set(family.releases_of(f[1], f[2]))
                    releases = own if releases is None else releases & own
            if any(f is None and not res.optional for (_imp, res), (_i, f) in zip(unmet, found, strict=True)):
                continue  # another unmet import, of a library needed at import: its error stands
            needs[path] = (family, releases or set(), [imp.library for imp, f in found if f is not None])
        names = {family.name for family, _r, _l in needs.values()}
        spans = {frozenset(r) for _f, r, _l in needs.values()}
        if len(needs) < 2 or len(names) != 1 or len(spans) < 2:
            continue
        family = next(iter(needs.values()))[0]
        order = [release for release, _majors in family.releases]
        spanned = sorted({r for _f, rs, _l in needs.values() for r in rs}, key=order.index)
        span = spanned[0] if len(spanned) == 1 else f"{spanned[0]}..{spanned[-1]}"
        evidence = []
        for path, (_f, releases, libs) in sorted(needs.items()):
            which = "/".join(sorted(releases, key=order.index)) or "an unknown release"
            line = f"the {family.name} {which} variant: needs {', '.join(libs)} from the system"
            evidence.append(Finding(line, file=path, symbol=libs[0]))
            result = kept.get(path)
            if result is not None and result.status is Status.FAIL and result.rule in (None, "optional"):
                kept[path] = dataclasses.replace(
                    result,
                    rule="variant",
                    reason=f"{result.reason} — {line}, one of {count(len(needs), 'variant')} {group} for "
                    f"{family.name} {span}: at least one must load (closure: needs the system library "
                    f"{family.name})",
                )
        found_family = by_family.setdefault(family.name, (family, [], [], set()))
        found_family[1].append((group, len(needs)))
        found_family[2].extend(evidence)
        found_family[3].update(spanned)
    out: list[CheckResult] = []
    for name, (family, grouped, evidence, spanned_all) in sorted(by_family.items()):
        order = [release for release, _majors in family.releases]
        listed = sorted(spanned_all, key=order.index)
        span = listed[0] if len(listed) == 1 else f"{listed[0]}..{listed[-1]}"
        n = max(size for _g, size in grouped)
        shown = ", ".join(g for g, _size in grouped)
        out.append(
            failed(
                FAMILY,
                f"closure: needs the system library {name}",
                f"at least one of {n} variants ({shown}) needs {name} {span} from the system: each imports "
                f"another release's libraries and the package loads the one that loads; install {name} "
                f"({family.packages})",
                evidence,
                rule="distribution_library",
            )
        )
    return out


def _follow_dependencies(
    ctx: AuditContext,
    per_path: list[tuple[str, CheckResult]],
    resolved_by_path: dict[str, list[tuple[Import, Resolution]]],
    kept: dict[str, CheckResult],
    copies: dict[str, str],
) -> None:
    """A library whose own imports resolve but which needs a shipped library that does not load does not load
    either (glibc loads every DT_NEEDED before the library; one that fails fails the whole dlopen). Its check
    fails with the rule ``dependency`` (a note: the error is the dependency's), naming the dependency; the
    failing library's own check lists its dependents (one finding per root cause, issue 21), and the
    dependents' :class:`StaticImport` of that dependency says it does not load (``ok`` false)."""
    own = {p for p, r in per_path if r.status is Status.FAIL}
    needs = {
        p: [(imp.library, res.target) for imp, res in resolved if res.via is Via.SHIPPED and res.target]
        for p, resolved in resolved_by_path.items()
    }
    #: dependent -> (the import, the shipped library it resolves to, the root library that fails)
    failing: dict[str, tuple[str, str, str]] = {}
    changed = True
    while changed:
        changed = False
        for p, deps in sorted(needs.items()):
            if p in own or p in failing:
                continue
            for library, target in deps:
                root = target if target in own else failing[target][2] if target in failing else None
                if root is not None:
                    failing[p] = (library, target, root)
                    changed = True
                    break
    if not failing:
        return
    by_root: dict[str, list[str]] = {}
    for p, (library, target, root) in sorted(failing.items()):
        first = kept.get(root) or kept.get(copies.get(root, root))
        cause = first.evidence[0].message if first is not None and first.evidence else "it does not load"
        via = f"{library} (shipped at {target}) does not load"
        why = f"{via}: {cause}" if target == root else f"{via}: it needs {root}, which does not load: {cause}"
        kept[p] = failed(
            FAMILY,
            f"closure: {p}",
            f"its imports resolve, but {why} (the error is reported under closure: {root})",
            [Finding(why, file=p, symbol=library)],
            rule="dependency",
        )
        by_root.setdefault(root, []).append(p)
        for i, si in enumerate(ctx.static_imports):
            if si.file == p and si.library == library:
                ctx.static_imports[i] = dataclasses.replace(
                    si,
                    ok=False,
                    via=Via.UNRESOLVED.value,
                    detail=f"{why} (a shipped dependency)",
                    met=Met.MISSING.value,
                )
    for root, dependents in by_root.items():
        key = root if root in kept else copies.get(root, root)
        result = kept.get(key)
        if result is None or result.status is not Status.FAIL:
            continue
        shown = cut_list(dependents, 4, where="each in the evidence")
        kept[key] = dataclasses.replace(
            result,
            reason=f"{result.reason}; so {shown} {'does' if len(dependents) == 1 else 'do'} not load either",
            evidence=result.evidence
            + tuple(
                Finding(f"{d} needs {root} and does not load either", file=d, symbol=failing[d][0])
                for d in dependents
            ),
        )


def _copies(ctx: AuditContext, *, modules: bool = True) -> dict[str, str]:
    """Installed path -> the first path of its group of copies: the same bytes (RECORD's digest), the same
    SONAME in the same directory (a library under several names), or (``modules``) the same extension module
    built for several Python ABIs (``m.cpython-311-...so``, ``m.cpython-312-...so``) in the same directory."""
    parent: dict[str, str] = {p: p for p in ctx.libraries}

    def find(p: str) -> str:
        while parent[p] != p:
            parent[p] = parent[parent[p]]
            p = parent[p]
        return p

    def union(a: str, b: str) -> None:
        ra, rb = find(a), find(b)
        if ra != rb:
            parent[max(ra, rb)] = min(ra, rb)

    digests = {e.path: (e.algorithm, e.digest) for e in ctx.scan.dist.record if e.digest}
    keys: dict[tuple[str, ...], str] = {}
    member_of = {v: k for k, v in ctx.installed.items()}
    for path, report in sorted(ctx.libraries.items()):
        assert report.host is not None
        directory = posixpath.dirname(path)
        own: list[tuple[str, ...]] = []
        digest = digests.get(member_of.get(path, path))
        if digest is not None and digest[1]:
            own.append(("digest", str(digest[0]), str(digest[1])))
        if report.host.soname:
            own.append(("soname", directory, report.host.soname))
        if modules and is_extension_module(path, report.host.exports):
            own.append(("module", directory, posixpath.basename(path).split(".", 1)[0]))
        for key in own:
            first = keys.setdefault(key, path)
            union(first, path)
    return {p: find(p) for p in parent}


def copy_groups(ctx: AuditContext) -> tuple[tuple[str, ...], ...]:
    """The libraries the wheel ships under several names (a wheel cannot hold symlinks: ``libfoo.so``,
    ``libfoo.so.0``, ``libfoo.so.0.1.2`` with the same bytes, or the same SONAME in one directory): one
    group per library, the copy a process loads first (the file named by its SONAME, the name its
    dependents need), then the others in path order. The grouping :func:`_merge_copies` reports by, and the
    one ``audit --load`` loads once by (``WheelAudit.copies``; issue 32, class 9)."""
    groups: dict[str, list[str]] = {}
    for path, first in _copies(ctx, modules=False).items():
        groups.setdefault(first, []).append(path)

    def order(path: str) -> tuple[bool, str]:
        host = ctx.libraries[path].host
        return (not (host is not None and host.soname == posixpath.basename(path)), path)

    return tuple(sorted(tuple(sorted(g, key=order)) for g in groups.values() if len(g) > 1))


def _merge_copies(items: list[tuple[str, CheckResult]], copies: dict[str, str]) -> dict[str, CheckResult]:
    """Path -> its check, where the checks of copies of one library with the same outcome become one check
    naming every copy, kept under the first copy's path: failures with the same findings (issue 21, class 9),
    and passes with the same reason (one line per library in a report, not one per copy); unlike results
    stay as they are."""
    groups: dict[tuple[str, str, tuple[str, ...]], list[tuple[str, CheckResult]]] = {}
    out: dict[str, CheckResult] = {}
    for path, result in items:
        if result.status is Status.FAIL:
            same: tuple[str, ...] = tuple(sorted(f.message for f in result.evidence))
        elif result.status is Status.PASS:
            same = (result.reason,)
        else:
            out[path] = result
            continue
        key = (copies.get(path, path), result.status.value, same)
        groups.setdefault(key, []).append((path, result))
    for members in groups.values():
        first_path, first = members[0]
        others = [p for p, _r in members[1:]]
        if not others:
            out[first_path] = first
            continue
        what = "findings" if first.status is Status.FAIL else "result"
        evidence = list(first.evidence) + [
            Finding(f"a copy of {first_path} (the same bytes, SONAME or module): the same {what}", file=p)
            for p in others
        ]
        out[first_path] = dataclasses.replace(
            first,
            reason=f"{first.reason} — the same in {count(len(others), 'copy')}: " + ", ".join(others),
            evidence=tuple(evidence),
        )
    return out


def _vendored(ctx: AuditContext) -> list[CheckResult]:
    """A shipped copy of a library an NVIDIA wheel provides (torchvision's libcudart and libnvjpeg): a
    warning naming the wheel and the bytes depending on it would save; the same rule ``cudaship repair``
    removes copies by (:func:`cudaship.checks.judgement.vendored_copies`), so the audit says what the repair
    does (issue 32, class 11)."""
    total = ctx.scan.uncompressed_size or 0
    out = []
    for copy in vendored_copies(ctx):
        p = copy.provision
        share = f", {100 * copy.size / total:.1f}% of the wheel's uncompressed size" if total else ""
        out.append(
            failed(
                FAMILY,
                f"closure: vendored copy of {p.library} in {copy.member}",
                f"{copy.member} is a copy of {p.library}, which the NVIDIA wheel {p.project} provides "
                f"({p.directory}): depending on it saves {copy.size:,} bytes uncompressed{share} "
                f"({copy.compressed_size:,} compressed); `cudaship repair` removes the copy and declares "
                f"{p.requirement_name}",
                [Finding(f"a copy of {p.library} ({p.project})", file=copy.path, symbol=p.library)],
                rule="vendored_nvidia",
            )
        )
    return out


def _build_paths(ctx: AuditContext) -> list[CheckResult]:
    """RPATH / RUNPATH / LC_RPATH entries that are not relative to the library (``$ORIGIN``,
    ``@loader_path``): an absolute build path (``/home/runner/work/...``, ``/usr/local/cuda-12.8/lib64``)
    makes the loader search that directory on the user's machine, and a relative one the working
    directory. auditwheel removes them. One warning per entry, naming the libraries that carry it."""
    entries: dict[str, list[Finding]] = {}
    for path, report in sorted(ctx.libraries.items()):
        host = report.host
        assert host is not None
        if report.format is FileFormat.ELF:
            tagged = [("DT_RUNPATH", e) for e in host.runpath] + [("DT_RPATH", e) for e in host.rpath]
        elif report.format is FileFormat.MACHO:
            tagged = [("LC_RPATH", e) for e in host.rpath]
        else:
            continue
        for tag, entry in tagged:
            for raw in entry.split(":") if tag != "LC_RPATH" else [entry]:
                if not raw or raw.startswith(("$ORIGIN", "${ORIGIN}", "@loader_path", "@executable_path")):
                    continue
                if tag == "DT_RPATH" and host.runpath:
                    continue  # ignored by glibc when DT_RUNPATH is present
                kind = "absolute" if raw.startswith("/") else "relative to the working directory"
                entries.setdefault(raw, []).append(
                    Finding(f"{tag} entry {raw} ({kind}) in {path}", file=path, symbol=raw)
                )
    out = []
    for raw, evidence in sorted(entries.items()):
        files = sorted({f.file for f in evidence if f.file})
        shown = cut_list(files, 4, where="each in the evidence")
        what = "an absolute path" if raw.startswith("/") else "a path relative to the working directory"
        out.append(
            failed(
                FAMILY,
                f"closure: search path entry {raw}",
                f"{shown} search {raw}, {what} not relative to the library ($ORIGIN): the loader searches "
                "that directory on the user's machine (a build path; auditwheel removes such entries)",
                evidence,
                rule="build_path",
            )
        )
    return out


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
        f"{count(len(evidence), 'NVIDIA library name')} stored for dlopen/LoadLibrary"
        + (f", {len(missing)} installed by nothing declared" if missing else ", each provided"),
        tuple(evidence),
    )


#: How a resolve summary says where imports come from, where the bare word reads as something else ("3 build"
#: reads like a build path): the rest say it as it is (``2 shipped``, ``6 preloaded``, ``1 on-demand``).
_VIA_PHRASE = {
    Via.BUILD.value: "from another build of a requirement",
    Via.SYSTEM.value: "from the system",
    Via.DRIVER.value: "from the driver",
    Via.REQUIREMENT.value: "from requirements",
}


def _via_count(n: int, via: Via) -> str:
    """``3 from another build of a requirement``, ``7 from the system``, ``2 shipped``."""
    return f"{n} {_VIA_PHRASE.get(via.value, via.value)}"


def _resolve_reason(n: int, summary: str) -> str:
    """``1 import resolves (1 from the system)``, ``4 imports resolve (3 from another build of a requirement,
    1 from the system)``."""
    return f"{count(n, 'import')} {agree(n, 'resolves', 'resolve')} ({summary})"


def _used_reason(n: int) -> str:
    """``the needed library is used`` / ``every needed library of 4 is used``."""
    return "the one needed library is used" if n == 1 else f"every needed library of {n} is used"


def _providers_line(ctx: AuditContext) -> str:
    p = ctx.providers
    c = p.closure
    fetched = p.fetched
    cost = (
        f"{count(fetched.requests, 'request')}, {size(fetched.bytes)} fetched, "
        f"{fetched.cache_hits} from the cache"
        if fetched.requests or fetched.cache_hits
        else "no network"
    )
    sources = ", ".join(c.sources) or "no source"
    line = f"providers: {count(len(c.reached), 'distribution')} from {sources} ({cost})"
    # a note has no evidence to hold the rest: every provider note is listed, never "(and N more)"
    return "; ".join([line, *p.notes])


def _extra_problem(ctx: AuditContext, res: Resolution) -> str | None:
    """With ``required_extras`` set, a provider that only an unlisted extra installs is a failure."""
    wanted = ctx.policy.closure.required_extras
    if wanted is None or res.via not in (Via.OPTIONAL, Via.PRELOADED, Via.RUNTIME, Via.PACKAGE_PRELOAD):
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
