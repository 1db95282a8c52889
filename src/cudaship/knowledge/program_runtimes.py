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


@cache
def _compiler_runtime(platform: str) -> frozenset[str]:
    entry = _data.table(_FILE, "compiler_runtime")
    value = entry.get(platform, [])
    if not isinstance(value, list) or not all(isinstance(v, str) for v in value):
        raise KnowledgeError(
            f"knowledge data file {_FILE}: [compiler_runtime].{platform} is not a list of names"
        )
    return frozenset(v.lower() for v in value)


def is_compiler_runtime(library: str, platform: str) -> bool:
    """Whether ``library`` is a compiler's own C++ runtime that no target machine provides
    (``libstdc++-6.dll`` on ``windows``)."""
    return library.lower() in _compiler_runtime(platform)
