"""``cudaship doctor --env``: ``text`` (where the process was simulated, every finding by severity, the
verdict; with ``Style.details``, every import of every library with the file the loader picks and its
distribution), ``json`` (``render/schemas/doctor-env.schema.json``, version :data:`SCHEMA_VERSION`: every
import of every library with the file the loader picks, the rule that picked it and the distribution that owns
the file, so a script can answer "which libcudart does torch get" without parsing text) and ``markdown`` (a CI
job summary: the verdict, where it was simulated, the findings)."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from cudaship.checks.confirm import child_label
from cudaship.checks.environment import EnvReport, shown
from cudaship.records.findings import CheckResult, Severity
from cudaship.render.escape import markdown_cell as cell
from cudaship.render.jsonify import dumps
from cudaship.render.style import Renderer, Style
from cudaship.words import count

SCHEMA_VERSION = 1

_TITLES = {Severity.ERROR: "errors", Severity.WARNING: "warnings", Severity.NOTE: "notes"}


def settings_lines(report: EnvReport) -> list[str]:
    env, s = report.env, report.settings
    lines = [
        f"environment: {', '.join(env.sites)} ({env.os}, {count(len(env.distributions), 'distribution')}, "
        f"{count(len(env.libraries), 'native library')})"
    ]
    if s.os == "linux":
        if s.system_checked:
            cache = f"{s.ld_cache} ({count(s.cache_entries, 'entry')})" if s.ld_cache else "none"
            lines.append(
                f"loader: glibc search order; LD_LIBRARY_PATH: {':'.join(s.ld_library_path) or '(unset)'}; "
                f"cache: {cache}; this machine's system libraries searched and read"
            )
        else:
            lines.append(
                f"loader: glibc search order; LD_LIBRARY_PATH: {':'.join(s.ld_library_path) or '(unset)'}; "
                "system libraries not searched (known system, driver and Python libraries taken as present)"
            )
    else:
        dirs = ", ".join(shown(env, d) for d in s.dll_directories) or "none"
        path = "; PATH (not searched, reported on): " + ";".join(s.dll_path) if s.dll_path else ""
        lines.append(
            f"loader: Windows safe DLL search (own directory, os.add_dll_directory: {dirs}, System32){path}"
        )
    gpu = report.gpu
    if gpu.probe is not None and gpu.probe.gpus:
        caps = ", ".join(sorted({g.capability.capability for g in gpu.probe.gpus}))
        lines.append(
            f"GPUs: {len(gpu.probe.gpus)} (compute capability {caps}); "
            f"{count(len(gpu.checked), 'library')} with device code checked"
        )
    else:
        lines.append(f"GPUs: {gpu.note}")
    if report.confirm is not None:
        lines.append(confirm_line(report))
    return lines


def confirm_line(report: EnvReport) -> str:
    """The real loader's part in one line: children, and agreement per importer and DT_NEEDED."""
    c = report.confirm
    assert c is not None
    ok = sum(1 for child in c.children if child.ok)
    total = c.agree + c.disagree
    driver = {"stub": "libcuda.so.1 from the toolkit's stub", "absent": "no libcuda.so.1"}.get(c.driver or "")
    return (
        f"confirmed by loading: {count(len(c.children), 'import')} in fresh children of {c.python} "
        f"({ok} ok, {len(c.children) - ok} failed; timeout {c.timeout:g} s"
        + (f"; {driver}" if driver else "")
        + f"); loader agrees with the simulation on {c.agree} of {count(total, 'import')} "
        f"(importer and DT_NEEDED), disagrees on {c.disagree}; {c.not_compared} not compared "
        "(system libraries not read, or not matched)"
    )


def _finding(f: CheckResult) -> list[str]:
    out = [f"  {f.severity.value} [{f.name}] {f.reason}"]
    if f.subject.source:
        out.append(f"      source: {f.subject.source}")
    return out


def text(report: EnvReport, style: Style) -> str:
    details = style.details
    lines = settings_lines(report)
    if report.confirm is not None and report.confirm.ran_code:
        lines = [report.confirm.ran_code, *lines]
    for severity, title in _TITLES.items():
        found = [f for f in report.findings if f.severity is severity]
        if found:
            lines += ["", f"{title} ({len(found)}):"]
            for f in found:
                lines += _finding(f)
    if details:
        lines += ["", "imports (importer -> file the loader picks [rule] distribution):"]
        owners = {lib.path: lib.owner.label for lib in report.env.libraries}
        by_importer: dict[str, list[str]] = {}
        for e in report.graph.edges:
            if e.target is not None:
                how = e.how.value if e.how else "?"
                where = f"{shown(report.env, e.target)} [{how}] {owners.get(e.target, 'system')}"
            else:
                where = f"({e.provider} library, not read)" if e.provider else "NOT FOUND"
            by_importer.setdefault(e.importer, []).append(f"    {e.name} -> {where}")
        for importer in sorted(by_importer):  # canonical order (docs/json-schema.md), not the graph's
            lines.append(f"  {shown(report.env, importer)} ({owners.get(importer, 'system')})")
            lines += sorted(by_importer[importer])
    if details and report.confirm is not None:
        lines += ["", "children (each imports its module in a fresh interpreter):"]
        lines += [f"  {child_label(c)}" for c in report.confirm.children]
    lines += ["", verdict(report)]
    return "\n".join(lines) + "\n"


