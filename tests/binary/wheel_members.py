"""Copying one member of a real wheel out to a file, for reader tests that compare with system tools."""

from __future__ import annotations

import shutil
import zipfile
from pathlib import Path


def extract(wheel: Path, member: str, into: Path) -> Path:
    """``member`` of ``wheel`` as ``into/<its base name>`` (kept when already there)."""
    target = into / Path(member).name
    if not target.exists():
        with zipfile.ZipFile(wheel) as zf, zf.open(member) as src, target.open("wb") as dst:
            shutil.copyfileobj(src, dst)
    return target
