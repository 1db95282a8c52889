"""NVIDIA's cuobjdump as an oracle: its listing of SASS and PTX entries, in cudaship's arch names.

Known blind spots, each handled by the tests that use this module and said there:
- cuobjdump cannot read PE files at all (Windows DLLs are compared against their Linux twins instead);
- it drops the ``f`` of family-specific SASS (``sm_100f`` cubins are listed as ``sm_100``), so SASS names are
  compared with the ``f`` removed; PTX keeps it;
- without ``-all`` it skips relocatable fatbins when an executable one exists: the listing here always passes
  ``-all`` so every container is listed;
- on some real libraries it stops with "Invalid ELF" after the first cubin: :attr:`Listing.complete` is False
  and what it did list must be a part of cudaship's listing;
- it does not list LTO-IR entries.
"""

from __future__ import annotations

import re
import subprocess
from collections import Counter
from collections.abc import Iterable
from dataclasses import dataclass
from pathlib import Path

from cudaship.records.binary import DeviceCode, DeviceCodeKind

_LINE = re.compile(r"^(ELF|PTX) file\s+\d+:\s+(\S+)\.(cubin|ptx)\s*$")
_ARCH = re.compile(r"\.(sm_\d+[af]?)$")


@dataclass(frozen=True)
class Listing:
    sass: Counter[str]  #: cuobjdump's SASS names (``sm_90a``; ``f`` dropped by cuobjdump itself)
    ptx: Counter[str]  #: as ``compute_XY[a|f]``
    complete: bool  #: False when cuobjdump stopped on an error (e.g. "Invalid ELF")
    message: str  #: its diagnostics


def cuobjdump_listing(cuobjdump: Path, path: Path) -> Listing:
    done = subprocess.run(
        [str(cuobjdump), "-all", "--list-elf", "--list-ptx", str(path)],
        capture_output=True,
        text=True,
        timeout=600,
        check=False,
    )
    sass: Counter[str] = Counter()
    ptx: Counter[str] = Counter()
    for line in done.stdout.splitlines():
        match = _LINE.match(line.strip())
        if match is None:
            continue
        arch = _ARCH.search(match.group(2))
        if arch is None:
            continue
        if match.group(1) == "ELF":
            sass[arch.group(1)] += 1
        else:
            ptx["compute_" + arch.group(1)[3:]] += 1
    # "info: ... does not contain device code" exits non-zero too: only a fatal message means it stopped
    fatal = "fatal" in done.stderr
    return Listing(sass, ptx, complete=not fatal, message=done.stderr.strip())


def as_cuobjdump_names(code: Iterable[DeviceCode]) -> tuple[Counter[str], Counter[str]]:
    """cudaship's entries in cuobjdump's spelling: SASS without the family ``f``; PTX as is."""
    sass: Counter[str] = Counter()
    ptx: Counter[str] = Counter()
    for d in code:
        if d.kind is DeviceCodeKind.SASS:
            sass[d.arch[:-1] if d.variant == "f" else d.arch] += 1
        elif d.kind is DeviceCodeKind.PTX:
            ptx[d.arch] += 1
    return sass, ptx


def is_part_of(small: Counter[str], big: Counter[str]) -> bool:
    return all(big[k] >= v for k, v in small.items())
