"""Which libraries the runtime that loads an exported program provides (data: program_runtimes.toml)."""

from __future__ import annotations

from functools import cache

from cudaship.errors import KnowledgeError
from cudaship.knowledge import _data

_FILE = "program_runtimes.toml"


@cache
def _runtime(kind: str) -> tuple[str, dict[str, frozenset[str]]]:
    entry = _data.table(_FILE, kind)
    name = entry.get("runtime")
    if not isinstance(name, str):
        raise KnowledgeError(f"knowledge data file {_FILE}: [{kind}] has no runtime name")
    libraries: dict[str, frozenset[str]] = {}
    for platform in ("linux", "windows"):
        value = entry.get(platform, [])
        if not isinstance(value, list) or not all(isinstance(v, str) for v in value):
            raise KnowledgeError(f"knowledge data file {_FILE}: [{kind}].{platform} is not a list of names")
        libraries[platform] = frozenset(v.lower() for v in value)
    return name, libraries


def runtime_providing(kind: str, library: str, platform: str) -> str | None:
    """The runtime (``torch``) that provides ``library`` to a program of ``kind`` (``pt2``, ``pte``) on
    ``platform`` (``linux``, ``windows``), or None."""
    name, libraries = _runtime(kind)
    return name if library.lower() in libraries.get(platform, frozenset()) else None