def verdict(report: EnvReport) -> str:
    counts = report.summary.by_severity()
    summary = ", ".join(
        count(counts[s], noun)
        for s, noun in ((Severity.ERROR, "error"), (Severity.WARNING, "warning"), (Severity.NOTE, "note"))
    )
    if counts[Severity.ERROR]:
        return f"WILL NOT LOAD: {summary}"
    return f"loads: {summary}"


def _json_finding(f: CheckResult) -> dict[str, Any]:
    out: dict[str, Any] = {"rule": f.name, "severity": f.severity.value, "message": f.reason}
    for key in (
        "file",
        "distribution",
        "library",
        "target",
        "target_distribution",
        "symbol",
        "version",
        "source",
    ):
        value = getattr(f.subject, key)
        if value is not None:
            out[key] = value
    return out


def _confirm(report: EnvReport) -> dict[str, Any]:
    c = report.confirm
    assert c is not None
    return {
        "python": c.python,
        "timeout": c.timeout,
        "driver": c.driver,
        "notes": list(c.notes),
        "agree": c.agree,
        "disagree": c.disagree,
        "not_compared": c.not_compared,
        "children": [
            {
                "module": child.module,
                "distribution": child.distribution,
                "before": list(child.before),
                "ok": child.ok,
                "message": child.message,
                "timed_out": child.timed_out,
                "seconds": child.seconds,
                "mapped": child.mapped,
                "compared": child.compared,
                "disagreed": child.disagreed,
            }
            for child in c.children
        ],
        "disagreements": [
            {
                "importer": d.importer,
                "name": d.name,
                "static": d.static,
                "static_how": d.static_how,
                "loader": d.loader,
                "module": d.module,
            }
            for d in c.disagreements
        ],
    }


def json(report: EnvReport, style: Style) -> str:
    env, s, gpu = report.env, report.settings, report.gpu
    owners = {lib.path: lib.owner.label for lib in env.libraries}
    loaded = {o.path: o for o in report.graph.loaded}
    imports: dict[str, list[dict[str, Any]]] = {}
    for e in report.graph.edges:
        imports.setdefault(e.importer, []).append(
            {
                "name": e.name,
                "kind": e.kind.value,
                "file": e.target,
                "distribution": owners.get(e.target) if e.target else None,
                "how": e.how.value if e.how else None,
                "provider": e.provider,
            }
        )
    doc = {
        "schema": SCHEMA_VERSION,
        "environment": {
            "sites": list(env.sites),
            "os": env.os,
            "distributions": [
                {"name": d.dist.name, "version": d.dist.version, "site": d.site} for d in env.distributions
            ],
        },
        "loader": {
            "os": s.os,
            "system_checked": s.system_checked,
            "ld_library_path": list(s.ld_library_path),
            "ld_cache": s.ld_cache,
            "ld_cache_entries": s.cache_entries,
            "dll_directories": list(s.dll_directories),
            "dll_path": list(s.dll_path),
        },
        "gpus": {
            "checked": gpu.probe is not None and bool(gpu.probe.gpus),
            "capabilities": sorted({g.capability.capability for g in gpu.probe.gpus}) if gpu.probe else [],
            "note": gpu.note,
        },
        "libraries": [
            {
                "path": lib.path,
                "distribution": lib.owner.label,
                "loaded": lib.path in loaded and loaded[lib.path].reachable,
                "error": lib.report.error,
                "imports": imports.get(lib.path, []),
            }
            for lib in env.libraries
        ],
        "findings": [_json_finding(f) for f in report.findings],
        **({"confirm": _confirm(report)} if report.confirm is not None else {}),
        "summary": {s.value: n for s, n in report.summary.by_severity().items()},
    }
    return dumps(doc, ascii=False)


def markdown(report: EnvReport, style: Style) -> str:
    lines = ["## cudaship doctor --env", "", f"**{verdict(report)}**", ""]
    lines += [f"- {line}" for line in settings_lines(report)]
    if report.findings:
        lines += ["", "| severity | rule | finding |", "|---|---|---|"]
        for f in report.findings:
            message = f.reason + (f" (source: {f.subject.source})" if f.subject.source else "")
            lines.append(f"| {f.severity.value} | {f.name} | {cell(message)} |")
    return "\n".join(lines) + "\n"


FORMATS: Mapping[str, Renderer[EnvReport]] = {"text": text, "json": json, "markdown": markdown}
