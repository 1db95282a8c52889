"""What a wheel's Python code loads itself before its extensions: the reader behind class 1 of issue 21.

A package may load the native libraries its extension needs from its own Python code, before importing the
extension: ``ctypes.CDLL(path, mode=RTLD_GLOBAL)`` / ``cdll.LoadLibrary`` / ``ctypes.WinDLL`` over names,
paths or globs, ``os.add_dll_directory`` (Windows), a ``load_library()`` helper of another package, over a
shipped JSON or text list of library names. glibc then matches the extension's DT_NEEDED against the loaded
object's SONAME; Windows reuses a loaded DLL of the same name.

:func:`python_loads` reads one ``.py`` member: only a file that names one of those mechanisms is parsed
(a byte search first), with :mod:`ast` (linear in its size), and only files up to :data:`MAX_SOURCE` bytes;
what it keeps is bounded (:data:`MAX_STRINGS` strings). :func:`library_list` reads a small ``.json`` /
``.txt`` member for library names. Neither runs the code.
"""

from __future__ import annotations

import ast
import re
from dataclasses import dataclass

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
    "dlopen": "dlopen",
    "add_dll_directory": "directory",
    "load_library": "helper",
    "load_nvidia_dynamic_lib": "helper",
}
_TRIGGER = re.compile("|".join(sorted(_LOADERS, key=len, reverse=True)).encode())
_LIBRARY_NAME = re.compile(rb"(?:lib[\w.+-]*\.so(?:\.\d+)*|[\w.+-]+\.(?:dll|dylib))", re.IGNORECASE)


@dataclass(frozen=True)
class LoadCall:
    line: int
    #: ``dlopen`` (loads a file), ``directory`` (adds a DLL directory), ``helper`` (a package's loader)
    kind: str
    mechanism: str  #: as written: ``ctypes.CDLL(..., RTLD_GLOBAL)``, ``nvidia.cublas.load_library()``
    scope: tuple[str, ...] = ()  #: the dotted module a helper belongs to (``nvidia``, ``cublas``)


@dataclass(frozen=True)
class PythonLoads:
    """One ``.py`` member that loads native libraries itself."""

    file: str  #: member path in the wheel
    calls: tuple[LoadCall, ...]
    strings: tuple[str, ...]  #: string literals of the file (names, path parts, globs), bounded
    dotted: tuple[str, ...]  #: components of dotted names it uses (``nvidia.cublas.__file__``), bounded


@dataclass(frozen=True)
class LibraryList:
    """A shipped data file (``.json`` / ``.txt``) that lists library names."""

    file: str
    names: tuple[str, ...]


def _dotted(node: ast.expr) -> tuple[str, ...]:
    parts: list[str] = []
    while isinstance(node, ast.Attribute):
        parts.append(node.attr)
        node = node.value
    if isinstance(node, ast.Name):
        parts.append(node.id)
    elif isinstance(node, ast.Call):
        return ()
    return tuple(reversed(parts))


def _mentions_global(call: ast.Call) -> bool:
    for node in [*call.args, *(k.value for k in call.keywords)]:
        for sub in ast.walk(node):
            if (isinstance(sub, ast.Name) and sub.id == "RTLD_GLOBAL") or (
                isinstance(sub, ast.Attribute) and sub.attr == "RTLD_GLOBAL"
            ):
                return True
    return False


def python_loads(name: str, data: bytes) -> PythonLoads | None:
    """The loading calls of the Python source ``data`` (member ``name``), or None when it has none (or is
    too large, or does not parse)."""
    if len(data) > MAX_SOURCE or _TRIGGER.search(data) is None:
        return None
    try:
        tree = ast.parse(data, filename=name)
    except (SyntaxError, ValueError, MemoryError, RecursionError):
        return None
    calls: list[LoadCall] = []
    strings: dict[str, None] = {}
    dotted: dict[str, None] = {}
    for node in ast.walk(tree):
        if isinstance(node, ast.Constant) and isinstance(node.value, str):
            if len(strings) < MAX_STRINGS and len(node.value) <= 256:
                strings.setdefault(node.value, None)
        elif isinstance(node, ast.Attribute):
            if len(dotted) < MAX_STRINGS:
                for part in _dotted(node):
                    dotted.setdefault(part, None)
        elif isinstance(node, ast.Call):
            func = node.func
            path = _dotted(func) if isinstance(func, (ast.Attribute, ast.Name)) else ()
            if not path or path[-1] not in _LOADERS:
                continue
            kind = _LOADERS[path[-1]]
            written = ".".join(path)
            if kind == "dlopen":
                args = "..., RTLD_GLOBAL" if _mentions_global(node) else "..."
                mechanism = f"{written}({args})"
            else:
                mechanism = f"{written}()" if kind == "helper" else f"{written}(...)"
            scope = path[:-1] if kind == "helper" else ()
            calls.append(LoadCall(node.lineno, kind, mechanism, scope))
    if not calls:
        return None
    calls.sort(key=lambda c: c.line)
    return PythonLoads(name, tuple(calls), tuple(strings), tuple(dotted))


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
