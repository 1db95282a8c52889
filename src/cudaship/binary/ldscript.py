"""GNU ld linker scripts: the ``libfoo.so`` that is text, not an ELF file.

A distribution (and a wheel) may ship ``libfoo.so`` as a linker script so that ``-lfoo`` links against
``libfoo.so.1`` (glibc's ``libc.so``, ncurses' ``libcurses.so``). The link editor reads it; the dynamic loader
never does (it only ever opens the DT_NEEDED names, which are the real libraries). Grammar (GNU ld manual,
"Simple Linker Script Commands" / "File Commands",
https://sourceware.org/binutils/docs/ld/File-Commands.html): C comments ``/* ... */``; commands
``INPUT(file, file ...)`` and ``GROUP(file ...)`` whose operands are separated by commas or white space, may
be ``-lname`` and may sit inside ``AS_NEEDED(...)``; other commands (``OUTPUT_FORMAT``, ``SEARCH_DIR``,
``OUTPUT_ARCH``) take parenthesised operands too.

Only small text files are read: a script is a few hundred bytes; anything over :data:`MAX_SCRIPT_BYTES`, or
with a NUL byte, or without an ``INPUT``/``GROUP`` command, is not one.
"""

from __future__ import annotations

import re

from cudaship.errors import BinaryFormatError
from cudaship.records.binary import LinkerScript
from cudaship.records.buffer import Buffer

#: Larger text files are not linker scripts a wheel ships (glibc's ``libc.so`` is 253 bytes).
MAX_SCRIPT_BYTES = 1 << 16

_COMMENT = re.compile(rb"/\*.*?\*/", re.DOTALL)
#: A command and its parenthesised operands (one level of nesting: ``AS_NEEDED(...)`` inside ``GROUP``).
_COMMAND = re.compile(rb"\b([A-Z_]+)[ \t\r\n]*\(((?:[^()]|\([^()]*\))*)\)")
_AS_NEEDED = re.compile(rb"AS_NEEDED[ \t\r\n]*\(([^()]*)\)")
_SPLIT = re.compile(rb"[\s,]+")
#: The commands that name files to link.
_FILE_COMMANDS = (b"INPUT", b"GROUP")


def _text(buf: Buffer) -> bytes | None:
    if len(buf) > MAX_SCRIPT_BYTES:
        return None
    raw = bytes(buf)
    if b"\0" in raw:
        return None
    return _COMMENT.sub(b" ", raw)


def looks_like_linker_script(buf: Buffer) -> bool:
    """Cheap test: small text holding an ``INPUT(...)`` or ``GROUP(...)`` command once comments are gone."""
    text = _text(buf)
    if text is None:
        return False
    return any(m.group(1) in _FILE_COMMANDS for m in _COMMAND.finditer(text))


def _names(operands: bytes) -> list[str]:
    return [n.decode("utf-8", "replace") for n in _SPLIT.split(operands.strip()) if n]


def read_linker_script(buf: Buffer) -> LinkerScript:
    """The files a linker script hands to the link editor. Raises :class:`BinaryFormatError` when it is not
    one (:func:`looks_like_linker_script` is false)."""
    text = _text(buf)
    if text is None:
        raise BinaryFormatError("not a GNU ld linker script (binary, or larger than 64 KiB)")
    inputs: list[str] = []
    as_needed: list[str] = []
    output_format: str | None = None
    found = False
    for match in _COMMAND.finditer(text):
        command, operands = match.group(1), match.group(2)
        if command == b"OUTPUT_FORMAT" and output_format is None:
            names = _names(operands)
            output_format = names[0] if names else None
        if command not in _FILE_COMMANDS:
            continue
        found = True
        for part in re.split(rb"(AS_NEEDED[ \t\r\n]*\([^()]*\))", operands):
            inner = _AS_NEEDED.fullmatch(part)
            names = _names(inner.group(1) if inner else part)
            inputs += names
            if inner:
                as_needed += names
    if not found:
        raise BinaryFormatError("no INPUT or GROUP command: not a GNU ld linker script")
    return LinkerScript(tuple(inputs), tuple(as_needed), output_format)
