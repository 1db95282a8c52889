"""Appending to the files GitHub Actions names in its environment (``$GITHUB_OUTPUT``, ``$GITHUB_ENV``)."""

from __future__ import annotations

from pathlib import Path

from cudaship import envvars
from cudaship.errors import UsageError
from cudaship.safe_write import append_text


def append_github_file(variable: str, text: str, option: str) -> Path:
    """Append ``text`` to the file ``$variable`` names; returns it. ``option`` (``--write github``) names what
    asked for it when the variable is unset; either failure is a UsageError."""
    target = envvars.get(variable)
    if not target:
        raise UsageError(f"{option}: {variable} is not set (not running in a GitHub Actions step?)")
    append_text(target, text, error=UsageError)
    return Path(target)
