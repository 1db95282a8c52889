"""Ctrl-C during ``audit`` of a large wheel read on worker processes (issue 35): one line ``cudaship:
aborted``, exit 130, no traceback (a worker that took the SIGINT printed a 22-line ``ForkServerProcess``
traceback), and no process of the command left behind.

The command runs as the console script does, in a session of its own, and the SIGINT goes to its whole
process group, as a terminal sends it: to the command, its fork server and every worker. Waits are bounded by
counting polls, never by a clock.
"""

from __future__ import annotations

import contextlib
import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest

from tests.cli.test_exit import REPO

pytestmark = [pytest.mark.slow, pytest.mark.skipif(not sys.platform.startswith("linux"), reason="/proc")]

POLL = 0.05
#: polls before giving up: the workers start within a second or two on a loaded machine
POLLS = 1200


def _group(pgid: int) -> list[int]:
    """Processes of process group ``pgid`` still there (zombies included until reaped)."""
    found = []
    for entry in os.listdir("/proc"):
        if not entry.isdigit():
            continue
        try:
            stat = Path(f"/proc/{entry}/stat").read_text()
        except OSError:
            continue
        fields = stat[stat.rindex(")") + 2 :].split()
        if int(fields[2]) == pgid and fields[0] != "Z":
            found.append(int(entry))
    return found


@pytest.mark.parametrize(
    "progress",
    [
        pytest.param("--progress", id="fork-server"),  # a progress thread: workers come from the fork server
        pytest.param("--no-progress", id="forked"),  # no other thread: workers forked from the command
    ],
)
def test_ctrl_c_during_audit_is_one_line_and_exit_130(progress: str, bitsandbytes_linux_wheel: Path) -> None:
    env = {**os.environ, "PYTHONPATH": str(REPO / "src"), "CUDASHIP_PROCESSES": "always"}
    env.pop("CUDASHIP_TRAIN", None)
    command = [sys.executable, "-c", "from cudaship.cli.main import entry; entry()"]
    child = subprocess.Popen(
        [*command, "audit", progress, "--offline", str(bitsandbytes_linux_wheel)],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
        env=env,
        start_new_session=True,
    )
    try:
        for _ in range(POLLS):  # working: its worker processes are there
            if len([p for p in _group(child.pid) if p != child.pid]) >= 2 or child.poll() is not None:
                break
            time.sleep(POLL)
        assert child.poll() is None, "the audit ended before it could be interrupted"
        assert len(_group(child.pid)) >= 3
        info = []  # for a failure: which process printed what
        for pid in _group(child.pid):
            with contextlib.suppress(OSError):
                info.append((pid, Path(f"/proc/{pid}/cmdline").read_text().replace("\0", " ")[:70]))
        os.killpg(child.pid, signal.SIGINT)
        out, err = child.communicate(timeout=120)
    finally:
        if child.poll() is None:
            os.killpg(child.pid, signal.SIGKILL)
            child.communicate()
    assert child.returncode == 130, err
    assert out == ""
    assert "Traceback" not in err and "Error" not in err, (info, err)
    lines = err.splitlines()
    assert lines[-1] == "cudaship: aborted"
    assert all(line.startswith("cudaship: auditing") for line in lines[:-1]), lines  # progress only before
    if progress == "--no-progress":
        assert err == "cudaship: aborted\n"
    left = _group(child.pid)
    for _ in range(POLLS):  # the fork server and resource tracker end when they see the command gone
        if not left:
            break
        time.sleep(POLL)
        left = _group(child.pid)
    assert left == []
