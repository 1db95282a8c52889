"""Exclude flags for the repair tools people keep: auditwheel (Linux) and delvewheel (Windows), so they never
copy a CUDA library an NVIDIA wheel provides (``cudaship repair --print-excludes``)."""

from __future__ import annotations

import shlex
from collections.abc import Iterable

from cudaship.errors import UsageError
from cudaship.knowledge.libraries import OS
from cudaship.knowledge.repair import provided_names

TOOLS = ("auditwheel", "delvewheel")


def exclude_flags(tool: str, majors: Iterable[int]) -> tuple[str, ...]:
    """The arguments that keep ``tool`` from vendoring the libraries NVIDIA wheels provide for the CUDA
    ``majors``: one ``--exclude NAME`` per library for both. auditwheel takes a SONAME per ``--exclude``;
    delvewheel (1.9.0 and later: ``action='append'``) splits each value on the path separator of the host it
    runs on (``;`` on Windows, ``:`` elsewhere), so one name per flag works on every host, where a joined list
    works on one kind of host only."""
    if tool in TOOLS:
        os_name: OS = "linux" if tool == "auditwheel" else "windows"
        names = sorted({n for m in majors for n in provided_names(m, os_name)}, key=str.lower)
        return tuple(arg for name in names for arg in ("--exclude", name))
    raise UsageError(f"--print-excludes: unknown tool {tool!r} (known: {', '.join(TOOLS)})")


def command_line(flags: tuple[str, ...]) -> str:
    """The flags as one shell line (POSIX quoting)."""
    return " ".join(shlex.quote(f) for f in flags)
