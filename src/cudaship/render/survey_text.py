"""``cudaship survey``'s summary of one run: ``text``, ``markdown`` and ``json`` (wheels surveyed, skipped and
failed, libraries, bytes fetched against the index's size of the wheels, time; the dataset after the run).
The HTML report of the dataset is :mod:`cudaship.render.survey_html`'s."""

from __future__ import annotations

from typing import TYPE_CHECKING

from cudaship.render.escape import markdown_cell as cell
from cudaship.render.jsonify import dumps, fields
from cudaship.render.style import Renderer, Style
from cudaship.words import count, size

if TYPE_CHECKING:
    from cudaship.survey.engine import SurveySummary

SCHEMA_VERSION = 1


def _fetched(s: SurveySummary) -> str:
    """``1.2 MiB of the wheels' 310.4 MiB (0.4%)``: bytes fetched against the sources' size of them."""
    if s.surveyed == 0:
        return f"{size(s.fetched_bytes)} (no wheel to survey)"
    if s.surveyed_bytes <= 0:
        return f"{size(s.fetched_bytes)} (the sources gave no size for these wheels)"
    share = s.fetched_bytes * 100 / s.surveyed_bytes
    unsized = f"; {s.unsized:,} of unknown size" if s.unsized else ""
    return f"{size(s.fetched_bytes)} of their {size(s.surveyed_bytes)} ({share:.1f}%){unsized}"


def _n(n: int, noun: str) -> str:
    """A count of the summary: ``5,201 wheels``, ``1 row``."""
    return count(n, noun, grouped=True)


def _pairs(s: SurveySummary) -> list[tuple[str, str]]:
    left_out = [
        f"{n:,} {what}"
        for n, what in (
            (s.yanked, "yanked"),
            (s.filtered, "filtered out"),
            (s.duplicates, "listed twice"),
        )
        if n
    ]
    listed = f"{s.listed:,} listed" + (f" ({', '.join(left_out)})" if left_out else "")
    pairs = [
        ("wheels", f"{s.selected:,} selected of {listed}; {s.skipped:,} already in the dataset"),
        (
            "surveyed",
            f"{_n(s.surveyed, 'wheel')}, {s.failed:,} could not be read"
            + (f", {s.retried:,} tries again" if s.retried else ""),
        ),
        (
            "libraries",
            f"{_n(s.libraries, 'native library')} ({_n(s.rows, 'row')})",
        ),
        ("fetched", _fetched(s)),
    ]
    if s.cached_members or s.read_members:
        pairs.append(("members", f"{s.read_members:,} read, {s.cached_members:,} from the member cache"))
    if s.undated:
        pairs.append(
            (
                "undated",
                f"{_n(s.undated, 'wheel')} without an upload time kept (the date filter)",
            )
        )
    pairs += [
        ("time", f"{s.seconds:,.1f} s, {count(s.workers, 'worker')} ({s.engine})"),
        (
            "dataset",
            f"{_n(s.dataset_wheels, 'wheel')}, {_n(s.dataset_rows, 'row')}, "
            f"{_n(s.dataset_libraries, 'library')}, "
            f"{_n(s.dataset_failed, 'unreadable wheel')}",
        ),
    ]
    pairs += [("written", f) for f in s.files]
    return pairs


def text(s: SurveySummary, style: Style) -> str:
    lines = [f"survey {s.dest} (run {s.run}, {s.state})"]
    lines += [f"  {key:<10} {value}" for key, value in _pairs(s=s)]
    lines += [f"  left out   {p}" for p in s.problems]
    lines += [f"  damaged    {d}" for d in s.damaged]
    return "\n".join(lines) + "\n"


def markdown(s: SurveySummary, style: Style) -> str:
    lines = [
        f"### cudaship survey: {cell(s.dest)}",
        "",
        f"Run `{s.run}`, {s.state}.",
        "",
        "| | |",
        "|---|---|",
    ]
    lines += [f"| {key} | {cell(value)} |" for key, value in _pairs(s=s)]
    lines += [f"| left out | {cell(p)} |" for p in s.problems]
    lines += [f"| damaged | {cell(d)} |" for d in s.damaged]
    return "\n".join(lines) + "\n"


def json(s: SurveySummary, style: Style) -> str:
    return dumps({"schema": SCHEMA_VERSION, **fields(s)})


FORMATS: dict[str, Renderer[SurveySummary]] = {"text": text, "json": json, "markdown": markdown}
