"""Opening a program file (or an export directory) by content: ``.pt2`` zip or ExecuTorch ``.pte``."""

from __future__ import annotations

import mmap
from contextlib import suppress
from dataclasses import replace
from pathlib import Path

from cudaship.errors import ProgramError
from cudaship.inspection.program_records import ProgramInfo, Provenance
from cudaship.inspection.provenance import PROVENANCE_FILE, read_provenance
from cudaship.inspection.pt2 import read_pt2
from cudaship.inspection.pte import is_pte, read_pte
from cudaship.safe_read import open_regular

PACKAGE_SUFFIXES = (".pt2", ".pte")


def find_package(directory: Path) -> Path:
    """The one program file in an export directory (``provenance.json`` names it when present)."""

    if (directory / PROVENANCE_FILE).is_file():
        return directory / read_provenance(directory).package
    found = sorted(p for p in directory.iterdir() if p.suffix in PACKAGE_SUFFIXES and p.is_file())
    if not found:
        raise ProgramError("no .pt2 or .pte program in the directory", path=str(directory))
    if len(found) > 1:
        names = ", ".join(p.name for p in found)
        raise ProgramError(f"several programs in the directory ({names}): name one", path=str(directory))
    return found[0]


def _provenance_naming(package: Path) -> Provenance | None:
    """The ``provenance.json`` beside ``package`` when it names that package (None when absent, unreadable
    or about another file: the package is then read as a bare one)."""

    if not (package.parent / PROVENANCE_FILE).is_file():
        return None
    try:
        prov = read_provenance(package.parent)
    except ProgramError:
        return None
    return prov if prov.package == package.name else None


def read_program(path: str | Path, *, details: bool = False) -> ProgramInfo:
    """Read a ``.pt2`` or ``.pte`` file (by content, not name), or the program of an export directory;
    ``details`` reads device code as ``inspect --details`` does."""
    target = Path(path)
    if target.is_dir():
        target = find_package(target)
    label = str(target)

    try:
        with open_regular(target, error=ProgramError) as f:
            head = f.read(16)
            if not head:
                raise ProgramError("empty file", path=label)
            if not (head.startswith(b"PK") or is_pte(head)):
                raise ProgramError(
                    "not a program: neither an AOTInductor package (zip) nor an ExecuTorch .pte", path=label
                )
            buf = mmap.mmap(f.fileno(), 0, access=mmap.ACCESS_READ)
            try:
                if head.startswith(b"PK"):
                    info = read_pt2(buf, label, details=details)
                else:
                    info = read_pte(buf, label, details=details)
            finally:
                with suppress(BufferError):  # a view still alive in a traceback: the map goes with it
                    buf.close()
    except FileNotFoundError:
        raise ProgramError("no such file", path=label) from None
    except IsADirectoryError:
        raise ProgramError("is a directory", path=label) from None
    except OSError as e:
        raise ProgramError(f"cannot read: {e.strerror or e}", path=label) from None
    prov = _provenance_naming(target)
    if prov is not None:
        info = replace(info, provenance=prov)
    if info.kind.value == "pte":
        sidecars = sorted(p.name for p in target.parent.glob("*.ptd"))
        note = f"weights: {', '.join(sidecars)} beside it" if sidecars else "no .ptd weights file beside it"
        info = replace(info, notes=(*info.notes, note))
    return info
