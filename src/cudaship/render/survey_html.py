"""The survey dataset's report: one self-contained HTML page (no script, no stylesheet or font from the
network; the plots are inline SVG drawn here).

``render_html(rows, manifest)`` takes the dataset's rows (:data:`cudaship.survey.records.ROW_FIELDS`, one per
wheel x native library) and its manifest (``survey.json``: the runs, with the bytes they fetched) and shows,
plots first where people would rather look than read:

- coverage by capability: for each SASS arch (with its ``a``/``f`` variant) and each PTX arch, how many wheels
  and projects carry code for it;
- device-code bytes per arch: in total, and stacked per project for the projects with the most;
- CUDA majors over upload time: wheels per month per CUDA major (the wheel's train);
- libraries by minimum driver (Linux and Windows), audit verdicts of the wheels;
- vendored NVIDIA libraries: copies, wheels, projects, bytes, distinct files;
- the projects whose newest version carries SASS for 10.x and 12.x, and those whose does not;
- bytes fetched against the size of the wheels surveyed (the runs of the manifest).

Everything shown is read from the rows as they are or counted (a renderer decides nothing: which code runs
where is the audit's and ``gpus``' judgement, not this page's). Every string from the data (project names,
paths, versions) is escaped for HTML here, control characters shown as Python writes them
(:func:`cudaship.render.escape.text`), and the page passes :func:`cudaship.render.escape.report`.
"""

from __future__ import annotations

import colorsys
import html
import re
from collections import Counter, defaultdict
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

from packaging.version import InvalidVersion, Version

from cudaship.render import escape
from cudaship.words import agree, count, size

#: How many projects the per-project plots and tables show at most (the rest are counted).
TOP_PROJECTS = 15
#: Colours of the series (SVG fill), cycled.
PALETTE = (
    "#4e79a7", "#f28e2b", "#e15759", "#76b7b2", "#59a14f", "#edc948", "#b07aa1", "#ff9da7", "#9c755f",
    "#bab0ac", "#1f77b4", "#8c564b",
)  # fmt: skip
VERDICT_COLOURS = {"pass": "#59a14f", "warn": "#edc948", "fail": "#e15759", "error": "#7f7f7f"}


def esc(value: object) -> str:
    """``value`` as HTML text: control characters shown escaped, ``& < > " '`` as references."""
    return html.escape(escape.text(str(value)), quote=True)


# --- reading the rows (plain grouping and counting) ----------------------------------------------------

_ARCH = re.compile(r"(sm|compute)_(\d+)([a-z]?)$")


def arch_order(name: str) -> tuple[int, int, str, str]:
    """Sort key of an arch name: capability, then variant (``sm_90`` < ``sm_90a`` < ``sm_100`` <
    ``sm_100f``); names that are not arch names last, by name."""
    m = _ARCH.match(name)
    if not m:
        return (1 << 30, 0, "", name)
    return (int(m.group(2)), 0, m.group(3), m.group(1))


def capability(name: str) -> str:
    """``sm_100f`` -> ``10.0f``, ``compute_86`` -> ``8.6``; other names as they are."""
    m = _ARCH.match(name)
    if not m:
        return name
    n = int(m.group(2))
    return f"{n // 10}.{n % 10}{m.group(3)}"


@dataclass
class Wheel:
    """One wheel of the dataset: its wheel columns (from its first row) and its libraries' rows."""

    key: str
    head: dict[str, Any]
    libraries: list[dict[str, Any]] = field(default_factory=list)

    @property
    def project(self) -> str:
        return str(self.head.get("project") or "?")

    def archs(self, column: str) -> set[str]:
        return {a for row in self.libraries for a in (row.get(column) or ()) if isinstance(a, str)}


def wheels_of(rows: Iterable[Mapping[str, Any]]) -> list[Wheel]:
    """The rows grouped by ``wheel_key`` (in the order the rows come)."""
    by_key: dict[str, Wheel] = {}
    for row in rows:
        key = str(row.get("wheel_key") or row.get("url") or row.get("filename") or len(by_key))
        wheel = by_key.get(key)
        if wheel is None:
            wheel = by_key[key] = Wheel(key, dict(row))
        if row.get("library") is not None:
            wheel.libraries.append(dict(row))
    return list(by_key.values())


