"""``doctor --env`` as text: where the process was simulated, every finding by severity, the verdict; with
``details``, every import of every library with the file the loader picks and its distribution."""

from __future__ import annotations

from cudaship.checks.confirm import child_label
from cudaship.checks.environment import EnvReport, shown
from cudaship.records.findings import CheckResult, Severity
from cudaship.words import count

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


def render_text(report: EnvReport, *, details: bool = False) -> str:
    lines = settings_lines(report)
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
        for importer, rows in by_importer.items():
            lines.append(f"  {shown(report.env, importer)} ({owners.get(importer, 'system')})")
            lines += rows
    if details and report.confirm is not None:
        lines += ["", "children (each imports its module in a fresh interpreter):"]
        lines += [f"  {child_label(c)}" for c in report.confirm.children]
    lines += ["", verdict(report)]
    return "\n".join(lines) + "\n"


def verdict(report: EnvReport) -> str:
    counts = {s: sum(1 for f in report.findings if f.severity is s) for s in Severity}
    summary = ", ".join(
        count(counts[s], noun)
        for s, noun in ((Severity.ERROR, "error"), (Severity.WARNING, "warning"), (Severity.NOTE, "note"))
    )
    if counts[Severity.ERROR]:
        return f"WILL NOT LOAD: {summary}"
    return f"loads: {summary}"
