"""Import libraries for torch's Windows cross compile, made from torch's own declarations (issue 33).

A wrapper AOTInductor compiles for a CUDA Windows target links ``torch_cuda``, whose import library
``torch_cuda.lib`` ships only in CUDA ``win_amd64`` torch wheels (PyPI's Windows torch is CPU-only: it has
``torch.lib`` and ``torch_cpu.lib``). What the wrapper calls in ``torch_cuda.dll`` is torch's C shim: the
functions the headers under ``torch/include/torch/csrc/inductor/aoti_torch`` declare with the export macro
``AOTI_TORCH_EXPORT`` (``c/macros.h``: ``__declspec(dllimport)`` on Windows), in two places:

- ``generated/c_shim_cuda.h`` (and any shim header named for CUDA): every declaration is ``torch_cuda``'s;
- ``c/shim.h`` (and the other shim headers): the declarations inside ``#ifdef USE_CUDA`` blocks
  (the CUDA guards, streams and caching allocator); the rest belong to ``torch_cpu``.

The same torch version's Linux ``libtorch_cuda.so`` exports exactly those names (torch 2.14.1: 167 + 8 = 175
``aoti_*`` exports, 175 declarations; ``docs/formats.md``). Both are read and compared: a name in one and not
the other is a one-line error naming it, so a header layout this module does not understand never produces a
wrong library silently. An import library holds names and the DLL's name, no code: MinGW's ``dlltool``
writes one from a module-definition file (``LIBRARY torch_cuda.dll`` / ``EXPORTS`` / one name a line).
"""

from __future__ import annotations

import hashlib
import mmap
import re
import subprocess
from dataclasses import dataclass
from pathlib import Path

from cudaship.binary.coff_importlib import read_import_library
from cudaship.binary.elf import read_elf
from cudaship.errors import BinaryFormatError, ProgramError
from cudaship.inspection.program_records import ImportLibraryRecord
from cudaship.words import count

#: where a torch installation (or wheel) keeps the C shim headers, relative to the ``torch`` package
SHIM_HEADERS = "include/torch/csrc/inductor/aoti_torch"
#: the export macro of the shim declarations (``c/macros.h``)
EXPORT_MACRO = "AOTI_TORCH_EXPORT"
#: the prefix of every shim function; exports of ``libtorch_cuda.so`` with it are compared with the headers
SHIM_PREFIX = "aoti_"
#: the preprocessor symbol torch's CUDA build defines, guarding the CUDA declarations of the common headers
CUDA_MACRO = "USE_CUDA"

_COMMENT = re.compile(r"//[^\n]*|/\*.*?\*/", re.S)
_DECLARATION = re.compile(EXPORT_MACRO + r"\s+[\w\s:<>*&,]*?\b([A-Za-z_]\w*)\s*\(")
_DIRECTIVE = re.compile(r"^\s*#\s*(\w+)\s*(.*)$")


@dataclass(frozen=True)
class ShimDeclarations:
    """The shim functions a torch declares for ``torch_cuda.dll``, and where."""

    names: tuple[str, ...]  #: sorted
    headers: tuple[str, ...]  #: the headers read, relative to the ``torch`` package, sorted


def _cuda_only_header(path: Path) -> bool:
    return "cuda" in path.name.lower()


def declared_in(text: str, *, whole_file_is_cuda: bool) -> list[str]:
    """The names ``text`` (a C/C++ header) declares with :data:`EXPORT_MACRO` for ``torch_cuda``: all of them
    when ``whole_file_is_cuda``, else those inside ``#ifdef USE_CUDA`` (or ``#if defined(USE_CUDA)``)."""
    text = _COMMENT.sub(lambda m: "\n" * m.group(0).count("\n"), text)
    stack: list[bool] = []  # per open conditional: whether its current branch is the USE_CUDA one
    kept: list[str] = []
    for raw in text.splitlines():
        directive = _DIRECTIVE.match(raw)
        if directive is None:
            kept.append(raw if whole_file_is_cuda or any(stack) else "")
            continue
        word, rest = directive.group(1), directive.group(2)
        if word in ("if", "ifdef", "ifndef"):
            cuda = (word == "ifdef" and rest.split()[:1] == [CUDA_MACRO]) or (
                word == "if"
                and re.fullmatch(r"defined\s*\(?\s*" + CUDA_MACRO + r"\s*\)?", rest.strip()) is not None
            )
            stack.append(cuda)
        elif word in ("else", "elif") and stack:
            stack[-1] = False
        elif word == "endif" and stack:
            stack.pop()
        kept.append("")  # a #define of the macro itself is never a declaration
    return [m.group(1) for m in _DECLARATION.finditer("\n".join(kept))]


def torch_cuda_declarations(torch_dir: Path) -> ShimDeclarations:
    """The shim names ``torch_dir`` (an installed ``torch`` package, or one unpacked from a wheel) declares
    for ``torch_cuda.dll``. Raises :class:`ProgramError` when it holds no shim headers."""
    root = torch_dir / SHIM_HEADERS
    headers = sorted(p for p in root.rglob("*.h") if p.is_file()) if root.is_dir() else []
    if not headers:
        raise ProgramError(
            f"no C shim headers under {SHIM_HEADERS} (a torch without AOTInductor)", path=str(torch_dir)
        )
    names: set[str] = set()
    used: list[str] = []
    for header in headers:
        text = header.read_text(encoding="utf-8", errors="replace")
        found = declared_in(text, whole_file_is_cuda=_cuda_only_header(header))
        if found:
            names.update(found)
            used.append(header.relative_to(torch_dir).as_posix())
    if not names:
        raise ProgramError(
            f"the headers under {SHIM_HEADERS} declare nothing for torch_cuda", path=str(torch_dir)
        )
    return ShimDeclarations(tuple(sorted(names)), tuple(sorted(used)))


