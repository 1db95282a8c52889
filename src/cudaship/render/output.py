"""Writing a rendered report to stdout or to ``-o FILE`` (opened only when there is something to write).

The file is written by :mod:`cudaship.safe_write`, the one writer every command uses: atomic for regular
files, written through for devices and FIFOs, links followed deliberately, the umask honoured.
"""

from __future__ import annotations

import sys
from pathlib import Path

from cudaship.errors import UsageError
from cudaship.safe_write import write_text


def write_report(text: str, output: str | Path | None) -> None:
    """Write ``text`` to ``output`` (see :mod:`cudaship.safe_write`), or to stdout for None or '-'."""
    if text and not text.endswith("\n"):
        text += "\n"
    if output is None or str(output) == "-":
        sys.stdout.write(text)
        sys.stdout.flush()
        return
    write_text(output, text, error=UsageError)
