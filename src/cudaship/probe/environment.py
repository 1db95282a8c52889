"""The native libraries of the installed Python distributions: where ``doctor`` looks when given no PATH."""

from __future__ import annotations

import re
from collections.abc import Iterator
from dataclasses import dataclass
from importlib import metadata
from pathlib import Path

#: File names of native libraries and extension modules: .so, .so.13, .so.13.0.88, .pyd, .dll, .dylib.
NATIVE_NAME = re.compile(r"\.(so(\.\d+)*|pyd|dll|dylib)$", re.IGNORECASE)


@dataclass(frozen=True)
class InstalledFile:
    distribution: str  #: "torch"
    version: str  #: "2.11.0+cu130"
    path: Path  #: absolute path on disk


def installed_native_files(path: list[str] | None = None) -> Iterator[InstalledFile]:
    """Native files recorded (RECORD) by each distribution on ``path`` (default: ``sys.path``), once each.

    Distributions are visited in name order; a file listed by two distributions is reported once.
    """
    seen: set[Path] = set()
    dists = metadata.distributions(path=path) if path is not None else metadata.distributions()
    ordered = sorted(dists, key=lambda d: (d.name or "").lower())
    for dist in ordered:
        name = dist.name or "?"
        for item in dist.files or ():
            if not NATIVE_NAME.search(item.name):
                continue
            try:
                located = Path(str(dist.locate_file(item))).resolve()
            except (OSError, RuntimeError):
                continue
            if located in seen or not located.is_file():
                continue
            seen.add(located)
            yield InstalledFile(name, dist.version, located)
