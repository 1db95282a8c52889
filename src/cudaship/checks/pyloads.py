"""Whether the package's own Python code loads a library before its extensions (class 1 of issue 21), from
the facts :mod:`cudaship.wheel.pyloads` read in the scan.

A library a declared requirement installs at ``<dir>/<name>`` counts as preloaded by the package when one of
its Python files:

* calls a loader (``ctypes.CDLL``, ``cdll.LoadLibrary``, ``ctypes.WinDLL``) and names ``<name>``
  itself, as a string or in a shipped list of library names (``.json`` / ``.txt``) the file names;
* calls a loader and holds a glob matching ``<name>`` (``lib*.so.*``) while naming every distinctive part
  of ``<dir>`` (``nvidia``, ``cublas``: ``lib``, ``bin`` and the like are not distinctive) in its strings
  or dotted names: it loads that directory;
* calls a ``load_library()`` helper of the module that installs ``<dir>`` (``nvidia.cublas.load_library()``)
  or of a distribution whose requirements install it (``librmm.load_library()``);
* on Windows, calls ``os.add_dll_directory`` naming every distinctive part of ``<dir>``.

A loader is ``ctypes``' or a package's function that dlopens the path it is given (``torch.ops.load_library``:
``path_loaders`` in knowledge/data/providers.toml). A library's name counts as named when the file holds it
whole or its stem (``libtorchtext`` for ``libtorchtext.so``: torchvision, torchaudio and torchtext build
``f"{lib}.{suffix}"`` at run time).

:func:`dll_directory_computed` is the uncertain case of the last rule: the file calls
``os.add_dll_directory`` on a directory inside its own package whose last part it names
(``os.path.join(os.path.dirname(spec.origin), "cccl")``) while the rest is computed at run time (a CUDA
major chosen on import): the static model cannot say which directory, so the audit calls the import
uncertain (a warning naming ``audit --load``), never an error.

What it cannot see (a name computed at run time, a directory named only through a variable of another
module) stays unresolved: the loader oracle (``audit --load``) is the judge there.
"""

from __future__ import annotations

import posixpath
import re
from typing import TYPE_CHECKING

from cudaship.checks.globs import GlobError, compile_glob
from cudaship.knowledge.providers import path_loaders
from cudaship.wheel.records import LoadCall, PythonLoads

if TYPE_CHECKING:
    from cudaship.checks.context import AuditContext
    from cudaship.providers.records import Reached

_GENERIC = frozenset({"", ".", "..", "lib", "lib64", "bin", "site-packages", "dist-packages"})


def _leaf(text: str) -> str:
    return text.replace("\\", "/").rstrip("/").rsplit("/", 1)[-1]


def _parts(strings: tuple[str, ...], dotted: tuple[str, ...]) -> set[str]:
    out = set(dotted)
    for s in strings:
        out.update(s.replace("\\", "/").split("/"))
    return out


def _names(ctx: AuditContext, loads: PythonLoads) -> tuple[set[str], str | None]:
    """Library names the file's strings hold, with those of the shipped lists it names (and the first such
    list's path)."""
    names = {_leaf(s) for s in loads.strings}
    listed: str | None = None
    by_leaf = {posixpath.basename(lst.file): lst for lst in ctx.scan.library_lists}
    for s in loads.strings:
        lst = by_leaf.get(_leaf(s))
        if lst is not None:
            names.update(lst.names)
            listed = listed or ctx.installed.get(lst.file, lst.file)
    return names, listed


def _first(calls: tuple[LoadCall, ...], kind: str) -> LoadCall | None:
    return next((c for c in calls if c.kind == kind), None)


def _written(call: LoadCall) -> str:
    """A call's dotted name as written (``torch.ops.load_library``)."""
    return call.mechanism.split("(", 1)[0]


