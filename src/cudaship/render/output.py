"""Writing a rendered report to stdout or to ``-o FILE`` (opened only when there is something to write)."""

from __future__ import annotations

import os
import sys
import tempfile
from pathlib import Path

from cudaship.errors import UsageError


def write_report(text: str, output: str | Path | None) -> None:
    """Write ``text`` to ``output`` atomically (temp file + rename), or to stdout for None or '-'."""
    if output is None or str(output) == "-":
        sys.stdout.write(text)
        if text and not text.endswith("\n"):
            sys.stdout.write("\n")
        sys.stdout.flush()
        return
    target = Path(output)
    directory = target.parent if str(target.parent) else Path(".")
    try:
        fd, tmp = tempfile.mkstemp(prefix=f".{target.name}.", dir=directory)
    except OSError as e:
        raise UsageError(f"cannot write report: {e.strerror}", path=str(target)) from e
    try:
        with os.fdopen(fd, "w", encoding="utf-8", newline="\n") as f:
            f.write(text if text.endswith("\n") or not text else text + "\n")
        os.replace(tmp, target)
    except OSError as e:
        Path(tmp).unlink(missing_ok=True)
        raise UsageError(f"cannot write report: {e.strerror}", path=str(target)) from e
