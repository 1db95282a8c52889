"""``audit --load --progress`` says what the long steps are doing (issue 35): pip's current step while it
installs (torch: 95 s on one unchanged line before), and the shared imports while they run (80 s on
another)."""

from __future__ import annotations

from pathlib import Path

import pytest

from cudaship.cli.main import main
from cudaship.exitcodes import ExitCode
from cudaship.oracle.install import pip_step
from tests.oracle.builders import needs_gcc
from tests.oracle.wheels import build

pytestmark = needs_gcc


def test_load_progress_streams_pip_steps_and_the_imports_running(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    built = build(tmp_path, hang=False, segv=False)
    monkeypatch.delenv("GITHUB_ACTIONS", raising=False)
    code = main(
        [
            *("audit", "--progress", "--load", "--offline", "--load-timeout", "20"),
            *("--find-links", str(built.wheelhouse), str(built.wheel)),
        ]
    )
    err = capsys.readouterr().err.splitlines()
    assert code in (ExitCode.OK, ExitCode.FINDINGS)
    name = built.wheel.name
    pip = [line for line in err if line.startswith(f"cudaship: loading: installing {name}: pip: ")]
    steps = [line.split(": pip: ", 1)[1] for line in pip]
    assert f"processing {name}" in steps, err  # a file name, not the directory it is in
    assert "processing deppkg-1.0-py3-none-linux_x86_64.whl (from preloadpkg==1.0)" in steps, err
    assert "installing 2 packages" in steps and steps[-1] == "installed"
    running = [line for line in err if ": running import preloadpkg" in line]
    assert running and running[0].endswith(" probes)"), err  # the shared import, before its probes finish


def test_pip_step_names_what_pip_does() -> None:
    assert pip_step("Collecting torch==2.9.1\n") == "collecting torch==2.9.1"
    assert pip_step("  Downloading https://files.example/t/torch-2.9.1-cp312.whl (899.7 MB)") == (
        "downloading torch-2.9.1-cp312.whl (899.7 MB)"
    )
    assert pip_step("Processing /tmp/x/dist/a-1.0-py3-none-any.whl (from b==1)") == (
        "processing a-1.0-py3-none-any.whl (from b==1)"
    )
    assert pip_step("Installing collected packages: a, b, c") == "installing 3 packages"
    assert pip_step("  Attempting uninstall: x") is None
