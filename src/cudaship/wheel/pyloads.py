"""What a wheel's Python code loads itself before its extensions: the reader behind class 1 of issue 21.

A package may load the native libraries its extension needs from its own Python code, before importing the
extension: ``ctypes.CDLL(path, mode=RTLD_GLOBAL)`` / ``cdll.LoadLibrary`` / ``ctypes.WinDLL`` over names,
paths or globs, ``os.add_dll_directory`` (Windows), a ``load_library()`` helper of another package, over a
shipped JSON or text list of library names; or it computes library paths at run time (``importlib.metadata``
into an environment variable its native code reads: a ``computed`` call, which the audit calls
uncertain). glibc then matches the extension's DT_NEEDED against the loaded object's SONAME; Windows reuses a
loaded DLL of the same name.

:func:`python_loads` reads one ``.py`` member: only a file that names one of those mechanisms is read
(a byte search first), with regular expressions (linear in its size; :mod:`ast` was measured at 0.8 s for
torch's 25 such files, the expressions at a few milliseconds), and only files up to :data:`MAX_SOURCE` bytes;
what it keeps is bounded (:data:`MAX_STRINGS` strings, calls and dotted names). :func:`library_list` reads
a small ``.json`` / ``.txt`` member for library names. Neither runs the code.
"""

from __future__ import annotations

import re

from cudaship.wheel.records import LibraryList, LoadCall, PythonLoads

#: .py members larger than this are not read (generated tables, vendored modules)
MAX_SOURCE = 1 << 20
#: at most this many strings / dotted names kept per file
MAX_STRINGS = 4096
#: .json / .txt members larger than this are not read for library names
MAX_LIST = 64 << 10

#: the call names that load a library or add a directory to the search (attribute or plain name)
_LOADERS = {
    "CDLL": "dlopen",
    "PyDLL": "dlopen",
    "WinDLL": "dlopen",
    "OleDLL": "dlopen",
    "LoadLibrary": "dlopen",
    "LoadLibraryEx": "dlopen",
    "add_dll_directory": "directory",
    "load_library": "helper",
}
#: ``load_library()`` helpers that are a dlopen of the path given (not a distribution's helper that loads its
#: own libraries): ``torch.ops.load_library(path)`` calls ``ctypes.CDLL(path)`` and registers the library's
#: operators (torch/_ops.py, ``_Ops.load_library``; torchvision, torchaudio and torchcodec load their
#: extensions with it)
_DLOPEN_HELPERS = frozenset({("torch", "ops")})
#: a file is read only when it holds one of these: ctypes' loaders come from ``ctypes``, the helpers are
#: ``load_library``, the DLL directory is ``add_dll_directory`` (three byte searches: torch's 47 MiB of
#: Python in 0.07 s of one core)
_TRIGGERS = (b"ctypes", b"load_library", b"dll_dir", b"importlib")
#: a file that reads a distribution's files through importlib.metadata ...
_METADATA = re.compile(rb"importlib[._]metadata|\bimportlib_metadata\b")
#: ... and hands what it builds to native code through an environment variable: a path computed at run time
#: that the package's native holder loads (issue 32, class 3)
_ENV_SET = re.compile(
    rb"os\.environ\s*\[\s*(?:'([^'\n]{1,128})'|\"([^\"\n]{1,128})\"|[A-Za-z_]\w*)\s*\]\s*=(?!=)"
    rb"|os\.environ\.(?:setdefault|update)\s*\(|os\.putenv\s*\("
)
_LIBRARY_NAME = re.compile(rb"(?:lib[\w.+-]*\.so(?:\.\d+)*|[\w.+-]+\.(?:dll|dylib))", re.IGNORECASE)


_CALL = re.compile(rb"(" + "|".join(sorted(_LOADERS, key=len, reverse=True)).encode() + rb")\s*\(")
#: the dotted prefix written just before a loader's name (``ctypes.``, ``ctypes.cdll.``, ``librmm.``)
_PREFIX = re.compile(rb"(?:[A-Za-z_]\w*\.)+$")
_STRING = re.compile(rb"'([^'\\\n]{1,256})'|\"([^\"\\\n]{1,256})\"")
_DOTTED = re.compile(rb"(?<![\w.])[A-Za-z_]\w*(?:\.[A-Za-z_]\w*)+")
#: how far past a call's opening parenthesis its arguments are read (for RTLD_GLOBAL)
_ARGS = 512
#: a ``directory`` call's nearby strings: those of this many lines before it, and of its arguments
_NEAR_LINES = 16
#: at most this many nearby strings kept per call
_NEAR_STRINGS = 32


def _arguments(data: bytes, start: int) -> bytes:
    """The text of a call's arguments from just after its ``(`` to the matching ``)`` (at most :data:`_ARGS`
    bytes)."""
    depth = 1
    end = min(len(data), start + _ARGS)
    for i in range(start, end):
        c = data[i]
        if c == 0x28:  # (
            depth += 1
        elif c == 0x29:  # )
            depth -= 1
            if depth == 0:
                return data[start:i]
    return data[start:end]


