"""``cudaship repair --format markdown``: one section per wheel, a table of the changes."""

from __future__ import annotations

from cudaship.repair.records import RepairReport, WheelRepair


def _cell(text: str) -> str:
    return text.replace("|", "\\|").replace("\n", " ")


def _wheel(w: WheelRepair, dry_run: bool) -> list[str]:
    if w.plan is None:
        return [f"## `{_cell(w.path)}`", "", f"**error:** {_cell(w.error or '')}", ""]
    p = w.plan
    lines = [f"## `{_cell(p.filename)}`", "", f"Platform {p.os}; CUDA train {_cell(p.train)}.", ""]
    rows: list[tuple[str, str, str]] = []
    for r in p.removed:
        rows.append(
            (
                "removed",
                f"`{r.member}`",
                f"{r.library}, {r.size:,} bytes: {r.project} installs it in {r.directory}",
            )
        )
    for k in p.kept:
        rows.append(("kept", f"`{k.member}`", f"{k.library}: {k.reason}"))
    for e in p.edits:
        for old, new in e.replace_needed:
            rows.append(("DT_NEEDED", f"`{e.member}`", f"`{old}` → `{new}`"))
        for name in e.remove_needed:
            rows.append(("DT_NEEDED", f"`{e.member}`", f"`{name}` removed (none of its symbols is used)"))
        if e.runpath_changed:
            before = ":".join(e.runpath_before) or "(none)"
            after = ":".join(e.runpath_after) or "(none)"
            dropped = "".join(f"; dropped `{d}`: {why}" for d, why in e.dropped)
            kind = "RPATH" if e.was_rpath else "RUNPATH"
            rows.append((kind, f"`{e.member}`", f"`{before}` → `{after}`{dropped}"))
    for pe in p.pe_edits:
        for old, new in pe.replace_imports:
            rows.append(("import", f"`{pe.member}`", f"`{old}` → `{new}` (in place)"))
    for b in p.bootstraps:
        rows.append(("bootstrap", f"`{b.member}`", "os.add_dll_directory: " + ", ".join(b.directories)))
    for q in p.requirements:
        rows.append(("requires", f"`{q.text}`", f"for {', '.join(q.libraries)}: {q.why}"))
    if rows:
        lines += ["| change | where | what |", "|---|---|---|"]
        lines += [f"| {a} | {_cell(b)} | {_cell(c)} |" for a, b, c in rows]
        lines.append("")
    else:
        lines += ["Nothing to change.", ""]
    lines += [f"- note: {_cell(n)}" for n in p.notes]
    if w.error:
        lines.append(f"**error:** {_cell(w.error)}")
    elif dry_run:
        lines.append(f"Dry run: nothing written; {p.bytes_removed:,} uncompressed bytes to remove.")
    elif w.size_after is not None:
        lines.append(
            f"Size: {w.size_before:,} → {w.size_after:,} bytes; uncompressed {w.uncompressed_before:,} → "
            f"{w.uncompressed_after:,}. Written to `{_cell(w.output or '')}`."
        )
    lines.append("")
    return lines


def render(report: RepairReport) -> str:
    title = "# cudaship repair (dry run)" if report.dry_run else "# cudaship repair"
    out = [title, ""]
    for w in report.wheels:
        out += _wheel(w, report.dry_run)
    return "\n".join(out)
