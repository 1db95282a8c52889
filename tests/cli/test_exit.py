"""How the ``cudaship`` process ends (``cli.main.entry`` / ``exit_now``), run as a real process.

The console script skips the interpreter's teardown when nothing depends on it: the output, the exit status
and the ``atexit`` functions must be exactly what a normal exit gives; with another thread alive the normal
exit runs (it waits for the thread). The larger collection threshold is the console script's only.
"""

from __future__ import annotations

import gc
import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from cudaship.cli.main import GC_THRESHOLD, main

REPO = Path(__file__).resolve().parents[2]
EXAMPLE = REPO / "examples" / "libvecadd.so"


def python(code: str, *args: str) -> subprocess.CompletedProcess[str]:
    env = {**os.environ, "PYTHONPATH": str(REPO / "src")}
    return subprocess.run(
        [sys.executable, "-c", code, *args], capture_output=True, text=True, env=env, timeout=120, check=False
    )


def cudaship(*args: str) -> subprocess.CompletedProcess[str]:
    return python("from cudaship.cli.main import entry; entry()", *args)


def test_report_and_status_are_complete(capsys: pytest.CaptureFixture[str]) -> None:
    done = cudaship("inspect", "--no-progress", "--format", "json", str(EXAMPLE))
    assert done.returncode == 0, done.stderr
    assert main(["inspect", "--no-progress", "--format", "json", str(EXAMPLE)]) == 0
    assert done.stdout == capsys.readouterr().out
    assert json.loads(done.stdout)["ok"] is True


def test_bad_input_status_and_error_line(tmp_path: Path) -> None:
    missing = tmp_path / "missing.so"
    done = cudaship("inspect", "--no-progress", "--format", "json", str(EXAMPLE), str(missing))
    assert done.returncode == 2
    assert done.stderr.splitlines() == [f"cudaship: error: {missing}: no such file or directory"]
    assert len(json.loads(done.stdout)["files"]) == 2


def test_output_file_is_written(tmp_path: Path) -> None:
    target = tmp_path / "report.json"
    done = cudaship("inspect", "--no-progress", "--format", "json", "-o", str(target), str(EXAMPLE))
    assert done.returncode == 0 and done.stdout == ""
    assert json.loads(target.read_text())["files"][0]["path"] == str(EXAMPLE)


def test_atexit_functions_run_and_their_output_is_kept() -> None:
    done = python(
        "import atexit, sys\n"
        "from cudaship.cli.main import exit_now\n"
        "atexit.register(lambda: print('at exit', flush=False))\n"
        "sys.stdout.write('report')\n"
        "exit_now(3)\n"
    )
    assert (done.returncode, done.stdout) == (3, "reportat exit\n")


def test_a_live_thread_gets_the_normal_exit() -> None:
    done = python(
        "import threading, time\n"
        "from cudaship.cli.main import exit_now\n"
        "def late():\n"
        "    time.sleep(0.3)\n"
        "    print('thread done')\n"
        "threading.Thread(target=late).start()\n"
        "exit_now(1)\n"
    )
    assert (done.returncode, done.stdout) == (1, "thread done\n")


def test_collection_threshold_is_the_console_script_s_only() -> None:
    done = python(
        "import atexit, gc\n"
        "from cudaship.cli.main import entry\n"
        "atexit.register(lambda: print(gc.get_threshold()))\n"
        "entry()\n",
        "--version",
    )
    assert done.returncode == 0
    assert done.stdout.splitlines()[-1] == str((GC_THRESHOLD, *gc.get_threshold()[1:]))
    assert main(["--version"]) == 0
    assert gc.get_threshold()[0] != GC_THRESHOLD, "main() (the library's entry) leaves the threshold alone"