def python_loads(name: str, data: bytes) -> PythonLoads | None:
    """The loading calls of the Python source ``data`` (member ``name``), or None when it has none (or is
    too large). Read with regular expressions, not executed nor parsed: a call is a loader's name followed by
    ``(`` (not a ``def``), with the dotted prefix written before it; strings are the quoted literals of one
    line; linear in the file's size."""
    if len(data) > MAX_SOURCE or not any(t in data for t in _TRIGGERS):
        return None
    calls: list[LoadCall] = []
    for m in _CALL.finditer(data):
        start = m.start()
        before = data[max(0, start - 128) : start]
        if before.endswith(b"def ") or (before and (before[-1:].isalnum() or before[-1:] == b"_")):
            continue  # a definition, or a longer name that ends like a loader's
        dotted_prefix = _PREFIX.search(before)
        prefix = dotted_prefix.group(0).decode("ascii", "replace").rstrip(".") if dotted_prefix else ""
        loader = m.group(1).decode("ascii")
        kind = _LOADERS[loader]
        path = (*prefix.split("."), loader) if prefix else (loader,)
        if kind == "helper" and path[:-1] in _DLOPEN_HELPERS:
            kind = "dlopen"
        written = ".".join(path)
        line = data.count(b"\n", 0, start) + 1
        if kind == "dlopen":
            args = "..., RTLD_GLOBAL" if b"RTLD_GLOBAL" in _arguments(data, m.end()) else "..."
            mechanism = f"{written}({args})"
        else:
            mechanism = f"{written}()" if kind == "helper" else f"{written}(...)"
        near = _near(data, start, m.end()) if kind == "directory" else ()
        calls.append(LoadCall(line, kind, mechanism, path[:-1] if kind == "helper" else (), near))
        if len(calls) >= MAX_STRINGS:
            break
    calls += _computed(data)
    if not calls:
        return None
    strings: dict[str, None] = {}
    for m in _STRING.finditer(data):
        text = (m.group(1) if m.group(1) is not None else m.group(2)).decode("utf-8", "replace")
        strings.setdefault(text, None)
        if len(strings) >= MAX_STRINGS:
            break
    dotted: dict[str, None] = {}
    for m in _DOTTED.finditer(data):
        for part in m.group(0).decode("ascii").split("."):
            dotted.setdefault(part, None)
        if len(dotted) >= MAX_STRINGS:
            break
    return PythonLoads(name, tuple(calls), tuple(strings), tuple(dotted))


def _near(data: bytes, start: int, args: int) -> tuple[str, ...]:
    """The string literals from :data:`_NEAR_LINES` lines before a call to the end of its arguments (at most
    :data:`_NEAR_STRINGS`; linear in that span, which is bounded)."""
    begin = start
    for _ in range(_NEAR_LINES + 1):
        found = data.rfind(b"\n", max(0, start - 4096), begin)
        if found < 0:
            begin = max(0, start - 4096)
            break
        begin = found
    end = args + len(_arguments(data, args))
    out: dict[str, None] = {}
    for m in _STRING.finditer(data, begin, end):
        text = m.group(1) if m.group(1) is not None else m.group(2)
        out.setdefault(text.decode("utf-8", "replace"), None)
        if len(out) >= _NEAR_STRINGS:
            break
    return tuple(out)


def _computed(data: bytes) -> list[LoadCall]:
    """``computed`` calls: each environment variable the file sets when it also reads a distribution's files
    through ``importlib.metadata`` (a library path built at run time for native code to load; the static
    model cannot compute it)."""
    if _METADATA.search(data) is None:
        return []
    out: list[LoadCall] = []
    for m in _ENV_SET.finditer(data):
        line = data.count(b"\n", 0, m.start()) + 1
        named = m.group(1) or m.group(2)
        what = (
            f'os.environ["{named.decode("utf-8", "replace")}"]'
            if named
            else m.group(0).decode("ascii", "replace")
        )
        out.append(LoadCall(line, "computed", f"{what.rstrip(' =(')} set from importlib.metadata"))
        if len(out) >= 16:
            break
    return out


def library_list(name: str, data: bytes) -> LibraryList | None:
    """The library names a small ``.json`` / ``.txt`` member lists, or None when it lists none."""
    if len(data) > MAX_LIST:
        return None
    found: dict[str, None] = {}
    for m in _LIBRARY_NAME.finditer(data):
        try:
            found.setdefault(m.group(0).decode("ascii"), None)
        except UnicodeDecodeError:
            continue
        if len(found) >= MAX_STRINGS:
            break
    return LibraryList(name, tuple(found)) if found else None


def is_python_source(name: str) -> bool:
    return name.endswith(".py")


def is_library_list(name: str) -> bool:
    lowered = name.lower()
    return lowered.endswith((".json", ".txt")) and ".dist-info/" not in lowered
