"""A per-process scratch directory for targets whose reader takes a path (wheels, archives, policies)."""

from __future__ import annotations

import atexit
import shutil
import tempfile
from pathlib import Path

_ROOT: Path | None = None


def scratch() -> Path:
    global _ROOT
    if _ROOT is None:
        _ROOT = Path(tempfile.mkdtemp(prefix="cudaship-fuzz-"))
        atexit.register(shutil.rmtree, _ROOT, True)
    return _ROOT
