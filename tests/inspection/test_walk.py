"""walk.py: inputs in order, directories walked, progress hooks account for every byte."""

from __future__ import annotations

import json
import shutil
from pathlib import Path

import pytest

from cudaship.cli.main import main
from cudaship.inspection.walk import InspectObserver, inspect_paths
from cudaship.records.files import FileReport

EXAMPLE = Path(__file__).resolve().parents[2] / "examples" / "libvecadd.so"


class Recorder(InspectObserver):
    def __init__(self) -> None:
        self.total = -1
        self.read: list[str] = []
        self.reports: list[FileReport] = []
        self.advanced_bytes = 0

    def planned(self, total_bytes: int) -> None:
        self.total = total_bytes

    def reading(self, label: str) -> None:
        self.read.append(label)

    def done(self, report: FileReport) -> None:
        self.reports.append(report)

    def advanced(self, nbytes: int) -> None:
        self.advanced_bytes += nbytes


@pytest.mark.network
def test_progress_accounts_for_every_byte(tmp_path: Path, cudart_windows_wheel: Path) -> None:
    (tmp_path / "d").mkdir()
    shutil.copy(EXAMPLE, tmp_path / "d" / "a.so")
    recorder = Recorder()
    report = inspect_paths([tmp_path / "d", cudart_windows_wheel, tmp_path / "missing.so"], observer=recorder)
    assert recorder.total == EXAMPLE.stat().st_size + cudart_windows_wheel.stat().st_size
    assert recorder.advanced_bytes == recorder.total
    assert recorder.reports == list(report.files)
    assert len(recorder.read) == len(report.files) - 1  # the missing file is never read
    assert any("!" in label for label in recorder.read), "wheel members are labelled wheel!member"


def test_reports_follow_input_order(tmp_path: Path) -> None:
    first = tmp_path / "z_first.so"
    shutil.copy(EXAMPLE, first)
    report = inspect_paths([first, tmp_path / "nope.so", EXAMPLE])
    assert [f.path for f in report.files] == [str(first), str(tmp_path / "nope.so"), str(EXAMPLE)]
    assert report.exit_code == 2


def test_symlink_loop_in_directory_does_not_hang(tmp_path: Path) -> None:
    (tmp_path / "pkg").mkdir()
    shutil.copy(EXAMPLE, tmp_path / "pkg" / "lib.so")
    (tmp_path / "pkg" / "loop").symlink_to(tmp_path / "pkg")
    (tmp_path / "pkg" / "dangling.so").symlink_to(tmp_path / "nowhere.so")
    report = inspect_paths([tmp_path / "pkg"])
    assert [Path(f.path).name for f in report.files] == ["lib.so"]
    assert report.exit_code == 0


def test_forced_progress_keeps_stdout_clean(capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["inspect", "--progress", "--format", "json", str(EXAMPLE)]) == 0
    out, _ = capsys.readouterr()
    assert json.loads(out)["files"][0]["sass"]
