"""The DLL-directory bootstrap ``repair`` adds to a Windows package's ``__init__.py``: its text, where it goes
and whether a file already has it.

The block (:func:`block`) defines a function that calls ``os.add_dll_directory`` for NVIDIA's wheel
directories on Windows, calls it and deletes it. It goes after the module's docstring and its
``from __future__`` imports (which must stay first), found with :mod:`tokenize`: a token stream, no syntax
tree, so a file nested 200,000 levels deep costs a few tokens, never a ``RecursionError`` or a
``MemoryError`` (the first statement that is neither ends the search). A file has the bootstrap only where
the whole block stands at that place (:func:`bootstraps`): the marker line in a comment elsewhere, or inside
a string, is not the bootstrap.

The file is kept byte for byte around the block, in the encoding Python reads it in (UTF-8, or the one its
coding declaration names); a file Python could not decode is refused (:class:`WheelError`, one line). Pure:
bytes in, bytes out.
"""

from __future__ import annotations

import ast
import io
import re
import tokenize
from collections.abc import Iterator

from cudaship.errors import WheelError

#: The first line of the bootstrap.
MARKER = "# cudaship repair: NVIDIA's CUDA DLLs come from their wheels"
_FUNCTION = "_cudaship_dll_directories"
_DIRECTORIES = "@DIRECTORIES@"
_LINES = (
    MARKER,
    f"def {_FUNCTION}():",
    "    import os",
    "    import sys",
    "",
    '    if sys.platform != "win32":',
    "        return",
    "    here = os.path.dirname(os.path.abspath(__file__))",
    f"    for rel in {_DIRECTORIES}:",
    "        path = os.path.normpath(os.path.join(here, rel))",
    "        if os.path.isdir(path):",
    "            os.add_dll_directory(path)",
    "",
    "",
    f"{_FUNCTION}()",
    f"del {_FUNCTION}",
    "",
)
#: One bootstrap block at the start of a text, its directories' tuple captured (any line break).
_BLOCK = re.compile(
    r"\r?\n".join(
        r"    for rel in (\([^\r\n]{0,65536}\)):" if line.endswith(_DIRECTORIES + ":") else re.escape(line)
        for line in _LINES
    )
)
#: The most bytes one block may take (the directory tuple included).
_MAX_BLOCK = 70_000


def block(directories: tuple[str, ...], newline: str = "\n") -> str:
    """The bootstrap for ``directories`` (relative to the package), lines ending in ``newline``."""
    return newline.join(line.replace(_DIRECTORIES, repr(tuple(directories))) for line in _LINES)


def _encoding(source: bytes, label: str) -> str:
    """The encoding Python reads ``source`` in; a file it could not decode raises :class:`WheelError`."""
    lines = iter(source.splitlines(keepends=True))
    try:
        encoding, _ = tokenize.detect_encoding(lambda: next(lines, b""))
        source.decode(encoding)
    except SyntaxError as e:  # an unknown coding declaration, or not UTF-8 without one
        raise WheelError(f"{label}: not UTF-8, and no coding declaration Python accepts ({e.msg})") from None
    except UnicodeDecodeError as e:
        raise WheelError(
            f"{label}: not UTF-8 and declares no encoding it is written in (byte {e.start})"
            if encoding in ("utf-8", "utf-8-sig")
            else f"{label}: not {encoding} as its coding declaration says (byte {e.start})"
        ) from None
    if "\n".encode(encoding) != b"\n" or MARKER.encode(encoding) != MARKER.encode("ascii"):
        raise WheelError(f"{label}: written in {encoding}, which cannot hold the bootstrap's lines")
    return encoding


def _header_lines(source: bytes) -> int:
    """How many lines the docstring and the ``from __future__`` imports take from the start (0 when the
    module starts with neither). Reads tokens only up to the first token of the first other statement: the
    work is bounded by those statements, whatever follows them."""
    after = 0
    first = True  # no statement finished yet: a docstring may come
    count = 0  # tokens of the statement under way
    kind = ""
    skip = (tokenize.ENCODING, tokenize.NL, tokenize.COMMENT)
    try:
        for tok in tokenize.tokenize(io.BytesIO(source).readline):
            if tok.type in skip:
                continue
            if tok.type in (tokenize.INDENT, tokenize.DEDENT, tokenize.ENDMARKER):
                break
            if tok.type == tokenize.NEWLINE:
                after, first, count = tok.end[0], False, 0
                continue
            if count == 0:
                if first and tok.type == tokenize.STRING:
                    kind = "docstring"
                elif tok.type == tokenize.NAME and tok.string == "from":
                    kind = "from"
                else:
                    break
            elif kind == "from":
                if count == 1 and not (tok.type == tokenize.NAME and tok.string == "__future__"):
                    break
            elif tok.type != tokenize.STRING:  # a string expression, not a docstring
                break
            count += 1
    except (tokenize.TokenError, SyntaxError):  # the statement under way does not end: not one to pass
        pass
    return after


def _line_offset(source: bytes, lines: int) -> int:
    """The byte offset where line ``lines + 1`` starts (lines as :mod:`tokenize` reads them)."""
    offset = 0
    for _ in range(lines):
        end = source.find(b"\n", offset)
        if end < 0:
            return len(source)
        offset = end + 1
    return offset


def _place(source: bytes, label: str) -> tuple[str, int]:
    encoding = _encoding(source, label)
    return encoding, _line_offset(source, _header_lines(source))


def _blocks(source: bytes, offset: int, encoding: str) -> Iterator[tuple[int, tuple[str, ...]]]:
    while True:
        text = source[offset : offset + _MAX_BLOCK].decode(encoding, errors="replace")
        found = _BLOCK.match(text)
        if found is None:
            return
        try:
            directories = ast.literal_eval(found.group(1))
        except (ValueError, SyntaxError, MemoryError, RecursionError):
            return
        if not (isinstance(directories, tuple) and all(isinstance(d, str) for d in directories)):
            return
        offset += len(found.group(0).encode(encoding))
        yield offset, directories


def bootstraps(source: bytes, label: str = "__init__.py") -> tuple[tuple[str, ...], ...]:
    """The directories of each bootstrap ``source`` has (in order), where repair puts them: after the
    docstring and the ``from __future__`` imports, one after the other. Raises :class:`WheelError` for a file
    Python could not decode."""
    encoding, offset = _place(source, label)
    return tuple(directories for _, directories in _blocks(source, offset, encoding))


def with_bootstrap(source: bytes, directories: tuple[str, ...], label: str = "__init__.py") -> bytes:
    """``source`` with a bootstrap for ``directories`` after its docstring and ``from __future__`` imports
    (before the bootstraps it has), every other byte kept; unchanged when a bootstrap of it already adds
    every one of ``directories``. Raises :class:`WheelError` for a file Python could not decode."""
    encoding, offset = _place(source, label)
    present = {d for _, dirs in _blocks(source, offset, encoding) for d in dirs}
    if set(directories) <= present:
        return source
    newline = b"\r\n" if b"\r\n" in source[: source.find(b"\n") + 1] else b"\n"
    head = source[:offset]
    if head and not head.endswith(b"\n"):
        head += newline
    text = block(directories, newline.decode("ascii")).encode(encoding)
    return head + text + source[offset:]
