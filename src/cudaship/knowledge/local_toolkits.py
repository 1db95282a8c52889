"""Local CUDA toolkits (``data/local_toolkits.toml``): where a machine's own toolkit lives, outside any Python
environment. A library that loads only because the dynamic linker found a dependency there does not load on a
user's machine without that toolkit (``audit --load``'s rule ``load.toolkit``). Pure: the caller gives the
environment; expanding the globs on a file system is the oracle's."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass

from cudaship.knowledge import _data
from cudaship.once import once

_FILE = "local_toolkits.toml"


@dataclass(frozen=True)
class LocalToolkit:
    name: str
    directories: tuple[str, ...]  #: absolute directories, ``fnmatch`` globs
    variables: tuple[str, ...]  #: environment variables naming such a directory
    source: str


@once
def local_toolkits() -> tuple[LocalToolkit, ...]:
    return tuple(
        LocalToolkit(
            name=row.text("name"),
            directories=row.strings("directories", single=False),
            variables=row.strings("variables", single=False),
            source=row.text("source"),
        )
        for row in _data.document(_FILE).rows("toolkits")
    )


def toolkit_patterns(environ: Mapping[str, str]) -> tuple[tuple[str, str], ...]:
    """(directory glob, the toolkit's name) for each row: its directories, and the value of each of its
    variables set in ``environ`` (``CUDA_HOME=/opt/cuda-12.8`` -> ``/opt/cuda-12.8``)."""
    out: list[tuple[str, str]] = []
    for toolkit in local_toolkits():
        out.extend((d, toolkit.name) for d in toolkit.directories)
        for variable in toolkit.variables:
            value = (environ.get(variable) or "").strip()
            if value.startswith("/"):
                out.append((value.rstrip("/") or "/", f"{toolkit.name} ({variable}={value})"))
    return tuple(out)
