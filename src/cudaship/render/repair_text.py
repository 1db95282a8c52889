"""``cudaship repair`` as text: per wheel, what was removed, edited and declared, and the sizes."""

from __future__ import annotations

from cudaship.repair.records import RepairReport, WheelRepair


def _bytes(n: int) -> str:
    for unit, shift in (("GiB", 30), ("MiB", 20), ("KiB", 10)):
        if n >= 1 << shift:
            return f"{n / (1 << shift):.1f} {unit}"
    return f"{n} B"


def _change(before: int, after: int) -> str:
    if before <= 0:
        return ""
    return f" ({(after - before) * 100 / before:+.1f}%)"


def _wheel(w: WheelRepair, dry_run: bool) -> list[str]:
    if w.plan is None:
        return [f"{w.path}", f"  error      {w.error}"]
    p = w.plan
    lines = [f"{p.filename}", f"  platform   {p.os}; CUDA train {p.train}"]
    for r in p.removed:
        lines.append(
            f"  removed    {r.member} ({r.library}, {_bytes(r.size)}, {_bytes(r.compressed_size)} "
            f"compressed): {r.project} installs it in {r.directory}"
        )
    for k in p.kept:
        lines.append(f"  kept       {k.member} ({k.library}): {k.reason}")
    for e in p.edits:
        for old, new in e.replace_needed:
            lines.append(f"  DT_NEEDED  {e.member}: {old} -> {new}")
        for name in e.remove_needed:
            lines.append(f"  DT_NEEDED  {e.member}: {name} removed (none of its symbols is used)")
        if e.runpath_changed:
            kind = "DT_RPATH" if e.was_rpath else "DT_RUNPATH"
            before = ":".join(e.runpath_before) or "(none)"
            after = ":".join(e.runpath_after) or "(none)"
            lines.append(f"  {kind[3:]:<10} {e.member}: {before} -> {after}")
            for entry, why in e.dropped:
                lines.append(f"             dropped {entry}: {why}")
    for pe in p.pe_edits:
        for old, new in pe.replace_imports:
            lines.append(f"  import     {pe.member}: {old} -> {new} (in place)")
    for b in p.bootstraps:
        lines.append(f"  bootstrap  {b.member}: os.add_dll_directory({', '.join(b.directories)}) on Windows")
    for q in p.requirements:
        lines.append(f"  requires   {q.text}")
        lines.append(f"             for {', '.join(q.libraries)}: {q.why}")
    for note in p.notes:
        lines.append(f"  note       {note}")
    if not p.changed:
        lines.append("  nothing to change")
    if w.error:
        lines.append(f"  error      {w.error}")
    elif dry_run:
        lines.append(
            f"  size       {w.size_before:,} bytes ({_bytes(w.uncompressed_before)} uncompressed); "
            f"{_bytes(p.bytes_removed)} uncompressed to remove (dry run: nothing written)"
        )
    elif w.size_after is not None and w.uncompressed_after is not None:
        change = _change(w.size_before, w.size_after)
        lines.append(
            f"  size       {w.size_before:,} -> {w.size_after:,} bytes{change}; "
            f"uncompressed {w.uncompressed_before:,} -> {w.uncompressed_after:,}"
        )
        if w.unchanged_copy:
            lines.append(f"  copied     {w.output} (nothing changed: the input's bytes)")
        else:
            lines.append(f"  written    {w.output}")
    return lines


def render(report: RepairReport) -> str:
    blocks = ["\n".join(_wheel(w, report.dry_run)) for w in report.wheels]
    return "\n\n".join(blocks) + "\n"
