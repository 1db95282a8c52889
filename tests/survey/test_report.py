"""The survey's HTML report (render/survey_html.py): the counts it shows, escaping of every name from the
data, and the empty dataset. Rows are the contract's (records.ROW_FIELDS): built here as the survey writes
them, and from the survey itself (survey/work.py) over real nvcc-built wheels when that module is in this
tree."""

from __future__ import annotations

import re
from collections.abc import Callable
from html.parser import HTMLParser
from pathlib import Path
from typing import Any

import pytest

from cudaship.render.escape import stray
from cudaship.render.survey_html import arch_order, capability, render_html
from cudaship.survey.records import ROW_FIELDS, SurveyOptions, WheelRef, empty_row
from tests.providers.conftest import make_wheel
from tests.security.hostile_names import HOSTILE


def row(project: str, version: str, filename: str, library: str | None, **columns: Any) -> dict[str, Any]:
    r = empty_row()
    r.update(
        wheel_key=f"sha256:{filename}",
        project=project,
        version=version,
        filename=filename,
        url=f"https://files.example/{filename}",
        wheel_size=1000,
        library=library,
    )
    r.update(columns)
    assert set(r) == set(ROW_FIELDS)
    return r


def arch_bytes(*archs: str) -> list[dict[str, Any]]:
    return [{"arch": a, "kind": "ptx" if a.startswith("compute") else "sass", "bytes": 100} for a in archs]


def dataset() -> list[dict[str, Any]]:
    """3 projects, 6 wheels: alpha 1.0 (sm_80/sm_90 + PTX 90) and 2.0 on two platforms (sm_90a sm_100f
    sm_120f + PTX 120, one with a vendored cudart); beta (sm_80, sm_100, no sm_120) with two libraries;
    gamma: one unreadable wheel and one without a native library."""
    a1 = "alpha-1.0-cp312-cp312-manylinux_2_28_x86_64.whl"
    a2 = "alpha-2.0-cp312-cp312-manylinux_2_28_x86_64.whl"
    a2w = "alpha-2.0-cp312-cp312-win_amd64.whl"
    b1 = "beta-3.1-cp39-abi3-manylinux_2_28_x86_64.whl"
    g1 = "gamma-0.1-py3-none-any.whl"
    g2 = "gamma-0.2-cp312-cp312-manylinux_2_28_x86_64.whl"
    new = ["sm_90a", "sm_100f", "sm_120f"]
    common = {"audit_verdict": "pass", "min_driver_linux": "580.65.06"}
    jan, march, sept = "2023-01-05T00:00:00Z", "2025-03-02T00:00:00Z", "2025-09-01T00:00:00Z"
    return [
        row("alpha", "1.0", a1, "alpha/_C.so", sass=["sm_80", "sm_90"], ptx=["compute_90"],
            arch_bytes=arch_bytes("sm_80", "sm_90", "compute_90"), train="11.8", upload_time=jan,
            **{**common, "audit_verdict": "fail", "audit_failed": ["closure: alpha/_C.so"]}),
        row("alpha", "2.0", a2, "alpha/_C.so", sass=new, ptx=["compute_120"], train="12.8",
            arch_bytes=arch_bytes(*new, "compute_120"), upload_time=march, **common),
        row("alpha", "2.0", a2, "alpha.libs/libcudart-0123.so.12", train="12.8", upload_time=march,
            vendored_nvidia="nvidia-cuda-runtime-cu12", library_size=700_000, library_sha256="c" * 64,
            **common),
        row("alpha", "2.0", a2w, "alpha/_C.pyd", sass=new, ptx=["compute_120"], train="12.8",
            arch_bytes=arch_bytes(*new, "compute_120"), upload_time="2025-03-20T00:00:00Z",
            min_driver_windows="r580 branch", audit_verdict="warn"),
        row("beta", "3.1", b1, "beta/_a.so", sass=["sm_80", "sm_100"], train="13.0",
            arch_bytes=arch_bytes("sm_80", "sm_100"), upload_time=sept, **common),
        row("beta", "3.1", b1, "beta/_b.so", sass=["sm_80"], train="13.0", arch_bytes=arch_bytes("sm_80"),
            upload_time=sept, **common),
        row("gamma", "0.1", g1, None, upload_time="2024-06-01T00:00:00Z", audit_verdict="pass"),
        row("gamma", "0.2", g2, None, error="not a zip file", audit_verdict="error"),
    ]  # fmt: skip


