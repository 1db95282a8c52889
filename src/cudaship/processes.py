"""Child processes run for their text output: the child's stdout and stderr captured and decoded as UTF-8
(undecodable bytes replaced, so a crash's output is still read), bounded by a timeout, the exit code left to
the caller."""

from __future__ import annotations

import subprocess
from collections.abc import Mapping, Sequence
from pathlib import Path


def run_text(
    args: Sequence[str],
    *,
    timeout: float,
    cwd: Path | None = None,
    env: Mapping[str, str] | None = None,
    stdin: int | None = None,
) -> subprocess.CompletedProcess[str]:
    """``subprocess.run`` of ``args`` with its output captured as text; raises what it raises (``OSError``,
    ``subprocess.TimeoutExpired``)."""
    return subprocess.run(
        list(args),
        cwd=cwd,
        env=env,
        stdin=stdin,
        capture_output=True,
        text=True,
        encoding="utf-8",
        errors="replace",
        timeout=timeout,
        check=False,
    )