def _loader(calls: tuple[LoadCall, ...]) -> LoadCall | None:
    """The file's first call that dlopens a path: ``ctypes``' loaders, or a package's function that loads the
    path it is given (``torch.ops.load_library``, data: ``path_loaders``)."""
    known = path_loaders()
    return next(
        (c for c in calls if c.kind == "dlopen" or (c.kind == "helper" and _written(c) in known)), None
    )


#: the suffix a library's stem is written without (``libtorchtext`` + ``.so``, ``.dylib``, ``.dll``, ``.pyd``)
_SUFFIX = re.compile(r"\.(?:so(?:\.\d+)*|dylib|dll|pyd)$", re.IGNORECASE)


def _stem(base: str) -> str | None:
    """``base`` without its library suffix, or None when it has none (or nothing distinctive is left)."""
    stem = _SUFFIX.sub("", base)
    return stem if stem != base and stem.lower() not in _GENERIC else None


def _brings(helper: Reached, reached: Reached | None) -> bool:
    """``reached`` is the helper's distribution or one of its requirements (its chain passes through it)."""
    if reached is None:
        return False
    n = len(helper.chain)
    return reached is helper or (len(reached.chain) > n and reached.chain[:n] == helper.chain)


def preloaded_by_package(
    ctx: AuditContext, name: str, provided: str, pe: bool, reached: Reached | None = None
) -> tuple[str, str] | None:
    """(the Python file as installed, the mechanism in words) when the package's own code loads ``name``,
    installed at ``provided`` (by ``reached``, a requirement; None: shipped in the wheel) before its
    extensions; None when no file does.

    A ``load_library()`` helper of a required distribution loads that distribution's libraries, which load
    theirs: a library installed by the helper's distribution or by one of its own requirements counts as
    preloaded by that call."""
    base = posixpath.basename(name)
    directory = posixpath.dirname(provided)
    wanted = [c for c in directory.split("/") if c.lower() not in _GENERIC]

    def same(a: str, b: str) -> bool:
        return a.lower() == b.lower() if pe else a == b

    stem = _stem(base)
    for loads in ctx.scan.python_loads:
        where = ctx.installed.get(loads.file, loads.file)
        dlopen = _loader(loads.calls)
        names, listed = _names(ctx, loads)
        parts = _parts(loads.strings, loads.dotted)
        covers = bool(wanted) and all(w in parts for w in wanted)
        if dlopen is not None:
            if any(same(n, base) for n in names):
                via = (
                    f", listed in {listed}"
                    if listed and base not in {_leaf(s) for s in loads.strings}
                    else ""
                )
                return where, f"{dlopen.mechanism} line {dlopen.line} loads {base}{via}"
            if stem is not None and any(same(n, stem) for n in names):
                return where, (
                    f"{dlopen.mechanism} line {dlopen.line} loads {base} (named {stem}, the suffix added at "
                    "run time)"
                )
            globs = [n for n in names if any(ch in n for ch in "*?[") and _glob_matches(n, base)]
            if globs and covers:
                return where, f"{dlopen.mechanism} line {dlopen.line} loads {globs[0]} from {directory}"
        for call in loads.calls:
            if call.kind != "helper":
                continue
            if call.scope and wanted and all(w in call.scope for w in wanted):
                return where, f"{call.mechanism} line {call.line} loads {directory}"
            owner = ctx.providers.owner_of_module("/".join(call.scope)) if call.scope else None
            if owner is not None and reached is not None and _brings(owner, reached):
                tail = "" if owner is reached else f", which need those of {reached.dist.name}"
                return where, (
                    f"{call.mechanism} line {call.line} loads the libraries of {owner.dist.name}{tail}"
                )
        directory_call = _first(loads.calls, "directory")
        if pe and directory_call is not None and covers:
            return (
                where,
                f"{directory_call.mechanism} line {directory_call.line} adds {directory} to the DLL search",
            )
    return None


def _glob_matches(pattern: str, name: str) -> bool:
    """A glob from the package's own code matched against a library's file name with the audit's one glob
    matcher (linear in the name, whatever the pattern); a pattern it cannot compile matches nothing."""
    try:
        return compile_glob(pattern, flat=True).match(name)
    except GlobError:
        return False


