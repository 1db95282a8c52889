"""The one rule for where cudaship keeps its on-disk cache, for every part that caches.

``$CUDASHIP_CACHE_DIR`` when set; else the platform's per-user cache directory + ``cudaship``: Windows
``%LOCALAPPDATA%`` (``~/AppData/Local`` when unset), macOS ``~/Library/Caches``, elsewhere ``$XDG_CACHE_HOME``
when it is absolute (the XDG Base Directory specification: a relative value is invalid and ignored), else
``~/.cache``. Each user of the cache takes a folder of its own under it: the index client ``index/``, toolkit
downloads ``toolkit/``.
"""

from __future__ import annotations

import os
import sys
from pathlib import Path

from cudaship import envvars


def root() -> Path:
    """The cache directory (not created here)."""

    explicit = envvars.get("CUDASHIP_CACHE_DIR")
    if explicit:
        return Path(explicit)
    if sys.platform == "win32":
        base = Path(envvars.get("LOCALAPPDATA") or Path.home() / "AppData" / "Local")
    elif sys.platform == "darwin":
        base = Path.home() / "Library" / "Caches"
    else:
        xdg = envvars.get("XDG_CACHE_HOME")
        base = Path(xdg) if xdg and os.path.isabs(xdg) else Path.home() / ".cache"
    return base / "cudaship"


def folder(name: str) -> Path:
    """The folder of one user of the cache (``index``, ``toolkit``) under :func:`root`."""
    return root() / name
