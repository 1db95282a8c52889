"""The byte-counting progress that long commands attach on stderr: a bar on a terminal, plain lines elsewhere.

Library code reports progress through observer hooks that do nothing by default; a command mixes this
class into its observer class, so the hooks it shares (``planned``, ``advanced``) drive it. Progress shows
by default when stderr is a terminal; ``--progress`` forces it where stderr is not one (a CI log), where a
bar that redraws itself would vanish or fill the log with control characters, so it is written as plain
lines there: one when a unit of work starts, one per tenth of the planned bytes, and one at the end.
"""

from __future__ import annotations

import sys
import threading
from types import TracebackType
from typing import TextIO, TypeVar

from cudaship.inspection.walk import InspectObserver
from cudaship.render.escape import line
from cudaship.render.escape import text as shown_escaped
from cudaship.words import size

_Self = TypeVar("_Self", bound="ByteProgress")


class ByteProgress:
    """Progress on stderr: a transient rich bar (a description, a bar, bytes done and time remaining) when
    stderr is a terminal, else plain lines ``cudaship: <description>: ...``."""

    LABEL_WIDTH = 60
    STEPS = 10  #: plain lines: one each time the bytes done pass another tenth of those planned

    def __init__(self, description: str, *, stream: TextIO | None = None) -> None:
        self._stream = stream if stream is not None else sys.stderr
        self._description = description
        self._plain = not self._stream.isatty()
        self._total = 0
        self._done = 0
        self._step = 0
        self._read = 0  #: bytes over every unit of work (the end line)
        self._lock = threading.Lock()  #: reader threads report at once
        self._shown = description
        if self._plain:
            return
        # rich only for a progress bar on a terminal: start-up time (docs/performance.md)
        from rich.console import Console
        from rich.progress import BarColumn, DownloadColumn, Progress, TextColumn, TimeRemainingColumn

        self._progress = Progress(
            TextColumn("[progress.description]{task.description}"),
            BarColumn(),
            DownloadColumn(),
            TimeRemainingColumn(),
            console=Console(file=self._stream),
            transient=True,
        )
        self._task = self._progress.add_task(description, total=None)

    def _line(self, text: str) -> None:
        self._stream.write(line(f"cudaship: {self._description}: {text}") + "\n")
        self._stream.flush()

    def __enter__(self: _Self) -> _Self:
        if not self._plain:
            self._progress.start()
        return self

    def __exit__(
        self, exc_type: type[BaseException] | None, exc: BaseException | None, tb: TracebackType | None
    ) -> None:
        if not self._plain:
            self._progress.stop()
        elif exc_type is None:
            self._line(f"done, {size(self._read)} read")

    def label(self, text: str, *, restart: bool = False) -> None:
        """Show ``text`` (its tail when long); ``restart`` also empties the bar for a new unit of work (a
        plain line says it started)."""
        from rich.markup import escape as markup  # rich: start-up time, as in __init__

        width = self.LABEL_WIDTH
        text = shown_escaped(text)  # a name from the input: no control character, never rich markup
        shown = text if len(text) <= width else "..." + text[-(width - 3) :]
        if self._plain:
            self._shown = shown
            if restart:
                self._total = self._done = self._step = 0
                self._line(shown)
            return
        shown = markup(shown)
        if restart:
            self._progress.reset(self._task, total=None, description=shown)
        else:
            self._progress.update(self._task, description=shown)

    def planned(self, total_bytes: int) -> None:
        if self._plain:
            self._total = total_bytes
            self._line(f"{size(total_bytes)} to read")
        else:
            self._progress.update(self._task, total=total_bytes or None)

    def advanced(self, nbytes: int) -> None:
        if not self._plain:
            self._progress.advance(self._task, nbytes)
            return
        with self._lock:
            self._done += nbytes
            self._read += nbytes
            if self._total <= 0:
                return
            step = min(self._done * self.STEPS // self._total, self.STEPS)
            if step <= self._step:
                return
            self._step = step
            self._line(f"{step * 100 // self.STEPS}% of {size(self._total)} ({self._shown})")


class InspectProgress(ByteProgress, InspectObserver):
    """The bar of the commands that read inputs with :func:`~cudaship.inspection.walk.inspect_paths`
    (``inspect``, ``gpus``): bytes of the inputs read, and the file or wheel member being read."""

    def reading(self, label: str) -> None:
        self.label(label)
