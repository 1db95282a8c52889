"""``cudaship repair``: ``text`` (per wheel, what was removed, edited and declared, and the sizes),
``json`` (the plan and the sizes of every wheel) and ``markdown`` (one section per wheel, a table of the
changes)."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from cudaship.render.escape import markdown_cell as cell
from cudaship.render.jsonify import dumps, fields
from cudaship.render.style import Renderer, Style
from cudaship.repair.records import EditedSize, RepairReport, WheelRepair
from cudaship.words import byte_count, size

SCHEMA_VERSION = 1


def _change(before: int, after: int) -> str:
    if before <= 0:
        return ""
    return f" ({(after - before) * 100 / before:+.1f}%)"


def _edited(x: EditedSize) -> str:
    if x.before == x.after:
        return f"{x.member}: {x.how}, size unchanged ({x.after:,} bytes)"
    return f"{x.member}: {x.how}, {x.before:,} -> {x.after:,} bytes ({x.after - x.before:+,})"


def _text_wheel(w: WheelRepair, dry_run: bool) -> list[str]:
    if w.plan is None:
        return [f"{w.path}", f"  error      {w.error}"]
    p = w.plan
    lines = [f"{p.filename}", f"  platform   {p.os}; CUDA train {p.train}"]
    for r in p.removed:
        lines.append(
            f"  removed    {r.member} ({r.library}, {size(r.size)}, {size(r.compressed_size)} "
            f"compressed): {r.project} installs it in {r.directory}"
        )
    lines += [f"  kept       {k.member} ({k.library}): {k.reason}" for k in p.kept]
    for e in p.edits:
        lines += [f"  DT_NEEDED  {e.member}: {old} -> {new}" for old, new in e.replace_needed]
        lines += [
            f"  DT_NEEDED  {e.member}: {n} removed (none of its symbols is used)" for n in e.remove_needed
        ]
        if e.runpath_changed:
            kind = "DT_RPATH" if e.was_rpath else "DT_RUNPATH"
            before = ":".join(e.runpath_before) or "(none)"
            after = ":".join(e.runpath_after) or "(none)"
            lines.append(f"  {kind[3:]:<10} {e.member}: {before} -> {after}")
            lines += [f"             dropped {entry}: {why}" for entry, why in e.dropped]
    lines += [f"  edited     {_edited(x)}" for x in w.edited]
    for pe in p.pe_edits:
        lines += [f"  import     {pe.member}: {old} -> {new} (in place)" for old, new in pe.replace_imports]
    for b in p.bootstraps:
        lines.append(f"  bootstrap  {b.member}: os.add_dll_directory({', '.join(b.directories)}) on Windows")
    for q in p.requirements:
        lines.append(f"  requires   {q.text}")
        lines.append(f"             for {', '.join(q.libraries)}: {q.why}")
    for u in p.unread:
        lines.append(f"  unread     {u.member}: {u.reason} (not read, so copied unchanged)")
    for f in p.record_fixes:
        lines.append(f"  RECORD     {f.member}: {f.problem} (row rewritten from the member)")
    for note in p.notes:
        lines.append(f"  note       {note}")
    if not p.changed:
        lines.append("  nothing to change")
    if w.error:
        lines.append(f"  error      {w.error}")
    elif dry_run:
        lines.append(
            f"  size       {byte_count(w.size_before)} ({size(w.uncompressed_before)} uncompressed); "
            f"{size(p.bytes_removed)} uncompressed to remove (dry run: nothing written)"
        )
    elif w.size_after is not None and w.uncompressed_after is not None:
        change = _change(w.size_before, w.size_after)
        lines.append(
            f"  size       {w.size_before:,} -> {byte_count(w.size_after)}{change}; "
            f"uncompressed {w.uncompressed_before:,} -> {w.uncompressed_after:,}"
        )
        if w.unchanged_copy:
            lines.append(f"  copied     {w.output} (nothing changed: the input's bytes)")
        else:
            lines.append(f"  written    {w.output}")
        if w.verification is not None:
            lines.append(f"  verified   read back: {w.verification.checked} claims of this report hold")
    return lines


def text(report: RepairReport, style: Style) -> str:
    blocks = ["\n".join(_text_wheel(w, report.dry_run)) for w in report.wheels]
    return "\n\n".join(blocks) + "\n"


def _markdown_wheel(w: WheelRepair, dry_run: bool) -> list[str]:
    if w.plan is None:
        return [f"## `{cell(w.path)}`", "", f"**error:** {cell(w.error or '')}", ""]
    p = w.plan
    lines = [
        f"## `{cell(p.filename)}`",
        "",
        f"Platform {p.os}; CUDA train {cell(p.train)}.",
        "",
    ]
    rows: list[tuple[str, str, str]] = []
    for r in p.removed:
        rows.append(
            (
                "removed",
                f"`{r.member}`",
                f"{r.library}, {byte_count(r.size)}: {r.project} installs it in {r.directory}",
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
    for x in w.edited:
        rows.append(("edited", f"`{x.member}`", _edited(x).split(": ", 1)[1]))
    for pe in p.pe_edits:
        for old, new in pe.replace_imports:
            rows.append(("import", f"`{pe.member}`", f"`{old}` → `{new}` (in place)"))
    for b in p.bootstraps:
        rows.append(("bootstrap", f"`{b.member}`", "os.add_dll_directory: " + ", ".join(b.directories)))
    for q in p.requirements:
        rows.append(("requires", f"`{q.text}`", f"for {', '.join(q.libraries)}: {q.why}"))
    for u in p.unread:
        rows.append(("unread", f"`{u.member}`", f"{u.reason} (not read, so copied unchanged)"))
    for f in p.record_fixes:
        rows.append(("RECORD", f"`{f.member}`", f"{f.problem} (row rewritten from the member)"))
    if rows:
        lines += ["| change | where | what |", "|---|---|---|"]
        lines += [f"| {a} | {cell(b)} | {cell(c)} |" for a, b, c in rows]
        lines.append("")
    else:
        lines += ["Nothing to change.", ""]
    lines += [f"- note: {cell(n)}" for n in p.notes]
    if w.error:
        lines.append(f"**error:** {cell(w.error)}")
    elif dry_run:
        lines.append(f"Dry run: nothing written; {byte_count(p.bytes_removed)} uncompressed to remove.")
    elif w.size_after is not None:
        lines.append(
            f"Size: {w.size_before:,} → {byte_count(w.size_after)}; uncompressed {w.uncompressed_before:,} → "
            f"{w.uncompressed_after:,}. Written to `{cell(w.output or '')}`."
        )
        if w.verification is not None:
            lines.append(f"Read back: {w.verification.checked} claims of this report hold.")
    lines.append("")
    return lines


def markdown(report: RepairReport, style: Style) -> str:
    title = "# cudaship repair (dry run)" if report.dry_run else "# cudaship repair"
    out = [title, ""]
    for w in report.wheels:
        out += _markdown_wheel(w, report.dry_run)
    return "\n".join(out)


def _json_wheel(w: WheelRepair) -> dict[str, Any]:
    doc: dict[str, Any] = {"path": w.path, "error": w.error}
    if w.plan is not None:
        doc["plan"] = {**fields(w.plan), "changed": w.plan.changed, "bytes_removed": w.plan.bytes_removed}
        doc["size"] = {
            "before": w.size_before,
            "after": w.size_after,
            "uncompressed_before": w.uncompressed_before,
            "uncompressed_after": w.uncompressed_after,
        }
        doc["output"] = w.output
        doc["unchanged_copy"] = w.unchanged_copy
        doc["verification"] = fields(w.verification) if w.verification is not None else None
        doc["edited"] = [fields(x) for x in w.edited]
    return doc


def json(report: RepairReport, style: Style) -> str:
    doc = {
        "schema": SCHEMA_VERSION,
        "dry_run": report.dry_run,
        "directory": report.directory,
        "wheels": [_json_wheel(w) for w in report.wheels],
    }
    return dumps(doc, newline=False)


FORMATS: Mapping[str, Renderer[RepairReport]] = {"text": text, "json": json, "markdown": markdown}
