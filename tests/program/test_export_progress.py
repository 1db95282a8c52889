"""``program export`` says what it is doing (issue 35): it was silent for 17 s and then leaked torch's
``FutureWarning`` onto stderr, where it reads as cudaship's own. Phases go to stderr with ``--progress``;
torch's warnings into the report's ``warning:`` lines.

The first draft of these tests hung: sorting the warnings while they were still being recorded, a warning that
is not torch's was shown into the list being read, which then never ended. torch 2.13 issues one through
``copyreg.py`` as it saves the exported program, so every CPU export hung after ``checking the package``."""

from __future__ import annotations

import shutil
import subprocess
import sys
import sysconfig
import warnings
from pathlib import Path

import pytest

from cudaship.program.export import torch_warnings
from tests.program.conftest import HAS_TORCH

REPO = Path(__file__).resolve().parents[2]


@pytest.mark.slow
def test_export_says_each_phase_as_it_starts(tmp_path: Path) -> None:
    """The command as a user runs it: without torch, the phase it stopped at and the one-line error; with
    torch (and g++), every phase in order, exit 0, and no warning loose on stderr."""
    if HAS_TORCH and shutil.which("g++") is None:
        pytest.skip("AOTInductor needs a C++ compiler (g++) to export")
    command = ["program", "export", "demo-mlp", "--device", "cpu", "--out", str(tmp_path / "e"), "--progress"]
    done = subprocess.run(
        [sys.executable, "-m", "cudaship", *command],
        capture_output=True,
        text=True,
        timeout=1800,  # a guard against a hang, not a measure: an export takes about a minute
        check=False,
        cwd=REPO,
    )
    phases = [x for x in done.stderr.splitlines() if x.startswith("cudaship: export: ")]
    assert phases[:1] == ["cudaship: export: importing torch"], done.stderr
    if not HAS_TORCH:  # the phase that failed is the last one said, then the one-line error
        assert done.returncode == 2 and "torch is not importable" in done.stderr.splitlines()[-1]
        return
    assert done.returncode == 0, done.stderr
    said = [p.removeprefix("cudaship: export: ") for p in phases]
    assert said[1:3] == ["loading the model demo-mlp", "exporting the graph (torch.export, cpu)"]
    assert said[3].startswith("compiling with AOTInductor (") and said[-1] == "checking the package"
    assert "Warning" not in done.stderr  # torch's warnings are the report's, not loose on stderr


def test_torch_warnings_are_recorded_once_and_others_still_shown() -> None:
    """torch's warnings (its files, and the standard library's on its behalf) are recorded once each; any
    other is shown as Python shows it, once, and the block ends (it never did when one was shown)."""
    recorded: list[str] = []
    torch_file = str(Path("site-packages") / "torch" / "export" / "__init__.py")
    copyreg = str(Path(sysconfig.get_paths()["stdlib"]) / "copyreg.py")
    with warnings.catch_warnings(record=True) as outside:
        warnings.simplefilter("always")
        with torch_warnings(recorded):
            for _ in range(2):
                warnings.warn_explicit("export is changing\nmore text", FutureWarning, torch_file, 10)
            warnings.warn_explicit("LeafSpec is deprecated", FutureWarning, copyreg, 106)
            warnings.warn_explicit("not torch's", UserWarning, "/src/mine.py", 3)
    assert recorded == [
        "torch: FutureWarning: export is changing",
        "torch: FutureWarning: LeafSpec is deprecated",
    ]
    assert [str(w.message) for w in outside] == ["not torch's"]
