"""Counting a reader's work, for tests that hold it linear (no test times anything: time belongs in
benchmarks/). Every bounds-checked read of the host readers (:class:`cudaship.binary._bounded.Bounded`) and
every fatbin container and entry header validated counts one."""

from __future__ import annotations

from collections.abc import Callable

import pytest

from cudaship.binary import fatbin
from cudaship.binary._bounded import Bounded


def count_reads(monkeypatch: pytest.MonkeyPatch) -> list[int]:
    """Start counting; the count is ``result[0]`` (undone with the monkeypatch)."""
    count = [0]
    for name in ("read_entry_header", "_container_header"):
        original = getattr(fatbin, name)

        def counted(*args: object, _original: Callable[..., object] = original) -> object:
            count[0] += 1
            return _original(*args)

        monkeypatch.setattr(fatbin, name, counted)
    original_check = Bounded.check

    def check(self: Bounded, offset: int, length: int, field: str) -> None:
        count[0] += 1
        original_check(self, offset, length, field)

    monkeypatch.setattr(Bounded, "check", check)
    return count
