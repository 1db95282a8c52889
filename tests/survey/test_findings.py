"""docs/survey.md's "The PyPI run" findings are what benchmarks/survey_findings.py computes from the run's
committed dataset (benchmarks/data/survey_pypi_rows.jsonl.gz and survey_pypi_run.json), and that dataset is
the survey of the recorded file list (benchmarks/data/survey_pypi_wheels.txt): every figure comes from it."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest
from benchmarks import survey_findings as sf

from cudaship.survey.sources import Filters, from_urls

REPO = Path(__file__).resolve().parents[2]
WHEELS = REPO / "benchmarks" / "data" / "survey_pypi_wheels.txt"


@pytest.fixture(scope="module")
def data() -> tuple[list[dict[str, object]], dict[str, object]]:
    return sf.read_rows(sf.ROWS), sf.read_run(sf.RUN)


def test_the_page_holds_what_the_dataset_gives(
    data: tuple[list[dict[str, object]], dict[str, object]],
) -> None:
    rows, run = data
    block = sf.page_block((REPO / "docs" / "survey.md").read_text())
    assert block is not None, "docs/survey.md lacks the survey findings markers"
    assert block == sf.section(sf.findings(rows, run), run)
    assert sf.main(["--check", str(REPO / "docs" / "survey.md")]) == 0


def test_the_dataset_is_the_survey_of_the_recorded_file_list(
    data: tuple[list[dict[str, object]], dict[str, object]],
) -> None:
    rows, run = data
    listed = from_urls(WHEELS, Filters())
    by_key = {r.key: r for r in listed.refs}
    surveyed = {str(r["wheel_key"]) for r in rows}
    assert surveyed == set(by_key)  # every listed wheel has rows, and no other wheel does
    for row in rows:
        ref = by_key[str(row["wheel_key"])]
        assert (row["url"], row["wheel_size"], row["upload_time"]) == (ref.url, ref.size, ref.upload_time)
    runs = run["runs"]
    assert isinstance(runs, list)
    assert sum(r["selected"] for r in runs[-1:]) == len(listed.refs)
    assert runs[-1]["selected_bytes"] == listed.total_bytes


@pytest.mark.parametrize("seed", ["1", "2"])
def test_the_script_checks_the_page_whatever_the_hash_seed(seed: str) -> None:
    """The script as the page says to run it, in processes whose set order differs: the same output (a tie
    between compute_120 and compute_120a once depended on it)."""
    env = {
        **os.environ,
        "PYTHONHASHSEED": seed,
        "PYTHONPATH": os.pathsep.join([str(REPO / "src"), str(REPO)]),
    }
    done = subprocess.run(
        [sys.executable, "benchmarks/survey_findings.py", "--check", "docs/survey.md"],
        cwd=REPO,
        env=env,
        capture_output=True,
        text=True,
        timeout=300,
    )
    assert done.returncode == 0, done.stderr


@pytest.mark.parametrize(
    ("code", "cc", "expected"),
    [
        (["sm_100f", "sm_120a", "compute_90"], (12, 0), (["sm_120a"], ["compute_90"])),
        (["sm_100f", "sm_103", "compute_100f"], (10, 0), (["sm_100f"], ["compute_100f"])),
        (["sm_121", "sm_120f", "compute_121"], (12, 0), (["sm_120f"], [])),  # 12.1 code does not run on 12.0
        (["sm_90a", "compute_90a", "compute_100a"], (10, 0), ([], ["compute_100a"])),
        (["sm_90", "compute_120f"], (10, 0), ([], [])),
    ],
)
def test_what_runs_on_a_blackwell_gpu(code: list[str], cc: tuple[int, int], expected: object) -> None:
    assert sf.runs_on(code, *cc) == expected
