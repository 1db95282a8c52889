"""The byte-counting progress bar that long commands attach on stderr when it is a terminal.

Library code reports progress through observer hooks that do nothing by default; a command mixes this bar
into its observer class, so the hooks it shares (``planned``, ``advanced``) drive the bar.
"""

from __future__ import annotations

from types import TracebackType
from typing import TypeVar

from cudaship.inspection.walk import InspectObserver

_Self = TypeVar("_Self", bound="ByteProgress")


class ByteProgress:
    """A transient rich progress bar on stderr: a description, a bar, bytes done and time remaining."""

    LABEL_WIDTH = 60

    def __init__(self, description: str) -> None:
        from rich.console import Console
        from rich.progress import BarColumn, DownloadColumn, Progress, TextColumn, TimeRemainingColumn

        self._progress = Progress(
            TextColumn("[progress.description]{task.description}"),
            BarColumn(),
            DownloadColumn(),
            TimeRemainingColumn(),
            console=Console(stderr=True),
            transient=True,
        )
        self._task = self._progress.add_task(description, total=None)

    def __enter__(self: _Self) -> _Self:
        self._progress.start()
        return self

    def __exit__(
        self, exc_type: type[BaseException] | None, exc: BaseException | None, tb: TracebackType | None
    ) -> None:
        self._progress.stop()

    def label(self, text: str, *, restart: bool = False) -> None:
        """Show ``text`` (its tail when long); ``restart`` also empties the bar for a new unit of work."""
        from rich.markup import escape as markup

        from cudaship.render.escape import text as shown_escaped

        width = self.LABEL_WIDTH
        text = shown_escaped(text)  # a name from the input: no control character, never rich markup
        shown = markup(text if len(text) <= width else "..." + text[-(width - 3) :])
        if restart:
            self._progress.reset(self._task, total=None, description=shown)
        else:
            self._progress.update(self._task, description=shown)

    def planned(self, total_bytes: int) -> None:
        self._progress.update(self._task, total=total_bytes or None)

    def advanced(self, nbytes: int) -> None:
        self._progress.advance(self._task, nbytes)


class InspectProgress(ByteProgress, InspectObserver):
    """The bar of the commands that read inputs with :func:`~cudaship.inspection.walk.inspect_paths`
    (``inspect``, ``gpus``): bytes of the inputs read, and the file or wheel member being read."""

    def reading(self, label: str) -> None:
        self.label(label)
