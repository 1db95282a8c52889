"""Which libraries the runtime that loads an exported program provides (data: program_runtimes.toml)."""

from __future__ import annotations

from functools import cache

from cudaship.knowledge import _data

_FILE = "program_runtimes.toml"


@cache
def _runtime(kind: str) -> tuple[str, dict[str, frozenset[str]]]:
    entry = _data.section(_FILE, kind)
    name = entry.text("runtime", "the runtime's name")
    libraries = {
        p: frozenset(v.lower() for v in entry.strings(p, single=False)) for p in ("linux", "windows")
    }
    return name, libraries


def runtime_name(kind: str) -> str:
    """The distribution that loads a program of ``kind``: ``torch`` (pt2), ``executorch`` (pte)."""
    return _runtime(kind)[0]


def runtime_providing(kind: str, library: str, platform: str) -> str | None:
    """The runtime (``torch``) that provides ``library`` to a program of ``kind`` (``pt2``, ``pte``) on
    ``platform`` (``linux``, ``windows``), or None."""
    name, libraries = _runtime(kind)
    return name if library.lower() in libraries.get(platform, frozenset()) else None


@cache
def _compiler_runtime(platform: str) -> frozenset[str]:
    value = _data.section(_FILE, "compiler_runtime").strings(platform, single=False)
    return frozenset(v.lower() for v in value)


def is_compiler_runtime(library: str, platform: str) -> bool:
    """Whether ``library`` is a compiler's own C++ runtime that no target machine provides
    (``libstdc++-6.dll`` on ``windows``)."""
    return library.lower() in _compiler_runtime(platform)