def _version_key(v: object) -> tuple[int, Any]:
    try:
        return (1, Version(str(v)))
    except InvalidVersion:
        return (0, str(v))


def newest_versions(wheels: Sequence[Wheel]) -> dict[str, list[Wheel]]:
    """Project -> the wheels of its newest version in the dataset (PEP 440 order; unparsable versions
    sort before parsable ones)."""
    by_project: dict[str, list[Wheel]] = defaultdict(list)
    for w in wheels:
        by_project[w.project].append(w)
    newest = {}
    for project, ws in by_project.items():
        top = max(_version_key(w.head.get("version")) for w in ws)
        newest[project] = [w for w in ws if _version_key(w.head.get("version")) == top]
    return newest


def _major(train: object) -> str:
    if not isinstance(train, str) or not train:
        return "none"
    return train.split(".", 1)[0]


def _month(upload: object) -> str | None:
    if isinstance(upload, str) and re.match(r"\d{4}-\d{2}", upload):
        return upload[:7]
    return None


def _family(arch: str, major: str) -> bool:
    """``arch`` (``sm_100f``) is SASS for capability ``major``.x (``10``)."""
    m = _ARCH.match(arch)
    return m is not None and int(m.group(2)) // 10 == int(major)


# --- SVG ----------------------------------------------------------------------------------------------


def _num(n: float) -> str:
    return f"{n:,.0f}" if float(n).is_integer() else f"{n:,.1f}"


