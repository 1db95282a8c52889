"""``program export`` keeps torch's warnings off stderr (issue 35) without keeping every repeat: a warning
issued in a loop whose code also touches the warning filters (which resets Python's once-per-place registry)
reached the handler on every iteration, and recording them all grew an export to 16 GB on a clean machine."""

from __future__ import annotations

import warnings
from pathlib import Path

import pytest

from cudaship.program.export import torch_warnings

N = 2_000


def _flood(filename: str) -> None:
    for _ in range(N):
        warnings.filterwarnings("ignore", message="nothing this loop issues")  # resets the registry
        warnings.warn_explicit("the same warning", FutureWarning, filename, 7)


def test_a_repeated_warning_is_shown_once_and_not_kept(monkeypatch: pytest.MonkeyPatch) -> None:
    shown: list[str] = []
    monkeypatch.setattr(warnings, "showwarning", lambda message, *args, **kwargs: shown.append(str(message)))
    recorded: list[str] = []
    with torch_warnings(recorded):
        _flood("/site-packages/somelib/module.py")
    assert shown == ["the same warning"]  # once, as Python shows it, not N times
    assert recorded == []


def test_torch_warnings_are_recorded_once(monkeypatch: pytest.MonkeyPatch) -> None:
    shown: list[str] = []
    monkeypatch.setattr(warnings, "showwarning", lambda message, *args, **kwargs: shown.append(str(message)))
    recorded: list[str] = []
    with torch_warnings(recorded):
        _flood(str(Path("/site-packages/torch/_inductor/x.py")))
    assert recorded == ["torch: FutureWarning: the same warning"]
    assert shown == []