class Page(HTMLParser):
    """Tags, attributes, table rows (cell texts) and SVG <title> texts of a page."""

    def __init__(self, text: str) -> None:
        super().__init__()
        self.tags: list[str] = []
        self.attributes: list[str] = []
        self.rows: list[list[str]] = []
        self.titles: list[str] = []
        self._cell: list[str] | None = None
        self._title: list[str] | None = None
        self.feed(text)

    def handle_starttag(self, tag: str, attrs: list[tuple[str, str | None]]) -> None:
        self.tags.append(tag)
        self.attributes += [name for name, _ in attrs]
        if tag == "tr":
            self.rows.append([])
        elif tag in ("td", "th"):
            self._cell = []
        elif tag == "title":
            self._title = []

    def handle_endtag(self, tag: str) -> None:
        if tag in ("td", "th") and self._cell is not None:
            self.rows[-1].append("".join(self._cell))
            self._cell = None
        elif tag == "title" and self._title is not None:
            self.titles.append("".join(self._title))
            self._title = None

    def handle_data(self, data: str) -> None:
        if self._cell is not None:
            self._cell.append(data)
        if self._title is not None:
            self._title.append(data)


def coverage(page: Page) -> dict[tuple[str, str], tuple[int, int]]:
    """(kind, arch) -> (wheels, projects) from the coverage table."""
    return {
        (r[0], r[1]): (int(r[3]), int(r[4])) for r in page.rows if len(r) == 5 and r[0] in ("SASS", "PTX")
    }


def test_the_report_counts_wheels_and_projects_per_arch() -> None:
    page = Page(render_html(dataset(), {"format": 1, "runs": []}))
    cov = coverage(page)
    assert cov[("SASS", "sm_80")] == (2, 2)  # alpha 1.0, beta 3.1
    assert cov[("SASS", "sm_100")] == (1, 1)
    assert cov[("SASS", "sm_100f")] == (2, 1)  # both alpha 2.0 wheels
    assert cov[("SASS", "sm_120f")] == (2, 1)
    assert cov[("PTX", "compute_120")] == (2, 1)
    assert cov[("PTX", "compute_90")] == (1, 1)
    assert ("SASS", "sm_120") not in cov
    # the rows of the capability table, in capability order
    sass = [arch for kind, arch in cov if kind == "SASS"]
    assert sass == ["sm_80", "sm_90", "sm_90a", "sm_100", "sm_100f", "sm_120f"]


def test_the_report_shows_the_facts_of_the_dataset() -> None:
    text = render_html(dataset(), {"format": 1, "runs": []})
    page = Page(text)
    facts = re.findall(r"<dt>([^<]*)</dt><dd>([^<]*)</dd>", text)
    assert ("wheels", "6 of 3 projects") in facts
    assert ("native libraries", "6") in facts
    assert ("unreadable wheels", "1") in facts
    # CUDA majors per upload month (one bar segment each, its title says the count)
    assert "2025-03, CUDA 12: 2" in page.titles
    assert "2023-01, CUDA 11: 1" in page.titles
    assert "2025-09, CUDA 13: 1" in page.titles
    assert "wheels, pass: 3" in page.titles  # gamma 0.1, alpha 2.0 linux, beta
    assert "wheels, fail: 1" in page.titles and "wheels, warn: 1" in page.titles
    assert "wheels, error: 1" in page.titles
    # vendored: one copy of nvidia-cuda-runtime-cu12, 700,000 bytes
    vendored = [r for r in page.rows if r and r[0] == "nvidia-cuda-runtime-cu12"]
    assert vendored == [["nvidia-cuda-runtime-cu12", "1", "1", "1", "1", "683.6 KiB"]]
    # newest versions: alpha 2.0 carries 10.x and 12.x SASS, beta 3.1 only 10.x
    with_both = [r for r in page.rows if r and r[0] == "alpha"]
    assert with_both == [["alpha", "2.0", "2", "sm_100f", "sm_120f", "compute_120"]]
    without = [r for r in page.rows if r and r[0] == "beta"]
    assert without == [["beta", "3.1", "1", "sm_100", "-", "-"]]
    assert "libraries by minimum Linux driver" in text and "580.65.06: 5libraries" not in text


def test_bytes_fetched_against_the_index() -> None:
    runs = [
        {"run": "a", "fetched_bytes": 1 << 20, "surveyed_bytes": 100 << 20, "read_members": 4},
        {"run": "b", "fetched_bytes": 1 << 20, "surveyed_bytes": 100 << 20, "cached_members": 3},
    ]
    text = render_html(dataset(), {"format": 1, "runs": runs})
    assert "2 runs fetched 2.0 MiB of the 200.0 MiB the wheels they surveyed weigh (1.0%)" in text
    assert "4 fetched and read, 3 answered by the member cache" in text


