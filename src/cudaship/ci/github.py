"""Appending to the files GitHub Actions names in its environment (``$GITHUB_OUTPUT``, ``$GITHUB_ENV``)."""

from __future__ import annotations

import os
from pathlib import Path

from cudaship.errors import UsageError


def append_github_file(variable: str, text: str, option: str) -> Path:
    """Append ``text`` to the file ``$variable`` names; returns it. ``option`` (``--write github``) names what
    asked for it when the variable is unset; either failure is a UsageError."""
    target = os.environ.get(variable)
    if not target:
        raise UsageError(f"{option}: {variable} is not set (not running in a GitHub Actions step?)")
    try:
        with Path(target).open("a", encoding="utf-8", newline="\n") as f:
            f.write(text)
    except OSError as e:
        raise UsageError(f"cannot append to {variable}: {e.strerror}", path=target) from e
    return Path(target)