def hbars(
    labels: Sequence[str],
    series: Sequence[tuple[str, Sequence[float]]],
    *,
    title: str,
    unit: str = "",
    fmt: Any = _num,
    colours: Sequence[str] = PALETTE,
) -> str:
    """Horizontal bars, one group per label, one bar per series (side by side), value written after each."""
    if not labels:
        return f'<p class="empty">{esc(title)}: nothing to plot.</p>'
    bar_h, gap, label_w, plot_w = 12, 8, _label_width(labels), 460
    n = len(series)
    group_h = n * bar_h + gap
    height = 30 + len(labels) * group_h + 10 + (16 * ((n + 2) // 3) if n > 1 else 0)
    top = max((v for _, values in series for v in values), default=0) or 1
    out = [_svg_open(label_w + plot_w + 110, height, title)]
    for i, label in enumerate(labels):
        y0 = 26 + i * group_h
        out.append(
            f'<text x="{label_w - 6}" y="{y0 + n * bar_h / 2 + 4:.0f}" text-anchor="end">{esc(label)}</text>'
        )
        for j, (_name, values) in enumerate(series):
            v = values[i]
            w = plot_w * v / top
            y = y0 + j * bar_h
            out.append(
                f'<rect x="{label_w}" y="{y}" width="{w:.1f}" height="{bar_h - 2}" '
                f'fill="{colours[j % len(colours)]}">'
                f"<title>{esc(label)}: {esc(fmt(v))}{esc(unit)}</title></rect>"
            )
            out.append(
                f'<text x="{label_w + w + 4:.1f}" y="{y + bar_h - 3}" fill="#555">{esc(fmt(v))}</text>'
            )
    if n > 1:
        out += _legend([name for name, _ in series], colours, 26 + len(labels) * group_h + 6, label_w)
    out.append("</svg>")
    return "".join(out)


def _svg_open(width: int, height: int, title: str) -> str:
    """An inline SVG's opening tag (its fonts set on it, so it reads the same outside the page) and title."""
    return (
        f'<svg xmlns="http://www.w3.org/2000/svg" role="img" font-family="sans-serif" font-size="11" '
        f'width="{width}" height="{height}" aria-label="{esc(title)}">'
        f'<text x="2" y="14" font-size="13" font-weight="bold">{esc(title)}</text>'
    )


def _label_width(labels: Sequence[str]) -> int:
    """Room for the longest label at the plots' 11 px font (about 7.5 px a character), 60 to 360 px."""
    return int(min(max(60, 12 + 7.5 * max((len(label) for label in labels), default=0)), 360))


def arch_colours(names: Sequence[str]) -> list[str]:
    """A colour per arch series: hue by position in the (sorted) list, PTX lighter than SASS."""
    n = max(len(names), 1)
    out = []
    for i, name in enumerate(names):
        light, sat = (0.72, 0.45) if name.startswith("PTX") else (0.45, 0.6)
        r, g, b = colorsys.hls_to_rgb(0.83 * i / n, light, sat)
        out.append(f"#{round(r * 255):02x}{round(g * 255):02x}{round(b * 255):02x}")
    return out


def _legend(names: Sequence[str], colours: Sequence[str], y: int, x0: int) -> list[str]:
    out = []
    for k, name in enumerate(names):
        x = x0 + (k % 3) * 170
        yy = y + (k // 3) * 16
        out.append(f'<rect x="{x}" y="{yy}" width="10" height="10" fill="{colours[k % len(colours)]}"/>')
        out.append(f'<text x="{x + 14}" y="{yy + 9}">{esc(name)}</text>')
    return out


def stacked(
    labels: Sequence[str],
    series: Sequence[tuple[str, Sequence[float]]],
    *,
    title: str,
    fmt: Any = _num,
    colours: Sequence[str] = PALETTE,
    horizontal: bool = False,
) -> str:
    """Stacked bars: one bar per label (vertical: columns left to right, labels below, every few shown;
    horizontal: rows, labels left), each series a segment."""
    if not labels:
        return f'<p class="empty">{esc(title)}: nothing to plot.</p>'
    totals = [sum(values[i] for _, values in series) for i in range(len(labels))]
    top = max(totals) or 1
    out: list[str] = []
    if horizontal:
        bar_h, label_w, plot_w = 16, _label_width(labels), 440
        height = 30 + len(labels) * (bar_h + 4) + 10 + 16 * ((len(series) + 2) // 3)
        width = label_w + plot_w + 110
        out.append(_svg_open(width, height, title))
        for i, label in enumerate(labels):
            y = 26 + i * (bar_h + 4)
            out.append(f'<text x="{label_w - 6}" y="{y + bar_h - 4}" text-anchor="end">{esc(label)}</text>')
            x = float(label_w)
            for j, (name, values) in enumerate(series):
                w = plot_w * values[i] / top
                if values[i]:
                    out.append(
                        f'<rect x="{x:.1f}" y="{y}" width="{w:.1f}" height="{bar_h}" '
                        f'fill="{colours[j % len(colours)]}">'
                        f"<title>{esc(label)}, {esc(name)}: {esc(fmt(values[i]))}</title></rect>"
                    )
                x += w
            out.append(f'<text x="{x + 4:.1f}" y="{y + bar_h - 4}" fill="#555">{esc(fmt(totals[i]))}</text>')
        out += _legend([n for n, _ in series], colours, 26 + len(labels) * (bar_h + 4) + 6, label_w)
    else:
        col_w = max(4, min(24, 760 // max(len(labels), 1)))
        plot_h, left = 220, 50
        width = left + col_w * len(labels) + 20
        height = 30 + plot_h + 40 + 16 * ((len(series) + 2) // 3)
        out.append(_svg_open(max(width, 560), height, title))
        base = 26 + plot_h
        out.append(f'<text x="{left - 4}" y="34" text-anchor="end" fill="#555">{esc(fmt(top))}</text>')
        out.append(f'<line x1="{left}" y1="{base}" x2="{width - 20}" y2="{base}" stroke="#888"/>')
        every = max(1, len(labels) // 12)
        yearly = len(labels) > 24 and all(re.fullmatch(r"\d{4}-\d{2}", label) for label in labels)
        for i, label in enumerate(labels):
            cx = left + i * col_w
            cy = float(base)
            for j, (name, values) in enumerate(series):
                h = plot_h * values[i] / top
                if values[i]:
                    cy -= h
                    out.append(
                        f'<rect x="{cx}" y="{cy:.1f}" width="{col_w - 1}" height="{h:.1f}" '
                        f'fill="{colours[j % len(colours)]}"><title>{esc(label)}, {esc(name)}: '
                        f"{esc(fmt(values[i]))}</title></rect>"
                    )
            if yearly and label.endswith("-01"):
                out.append(f'<text x="{cx}" y="{base + 14}" fill="#555">{esc(label[:4])}</text>')
            elif not yearly and i % every == 0:
                out.append(f'<text x="{cx}" y="{base + 14}" fill="#555">{esc(label)}</text>')
        out += _legend([n for n, _ in series], colours, base + 24, left)
    out.append("</svg>")
    return "".join(out)


# --- the page's sections -------------------------------------------------------------------------------


def _table(header: Sequence[str], rows: Iterable[Sequence[object]], numeric: Iterable[int] = ()) -> str:
    right = set(numeric)
    out = ["<table><thead><tr>"]
    out += [f"<th{' class=n' if i in right else ''}>{esc(h)}</th>" for i, h in enumerate(header)]
    out.append("</tr></thead><tbody>")
    for row in rows:
        out.append("<tr>")
        out += [f"<td{' class=n' if i in right else ''}>{esc(c)}</td>" for i, c in enumerate(row)]
        out.append("</tr>")
    out.append("</tbody></table>")
    return "".join(out)


def _coverage(wheels: Sequence[Wheel]) -> str:
    sass_w: Counter[str] = Counter()
    ptx_w: Counter[str] = Counter()
    sass_p: dict[str, set[str]] = defaultdict(set)
    ptx_p: dict[str, set[str]] = defaultdict(set)
    for w in wheels:
        for a in w.archs("sass"):
            sass_w[a] += 1
            sass_p[a].add(w.project)
        for a in w.archs("ptx"):
            ptx_w[a] += 1
            ptx_p[a].add(w.project)
    parts = ["<h2>Coverage by capability</h2>"]
    if not sass_w and not ptx_w:
        return parts[0] + '<p class="empty">No wheel of the dataset carries device code.</p>'
    sass = sorted(sass_w, key=arch_order)
    parts.append(
        hbars(
            [f"{a} ({capability(a)})" for a in sass],
            [("wheels", [sass_w[a] for a in sass]), ("projects", [len(sass_p[a]) for a in sass])],
            title="SASS: wheels and projects carrying machine code for each arch",
        )
    )
    ptx = sorted(ptx_w, key=arch_order)
    parts.append(
        hbars(
            [f"{a} ({capability(a)})" for a in ptx],
            [("wheels", [ptx_w[a] for a in ptx]), ("projects", [len(ptx_p[a]) for a in ptx])],
            title="PTX: wheels and projects carrying PTX for each arch",
            colours=PALETTE[2:],
        )
    )
    rows = [("SASS", a, capability(a), sass_w[a], len(sass_p[a])) for a in sass]
    rows += [("PTX", a, capability(a), ptx_w[a], len(ptx_p[a])) for a in ptx]
    parts.append(
        "<details><summary>the numbers</summary>"
        + _table(("kind", "arch", "capability", "wheels", "projects"), rows, numeric=(3, 4))
        + "</details>"
    )
    return "".join(parts)


def _arch_bytes(wheels: Sequence[Wheel]) -> str:
    total: Counter[str] = Counter()
    per_project: dict[str, Counter[str]] = defaultdict(Counter)
    for w in wheels:
        for row in w.libraries:
            for rec in row.get("arch_bytes") or ():
                if not isinstance(rec, Mapping):
                    continue
                kind = "PTX" if rec.get("kind") == "ptx" else "SASS"
                name = f"{kind} {rec.get('arch')}"
                n = rec.get("bytes") or 0
                if isinstance(n, int):
                    total[name] += n
                    per_project[w.project][name] += n
    parts = ["<h2>Device-code bytes per arch</h2>"]
    if not total:
        return parts[0] + '<p class="empty">No device code.</p>'
    names = sorted(total, key=lambda n: (arch_order(n.split(" ", 1)[1]), n))
    parts.append(hbars(names, [("bytes", [total[n] for n in names])], title="all wheels", fmt=size))
    ranked = sorted(per_project, key=lambda p: (-sum(per_project[p].values()), p))
    shown = ranked[:TOP_PROJECTS]
    parts.append(
        stacked(
            shown,
            [(n, [per_project[p][n] for p in shown]) for n in names],
            title=f"per project (the {len(shown)} of {len(ranked)} with the most device code), "
            "all their wheels",
            fmt=size,
            horizontal=True,
            colours=arch_colours(names),
        )
    )
    return "".join(parts)


def _majors_over_time(wheels: Sequence[Wheel]) -> str:
    counts: dict[str, Counter[str]] = defaultdict(Counter)
    undated = 0
    for w in wheels:
        month = _month(w.head.get("upload_time"))
        if month is None:
            undated += 1
            continue
        counts[month][_major(w.head.get("train"))] += 1
    parts = ["<h2>CUDA majors over upload time</h2>"]
    if not counts:
        return parts[0] + '<p class="empty">No wheel has an upload time (PEP 700).</p>'
    months = _month_range(min(counts), max(counts))
    majors = sorted({m for c in counts.values() for m in c}, key=lambda m: (m == "none", m.zfill(4)))
    parts.append(
        stacked(
            months,
            [
                (f"CUDA {m}" if m != "none" else "no CUDA train", [counts[mo][m] for mo in months])
                for m in majors
            ],
            title="wheels uploaded per month, by the CUDA major of their train",
        )
    )
    if undated:
        are = agree(undated, "is", "are")
        parts.append(
            f"<p>{count(undated, 'wheel', grouped=True)} without an upload time {are} not plotted.</p>"
        )
    return "".join(parts)


def _month_range(first: str, last: str) -> list[str]:
    y, m = int(first[:4]), int(first[5:7])
    ly, lm = int(last[:4]), int(last[5:7])
    out: list[str] = []
    while (y, m) <= (ly, lm) and len(out) < 1200:
        out.append(f"{y:04d}-{m:02d}")
        y, m = (y + 1, 1) if m == 12 else (y, m + 1)
    return out


def _drivers(wheels: Sequence[Wheel]) -> str:
    parts = ["<h2>Minimum driver</h2>"]
    plotted = False
    for column, name in (("min_driver_linux", "Linux"), ("min_driver_windows", "Windows")):
        c: Counter[str] = Counter()
        for w in wheels:
            for row in w.libraries:
                v = row.get(column)
                if isinstance(v, str) and v:
                    c[v] += 1
        if not c:
            continue
        plotted = True
        order = sorted(c, key=lambda v: (_version_key(v)[0] == 0, _version_key(v)))
        parts.append(
            hbars(order, [("libraries", [c[v] for v in order])], title=f"libraries by minimum {name} driver")
        )
    if not plotted:
        parts.append('<p class="empty">No library names a minimum driver.</p>')
    return "".join(parts)


def _verdicts(wheels: Sequence[Wheel]) -> str:
    c: Counter[str] = Counter(str(w.head.get("audit_verdict") or "not audited") for w in wheels)
    order = [v for v in ("pass", "warn", "fail", "error") if v in c] + sorted(
        v for v in c if v not in VERDICT_COLOURS
    )
    failed: Counter[str] = Counter(
        name for w in wheels for name in (w.head.get("audit_failed") or ()) if isinstance(name, str)
    )
    parts = ["<h2>Audit verdicts</h2>"]
    parts.append(
        stacked(
            ["wheels"],
            [(v, [c[v]]) for v in order],
            title="wheels by audit verdict",
            horizontal=True,
            colours=[VERDICT_COLOURS.get(v, "#bab0ac") for v in order],
        )
    )
    if failed:
        parts.append(
            "<details><summary>checks that failed, by wheels</summary>"
            + _table(("check", "wheels"), failed.most_common(), numeric=(1,))
            + "</details>"
        )
    return "".join(parts)


def _vendored(wheels: Sequence[Wheel]) -> str:
    copies: Counter[str] = Counter()
    nbytes: Counter[str] = Counter()
    wheel_keys: dict[str, set[str]] = defaultdict(set)
    projects: dict[str, set[str]] = defaultdict(set)
    distinct: dict[str, set[str]] = defaultdict(set)
    for w in wheels:
        for row in w.libraries:
            v = row.get("vendored_nvidia")
            if not isinstance(v, str) or not v:
                continue
            copies[v] += 1
            n = row.get("library_size")
            nbytes[v] += n if isinstance(n, int) else 0
            wheel_keys[v].add(w.key)
            projects[v].add(w.project)
            if row.get("library_sha256"):
                distinct[v].add(str(row["library_sha256"]))
    parts = ["<h2>Vendored NVIDIA libraries</h2>"]
    if not copies:
        return parts[0] + '<p class="empty">No wheel vendors a library an NVIDIA wheel provides.</p>'
    order = sorted(copies, key=lambda v: (-nbytes[v], v))
    parts.append(
        hbars(
            order,
            [("bytes (uncompressed)", [nbytes[v] for v in order])],
            title="bytes of vendored copies",
            fmt=size,
        )
    )
    parts.append(
        _table(
            ("NVIDIA wheel", "copies", "wheels", "projects", "distinct files", "bytes (uncompressed)"),
            [
                (v, copies[v], len(wheel_keys[v]), len(projects[v]), len(distinct[v]), size(nbytes[v]))
                for v in order
            ],
            numeric=(1, 2, 3, 4, 5),
        )
    )
    return "".join(parts)


def _newest_arch_tables(wheels: Sequence[Wheel]) -> str:
    newest = newest_versions(wheels)
    parts = ["<h2>Blackwell: SASS for 10.x and 12.x in each project's newest version</h2>"]
    rows_with: list[tuple[object, ...]] = []
    rows_without: list[tuple[object, ...]] = []
    for project in sorted(newest):
        ws = newest[project]
        sass = set().union(*(w.archs("sass") for w in ws))
        ptx = set().union(*(w.archs("ptx") for w in ws))
        if not sass and not ptx:
            continue
        s100 = sorted((a for a in sass if _family(a, "10")), key=arch_order)
        s120 = sorted((a for a in sass if _family(a, "12")), key=arch_order)
        newest_ptx = max(ptx, key=arch_order) if ptx else ""
        version = str(ws[0].head.get("version") or "")
        row = (project, version, len(ws), " ".join(s100) or "-", " ".join(s120) or "-", newest_ptx or "-")
        (rows_with if s100 and s120 else rows_without).append(row)
    header = ("project", "newest version", "wheels", "SASS 10.x", "SASS 12.x", "newest PTX")
    if not rows_with and not rows_without:
        return parts[0] + '<p class="empty">No project carries device code.</p>'
    parts.append(f"<h3>With SASS for both 10.x and 12.x ({len(rows_with):,} projects)</h3>")
    parts.append(_table(header, rows_with, numeric=(2,)) if rows_with else '<p class="empty">None.</p>')
    parts.append(f"<h3>Without SASS for one of them ({len(rows_without):,} projects)</h3>")
    parts.append(_table(header, rows_without, numeric=(2,)) if rows_without else '<p class="empty">None.</p>')
    return "".join(parts)


def _fetched(wheels: Sequence[Wheel], manifest: Mapping[str, Any]) -> str:
    runs = [r for r in manifest.get("runs") or () if isinstance(r, Mapping)]

    def total(key: str) -> int:
        return sum(int(r.get(key) or 0) for r in runs if isinstance(r.get(key) or 0, int))

    fetched, surveyed = total("fetched_bytes"), total("surveyed_bytes")
    in_dataset = sum(int(w.head.get("wheel_size") or 0) for w in wheels)
    parts = ["<h2>Bytes fetched</h2>"]
    labels = ["fetched by the runs", "the wheels those runs surveyed", "the wheels of the dataset"]
    values = [fetched, surveyed, in_dataset]
    parts.append(hbars(labels, [("bytes", values)], title="bytes fetched against the wheels' size", fmt=size))
    share = f" ({fetched * 100 / surveyed:.1f}%)" if surveyed else ""
    parts.append(
        f"<p>{len(runs):,} runs fetched {esc(size(fetched))} of the {esc(size(surveyed))} "
        f"the wheels they surveyed weigh{share}; the dataset's wheels weigh {esc(size(in_dataset))} "
        "in all.</p>"
    )
    read, cached = total("read_members"), total("cached_members")
    if read or cached:
        parts.append(
            f"<p>Native members: {read:,} fetched and read, {cached:,} answered by the member cache.</p>"
        )
    return "".join(parts)


def _sources(sources: object) -> list[str]:
    """The manifest's sources, one line each: ``index https://... (12 projects)``, ``wheelhouse DIR``."""
    if not isinstance(sources, Sequence) or isinstance(sources, str):
        return [str(sources)] if sources else []
    lines = []
    for source in sources:
        if not isinstance(source, Mapping):
            lines.append(str(source))
            continue
        where = next((str(source[k]) for k in ("url", "path", "file", "dir") if source.get(k)), "")
        projects = source.get("projects")
        count = f" ({len(projects):,} projects)" if isinstance(projects, Sequence) and projects else ""
        lines.append(f"{source.get('kind') or 'source'} {where}{count}".strip())
    return lines


STYLE = """
body{font-family:system-ui,sans-serif;margin:2em;max-width:1100px;color:#222}
h1{font-size:1.5em}h2{font-size:1.2em;margin-top:2em;border-bottom:1px solid #ddd}h3{font-size:1em}
svg{display:block;margin:1em 0;font-size:11px}svg .t{font-size:13px;font-weight:600}svg .v{fill:#555}
table{border-collapse:collapse;font-size:13px;margin:.5em 0}td,th{border:1px solid #ddd;padding:2px 6px;
text-align:left}td.n,th.n{text-align:right}.empty{color:#777;font-style:italic}dl{display:grid;
grid-template-columns:max-content auto;gap:2px 12px}dt{font-weight:600}
"""


def render_html(rows: Sequence[Mapping[str, Any]], manifest: Mapping[str, Any]) -> str:
    """The dataset's report as one HTML page (see the module's docstring)."""
    wheels = wheels_of(rows)
    projects = {w.project for w in wheels}
    libraries = sum(len(w.libraries) for w in wheels)
    unreadable = sum(1 for w in wheels if w.head.get("error") and not w.libraries)
    dates = sorted(m for m in (_month(w.head.get("upload_time")) for w in wheels) if m)
    body = ["<h1>cudaship survey</h1>"]
    sources = manifest.get("sources")
    facts = [
        ("wheels", f"{len(wheels):,} of {len(projects):,} projects"),
        ("native libraries", f"{libraries:,}"),
        ("unreadable wheels", f"{unreadable:,}"),
        ("wheels with device code", f"{sum(1 for w in wheels if w.archs('sass') or w.archs('ptx')):,}"),
        ("uploaded", f"{dates[0]} to {dates[-1]}" if dates else "no upload times"),
    ]
    facts += [("source", text) for text in _sources(sources)]
    body.append("<dl>" + "".join(f"<dt>{esc(k)}</dt><dd>{esc(v)}</dd>" for k, v in facts) + "</dl>")
    if not wheels:
        body.append('<p class="empty">The dataset holds no wheel yet: nothing was surveyed.</p>')
    else:
        body += [
            _coverage(wheels),
            _arch_bytes(wheels),
            _majors_over_time(wheels),
            _drivers(wheels),
            _vendored(wheels),
            _verdicts(wheels),
            _newest_arch_tables(wheels),
            _fetched(wheels, manifest),
        ]
    page = (
        '<!DOCTYPE html>\n<html lang="en"><head><meta charset="utf-8">'
        '<meta name="viewport" content="width=device-width">'
        "<title>cudaship survey</title>"
        f"<style>{STYLE}</style></head><body>\n" + "\n".join(body) + "\n</body></html>\n"
    )
    return escape.report(page, "html")