def test_the_sources_are_one_line_each() -> None:
    sources = [
        {"kind": "index", "url": "https://pypi.org/simple", "projects": ["torch", "cupy-cuda12x"]},
        {"kind": "wheelhouse", "path": "/w"},
    ]
    text = render_html(dataset(), {"format": 1, "runs": [], "sources": sources})
    facts = re.findall(r"<dt>([^<]*)</dt><dd>([^<]*)</dd>", text)
    assert ("source", "index https://pypi.org/simple (2 projects)") in facts
    assert ("source", "wheelhouse /w") in facts


def test_an_empty_dataset_says_so() -> None:
    text = render_html([], {"format": 1, "runs": []})
    assert "The dataset holds no wheel yet" in text
    assert "<svg" not in text
    assert text.startswith("<!DOCTYPE html>") and text.rstrip().endswith("</html>")


def test_names_from_the_data_are_escaped() -> None:
    hostile = dataset()
    for r in hostile:
        r["project"] = f"{HOSTILE}{r['project']}"
        if r["library"]:
            r["library"] = HOSTILE
        if r["vendored_nvidia"]:
            r["vendored_nvidia"] = HOSTILE
        r["version"] = HOSTILE if r["project"].endswith("beta") else r["version"]
    hostile[0]["sass"] = ["sm_80", HOSTILE]
    hostile[0]["arch_bytes"] = [{"arch": HOSTILE, "kind": "sass", "bytes": 5}]
    hostile[0]["upload_time"] = f"2023-01{HOSTILE}"
    hostile[0]["min_driver_linux"] = HOSTILE
    hostile[0]["audit_failed"] = [HOSTILE]
    sources = [{"kind": HOSTILE, "url": HOSTILE, "projects": [HOSTILE]}]
    text = render_html(hostile, {"format": 1, "runs": [], "sources": sources})
    page = Page(text)
    assert "img" not in page.tags and "a" not in page.tags
    assert "onerror" not in page.attributes
    assert not stray(text)
    # the names are still there, escaped
    assert "&lt;img src=x onerror=alert(1)&gt;" in text
    assert "\\x1b[2J" in text and "\\u202eRLO" in text


def test_arch_names_sort_by_capability_then_variant() -> None:
    names = ["sm_120f", "compute_90", "sm_90a", "sm_100", "sm_90", "sm_75", "weird"]
    assert sorted(names, key=arch_order) == [
        "sm_75",
        "compute_90",
        "sm_90",
        "sm_90a",
        "sm_100",
        "sm_120f",
        "weird",
    ]
    assert capability("sm_100f") == "10.0f" and capability("compute_86") == "8.6"


def test_the_report_of_rows_the_survey_wrote(nvcc_build: Callable[[str], Path], tmp_path: Path) -> None:
    """Rows from the survey's own per-wheel work (survey/work.py) over two wheels built here: one with an
    nvcc library for sm_100 and sm_120 (+ PTX compute_120), one with a library for sm_80/sm_90a."""
    work = pytest.importorskip("cudaship.survey.work")
    rows = []
    for project, build in (("newgen", "blackwell"), ("oldgen", "arch_specific")):
        lib = nvcc_build(build)
        wheel = make_wheel(
            tmp_path,
            project,
            "1.0",
            "cp312-cp312-manylinux_2_28_x86_64",
            {f"{project}/_C.so": lib.read_bytes()},
        )
        ref = WheelRef(
            project, "1.0", wheel.name, wheel.as_uri(), wheel.stat().st_size, None, "2025-05-01T00:00:00Z"
        )
        outcome = work.survey_wheel(ref, SurveyOptions(cache_dir=str(tmp_path / "cache")))
        assert outcome.error is None, outcome.error
        rows += outcome.rows
    page = Page(render_html(rows, {"format": 1, "runs": []}))
    cov = coverage(page)
    sass = {a for r in rows for a in r["sass"] or ()}
    assert {a for kind, a in cov if kind == "SASS"} == sass
    assert cov[("SASS", "sm_100")] == (1, 1) and cov[("SASS", "sm_120")] == (1, 1)
    newgen = [r for r in page.rows if r and r[0] == "newgen"]
    assert newgen and newgen[0][3] == "sm_100" and newgen[0][4] == "sm_120"
