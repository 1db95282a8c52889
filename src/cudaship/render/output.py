"""Writing a rendered report to stdout or to ``-o FILE`` (opened only when there is something to write).

The file is written by :mod:`cudaship.safe_write`, the one writer every command uses: atomic for regular
files, written through for devices and FIFOs, links followed deliberately, the umask honoured.

A report is written in the encoding of where it goes (stdout's own, UTF-8 for a file) and never fails on a
character that encoding cannot write: the renderers escape every name from an input already (lone
surrogates included, :mod:`cudaship.render.escape`); whatever is left that the encoding has no byte for (a
non-ASCII name on a stdout whose encoding is ASCII or cp1252) is written as Python writes it escaped
(``\\u2603``), so one character never costs the whole report (exit 70).
"""

from __future__ import annotations

import sys
from pathlib import Path

from cudaship.errors import UsageError
from cudaship.safe_write import write_text


def encodable(text: str, encoding: str | None) -> str:
    """``text`` with each character ``encoding`` cannot write shown escaped (``\\ud800``, ``\\u2603``)."""
    encoding = encoding or "utf-8"
    try:
        text.encode(encoding)
    except UnicodeEncodeError:
        return text.encode(encoding, "backslashreplace").decode(encoding)
    except LookupError:  # an encoding Python does not know: UTF-8 is what it writes then
        return encodable(text, "utf-8")
    return text


def write_report(text: str, output: str | Path | None) -> None:
    """Write ``text`` to ``output`` (see :mod:`cudaship.safe_write`), or to stdout for None or '-'."""
    if text and not text.endswith("\n"):
        text += "\n"
    if output is None or str(output) == "-":
        sys.stdout.write(encodable(text, getattr(sys.stdout, "encoding", None)))
        sys.stdout.flush()
        return
    write_text(output, encodable(text, "utf-8"), error=UsageError)