def dll_directory_computed(ctx: AuditContext, provided: str) -> tuple[str, str] | None:
    """(the Python file as installed, the call in words) when a file of the package calls
    ``os.add_dll_directory`` on a directory it computes at run time that may be the directory of
    ``provided`` (an installed path): that directory lies inside the file's own package, its last part is
    distinctive and the file names it in a string near the call (its arguments, the lines before it), and
    not every distinctive part is named (those are
    :func:`preloaded_by_package`'s certain case). None when no file does."""
    directory = posixpath.dirname(provided)
    leaf = posixpath.basename(directory)
    if leaf.lower() in _GENERIC:
        return None
    for loads in ctx.scan.python_loads:
        where = ctx.installed.get(loads.file, loads.file)
        package = posixpath.dirname(where)
        if not package or not directory.startswith(package + "/"):
            continue
        for call in loads.calls:
            if call.kind != "directory" or leaf not in {_leaf(s) for s in call.near}:
                continue
            return where, (
                f"{call.mechanism} line {call.line} adds a directory named {leaf} whose place it computes "
                f"at run time ({directory} is one candidate)"
            )
    return None


#: a Python string that is a template (an f-string's text, ``"lib{}.so".format``): ``{...}`` is computed
_FIELD = re.compile(r"\{[^{}]*\}")
#: a template's literal text (without ``lib`` and the extension) must be this long to name a library:
#: ``lib{name}.so`` names any, ``libtorchcodec_core{v}`` names one group
_MIN_LITERAL = 4


def _bare_stem(base: str) -> str:
    """``libtorchcodec_core7.so`` -> ``libtorchcodec_core7``; ``ctransformers.dll`` -> ``ctransformers``."""
    return _SUFFIX.sub("", base.split(".cpython-", 1)[0])


def _template_matches(text: str, stem: str) -> bool:
    """Whether the template ``text`` (``libtorchcodec_core{ffmpeg_major_version}``) can name the library of
    stem ``stem``, its fields standing for any text; the literal part must be distinctive."""
    leaf = _SUFFIX.sub("", _leaf(text))
    parts = _FIELD.split(leaf)
    if len(parts) < 2 or len("".join(parts).removeprefix("lib")) < _MIN_LITERAL:
        return False
    pattern = ".*".join(re.escape(p) for p in parts)
    return re.fullmatch(pattern, stem) is not None


def loaded_by_computed_name(ctx: AuditContext, path: str) -> tuple[str, str] | None:
    """(the Python file as installed, the mechanism in words) when the package's own Python code loads the
    shipped library ``path`` by a name it computes at run time: a template (an f-string,
    ``f"libtorchcodec_core{v}"``) or the library's stem without its extension, which an extension finder
    completes (``_get_extension_path("libtorchcodec_heic")``), in a file that calls a loader (``ctypes.CDLL``,
    ``torch.ops.load_library``) and lies in the library's directory or above it. When, and whether, that code
    runs (at import, on first use, for one release of a system library) is decided at run time."""
    directory, base = posixpath.split(path)
    stem = _bare_stem(base)
    for loads in ctx.scan.python_loads:
        where = ctx.installed.get(loads.file, loads.file)
        here = posixpath.dirname(where)
        if here and directory != here and not directory.startswith(here + "/"):
            continue
        dlopen = _first(loads.calls, "dlopen")
        if dlopen is None:
            continue
        for text in loads.strings:
            leaf = _leaf(text)
            if leaf == stem and stem != base:
                return (
                    where,
                    f"{dlopen.mechanism} line {dlopen.line} loads {stem} (its extension found at run time)",
                )
            if _template_matches(text, stem):
                return (
                    where,
                    f"{dlopen.mechanism} line {dlopen.line} loads {leaf}, a name computed at run time",
                )
    return None
