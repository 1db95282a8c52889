"""Exclude flags for the repair tools people keep: auditwheel (Linux) and delvewheel (Windows), so they never
copy a CUDA library an NVIDIA wheel provides (``cudaship repair --print-excludes``)."""

from __future__ import annotations

import shlex
from collections.abc import Iterable

from cudaship.errors import UsageError
from cudaship.knowledge.repair import provided_names

TOOLS = ("auditwheel", "delvewheel")


def exclude_flags(tool: str, majors: Iterable[int]) -> tuple[str, ...]:
    """The arguments that keep ``tool`` from vendoring the libraries NVIDIA wheels provide for the CUDA
    ``majors``: auditwheel takes one ``--exclude SONAME`` each, delvewheel one ``--exclude`` with the DLL
    names joined by ``;`` (its path separator on Windows)."""
    if tool == "auditwheel":
        names = sorted({n for m in majors for n in provided_names(m, "linux")}, key=str.lower)
        return tuple(arg for name in names for arg in ("--exclude", name))
    if tool == "delvewheel":
        dlls = sorted({n for m in majors for n in provided_names(m, "windows")}, key=str.lower)
        return ("--exclude", ";".join(dlls)) if dlls else ()
    raise UsageError(f"--print-excludes: unknown tool {tool!r} (known: {', '.join(TOOLS)})")


def command_line(flags: tuple[str, ...]) -> str:
    """The flags as one shell line (POSIX quoting)."""
    return " ".join(shlex.quote(f) for f in flags)
