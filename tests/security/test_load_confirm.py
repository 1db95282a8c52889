"""``doctor --env --confirm`` imports an installed environment's packages, running their code: the same
containment as ``audit --load`` (issue 30, class 5). An environment built here holds a package with an
extension module (so --confirm imports it) whose import reports its environment and leaves a ``setsid``
grandchild holding stderr open; cudaship runs in a fresh process bounded by a timeout."""

from __future__ import annotations

import contextlib
import json
import os
import shutil
import signal
import subprocess
import sys
from pathlib import Path

import pytest

from tests.fixtures.preload_env import EXT, dist, ext_module, make_venv
from tests.security.load_wheels import DAEMON, REPO, SECRETS
from tests.security.test_load_containment import _alive

pytestmark = pytest.mark.skipif(
    shutil.which("gcc") is None or not sys.platform.startswith("linux"), reason="needs gcc and glibc"
)

SPY_AND_DAEMON = (
    """import json, os
from . import _x
with open({report!r}, "a") as f:
    f.write(json.dumps(sorted(os.environ)) + "\\n")
"""
    + DAEMON
)


def test_confirm_hides_secrets_and_leaves_no_process(tmp_path: Path) -> None:
    python, site = make_venv(tmp_path / "venv")
    pids = tmp_path / "pids"
    pids.mkdir()
    report = tmp_path / "seen.jsonl"
    ext = ext_module(tmp_path / "build", "_x", "", "0")
    init = SPY_AND_DAEMON.format(report=str(report), pids=str(pids))
    dist(site, "spyd", "1.0", {"spyd/__init__.py": init, f"spyd/_x{EXT}": ext})
    environ = dict(os.environ, **SECRETS, PYTHONPATH=str(REPO / "src"))
    command = [sys.executable, "-m", "cudaship", "doctor", "--env", str(python), "--confirm"]
    command += ["--confirm-only", "spyd", "--confirm-timeout", "5", "--format", "json"]
    left: list[int] = []
    try:
        done = subprocess.run(command, env=environ, capture_output=True, text=True, timeout=150, check=False)
    finally:
        left = [int(p.name) for p in pids.iterdir()]
        alive = [pid for pid in left if _alive(pid)]
        for pid in left:
            with contextlib.suppress(OSError):
                os.kill(pid, signal.SIGKILL)
    assert done.returncode in (0, 1), done.stderr
    doc = json.loads(done.stdout)
    seen = [set(json.loads(line)) for line in report.read_text().splitlines()]
    assert seen and [sorted(keys & set(SECRETS)) for keys in seen if keys & set(SECRETS)] == []
    assert left and alive == []
    assert "RUNNING THEIR CODE" in doc["confirm"]["notes"][0]
