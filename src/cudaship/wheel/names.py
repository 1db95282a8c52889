"""What a valid wheel member path is.

A wheel's members install under site-packages (or a ``.data`` scheme directory) at the path their name
gives, and RECORD lists them by that name, one CSV row each. A name is a valid member path when it is
relative, uses ``/`` only, and every component is a plain file or directory name:

* no ``..`` component (it climbs out of site-packages) and no ``.`` component (the same file under a second
  name: RECORD's row and the member no longer match by name);
* not absolute (``/etc/x``), no drive letter (``C:x``, ``C:/x``) and no backslash (``C:\\x``, ``\\\\host\\x``,
  ``pkg\\..\\..\\x``: installers on Windows read it as a separator);
* no empty component (``pkg//x``, a trailing ``/`` on a file);
* no control character (C0 including NUL, DEL, C1) and no lone surrogate: a line break in a name forges rows
  of a RECORD written by string joins and lines of every report; a NUL ends the name for C code.

:func:`name_problem` says why a name is not one (None when it is). Readers flag such members (a RECORD
problem of kind ``name``, :class:`~cudaship.wheel.metadata.RecordVerifier`); ``repair`` refuses the wheel.
Pure: a string in, a string out.
"""

from __future__ import annotations

import re

#: A drive letter at the start of a name (``C:``), as Windows reads it.
_DRIVE = re.compile(r"[A-Za-z]:")


#: C0 controls (NUL to US), DEL and C1 controls; lone surrogates (what a name that is not UTF-8 decodes to
#: with ``surrogateescape``).
_BAD_CHARACTER = re.compile("[\x00-\x1f\x7f-\x9f\ud800-\udfff]")


def _unprintable(name: str) -> str | None:
    found = _BAD_CHARACTER.search(name)
    if found is None:
        return None
    code = ord(found.group(0))
    kind = "a lone surrogate" if 0xD800 <= code <= 0xDFFF else "a control character"
    return f"{kind} (U+{code:04X})"


def name_problem(name: str) -> str | None:
    """Why ``name`` (a file member's name, as stored) is not a valid wheel member path; None when it is."""
    if not name:
        return "an empty name"
    bad = _unprintable(name)
    if bad is not None:
        return f"it holds {bad}"
    if "\\" in name:
        return "it holds a backslash (a path separator on Windows)"
    if name.startswith("/"):
        return "an absolute path"
    if _DRIVE.match(name):
        return "it starts with a drive letter"
    for part in name.split("/"):
        if part == "..":
            return "a '..' component (outside the install directory)"
        if part == ".":
            return "a '.' component"
        if not part:
            return "an empty component"
    return None


def is_valid_member_name(name: str) -> bool:
    return name_problem(name) is None