def shim_exports(library: Path) -> frozenset[str]:
    """The :data:`SHIM_PREFIX` names an ELF shared library (``libtorch_cuda.so``) exports."""
    try:
        with open(library, "rb") as f, mmap.mmap(f.fileno(), 0, access=mmap.ACCESS_READ) as buf:
            exports = read_elf(buf).exports
    except OSError as e:
        raise ProgramError(f"cannot read: {e.strerror or e}", path=str(library)) from None
    except (BinaryFormatError, ValueError) as e:
        raise ProgramError(f"not an ELF shared library: {e}", path=str(library)) from None
    return frozenset(n for n in exports if n.startswith(SHIM_PREFIX))


def checked_declarations(torch_dir: Path) -> ShimDeclarations:
    """:func:`torch_cuda_declarations`, agreeing name for name with what ``torch/lib/libtorch_cuda.so``
    exports; a name in one and not the other is a :class:`ProgramError` naming it."""
    declared = torch_cuda_declarations(torch_dir)
    library = torch_dir / "lib" / "libtorch_cuda.so"
    if not library.is_file():
        raise ProgramError(
            "no lib/libtorch_cuda.so to check the shim headers against (a CPU-only torch?)",
            path=str(torch_dir),
        )
    exported = shim_exports(library)
    unexported = sorted(set(declared.names) - exported)
    undeclared = sorted(exported - set(declared.names))
    if unexported:
        more = f" (and {len(unexported) - 1} more)" if len(unexported) > 1 else ""
        raise ProgramError(
            f"{unexported[0]}{more} is declared for torch_cuda in the shim headers but not exported by "
            f"{library.name}: the headers and the library are not of one torch",
            path=str(torch_dir),
        )
    if undeclared:
        more = f" (and {len(undeclared) - 1} more)" if len(undeclared) > 1 else ""
        raise ProgramError(
            f"{undeclared[0]}{more} is exported by {library.name} but declared in no shim header",
            path=str(torch_dir),
        )
    return declared


def definition_text(dll: str, names: tuple[str, ...]) -> str:
    """A module-definition file: the DLL and its exports, one a line."""
    return f"LIBRARY {dll}\nEXPORTS\n" + "".join(f"    {name}\n" for name in names)


def make_import_library(dll: str, names: tuple[str, ...], dlltool: str, output: Path) -> str:
    """Write the MinGW import library ``output`` for ``dll`` exporting ``names`` with ``dlltool``, read it
    back (cudaship's COFF import-library reader: the DLL and every name, nothing else) and return its
    sha256."""
    definition = output.with_suffix(".def")
    definition.write_text(definition_text(dll, names), encoding="utf-8")
    done = subprocess.run(
        [dlltool, "-d", str(definition), "-l", str(output), "-D", dll],
        capture_output=True,
        text=True,
        timeout=300,
        check=False,
    )
    if done.returncode != 0:
        first = (done.stderr or done.stdout).strip().splitlines()
        raise ProgramError(
            f"{dlltool}: making {output.name} failed: {first[0] if first else done.returncode}"
        )
    data = output.read_bytes()
    try:
        made = read_import_library(data)
    except BinaryFormatError as e:
        raise ProgramError(f"{dlltool} wrote an unreadable import library: {e}", path=str(output)) from None
    got = {m.symbol for m in made.members}
    if set(made.dlls) != {dll} or got != set(names):
        raise ProgramError(
            f"{dlltool} wrote an import library that does not say what was asked ({count(len(got), 'name')} "
            f"for {', '.join(made.dlls) or 'no DLL'}; asked {count(len(names), 'name')} for {dll})",
            path=str(output),
        )
    return hashlib.sha256(data).hexdigest()


def given_library(path: Path, dll: str) -> ImportLibraryRecord:
    """The record of an import library the user gave (read: the DLL it names and its names)."""
    data = path.read_bytes()
    try:
        read = read_import_library(data)
    except BinaryFormatError as e:
        raise ProgramError(f"not an import library: {e}", path=str(path)) from None
    if dll.lower() not in {d.lower() for d in read.dlls}:
        raise ProgramError(f"names {', '.join(read.dlls) or 'no DLL'}, not {dll}", path=str(path))
    names = tuple(sorted({m.symbol for m in read.members if m.symbol and m.dll.lower() == dll.lower()}))
    return ImportLibraryRecord(
        library=path.name,
        dll=dll,
        how="given",
        source=str(path),
        sha256=hashlib.sha256(data).hexdigest(),
        names=names,
    )


def made_torch_cuda(
    torch_dir: Path, torch_version: str, dlltool: str, directory: Path
) -> ImportLibraryRecord:
    """``directory/torch_cuda.lib`` made from ``torch_dir``'s shim headers, checked against its
    ``libtorch_cuda.so``."""
    declared = checked_declarations(torch_dir)
    output = directory / "torch_cuda.lib"
    sha = make_import_library("torch_cuda.dll", declared.names, dlltool, output)
    prefix = SHIM_HEADERS + "/"
    shown = ", ".join(h.removeprefix(prefix) for h in declared.headers)
    return ImportLibraryRecord(
        library="torch_cuda.lib",
        dll="torch_cuda.dll",
        how="made",
        source=f"torch {torch_version}: {prefix}{{{shown}}}",
        sha256=sha,
        names=declared.names,
    )
