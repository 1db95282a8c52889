"""The dist-info files a wheel writer produces: RECORD written by :mod:`csv`, and METADATA with
``Requires-Dist`` entries added through the email-header parser that reads it.

RECORD is CSV: a path holding a quote, a comma or a line break is quoted by the csv module as every reader
(pip, installer, :func:`cudaship.wheel.metadata.parse_record`) unquotes it; a row is never joined from
strings. METADATA is an email header block: the new entries go where the parser ends the headers (a line
that is no header ends them, with or without a blank line), and everything after, the body, is kept byte for
byte. METADATA that is not UTF-8 is refused (:class:`WheelError`, one line): it cannot be edited faithfully.
Pure: bytes in, bytes out.
"""

from __future__ import annotations

import csv
import io
from collections.abc import Iterable
from email.parser import HeaderParser

from cudaship.errors import WheelError


def record_bytes(rows: Iterable[tuple[str, str, str | int]]) -> bytes:
    """RECORD of ``rows`` (path, ``algo=digest`` or ``""``, size or ``""``): CSV, lines ending in ``\\n``
    (as pip and ``wheel`` write it), UTF-8."""
    out = io.StringIO()
    writer = csv.writer(out, lineterminator="\n")
    for path, digest, size in rows:
        writer.writerow((path, digest, size))
    return out.getvalue().encode("utf-8")


def _ends_with_line_break(text: str) -> bool:
    """Whether ``text`` ends with a line break as :meth:`str.splitlines` (the email parser's line split)
    sees one."""
    return bool(text) and text.splitlines()[-1] != text.splitlines(keepends=True)[-1]


def _line_break(lines: list[str]) -> str:
    """The line break the header lines use (the first one that has one), ``\\n`` when none has."""
    for line in lines:
        stripped = line.rstrip("\r\n")
        if stripped != line:
            return line[len(stripped) :]
    return "\n"


def with_requirements(metadata: bytes, requirements: tuple[str, ...]) -> bytes:
    """METADATA with a ``Requires-Dist`` line for each of ``requirements`` added at the end of its headers,
    as :class:`email.parser.HeaderParser` (the parser packaging and importlib.metadata use) reads them; the
    body (and the blank line before it) kept as they are. Raises :class:`WheelError` for METADATA that is
    not UTF-8."""
    try:
        text = metadata.decode("utf-8")
    except UnicodeDecodeError as e:
        raise WheelError(f"METADATA is not UTF-8 (byte {e.start}): cannot add Requires-Dist to it") from None
    body = HeaderParser().parsestr(text).get_payload()
    assert isinstance(body, str)
    if not text.endswith(body):  # the parser's body is the text's tail, as it splits lines keeping their ends
        raise WheelError("METADATA: cannot find where its headers end")
    head = text[: len(text) - len(body)]
    lines = head.splitlines(keepends=True)
    separator = ""
    if lines and not lines[-1].strip("\r\n"):  # the blank line that ended the headers: stays before the body
        separator = lines.pop()
    head = "".join(lines)
    newline = _line_break(lines)
    if head and not _ends_with_line_break(head):
        head += newline
    added = "".join(f"Requires-Dist: {r}{newline}" for r in requirements)
    return (head + added + separator + body).encode("utf-8")
