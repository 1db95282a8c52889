"""The survey's tests: the provider tests' local index (PEP 691 over HTTP on 127.0.0.1, counting requests)
and small wheels; the per-wheel work is :mod:`tests.survey.standin` until survey/work.py is merged."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest

from cudaship.survey import engine
from tests.providers.conftest import LocalIndex, local_index, make_wheel  # noqa: F401  (the fixture)
from tests.survey import standin


@pytest.fixture
def stand_in(monkeypatch: pytest.MonkeyPatch) -> Iterator[None]:
    """Every engine run in this process uses the stand-in work."""
    monkeypatch.setattr(engine, "default_work", lambda: standin.survey_wheel)
    yield


def wheel(
    directory: Path, name: str, version: str, tag: str = "py3-none-manylinux_2_28_x86_64", native: int = 1
) -> Path:
    """A small wheel with ``native`` libraries."""
    package = name.replace("-", "_")
    files = {f"{package}/lib{i}.so": b"\x7fELF" + bytes(64) for i in range(native)}
    files[f"{package}/__init__.py"] = b""
    directory.mkdir(parents=True, exist_ok=True)
    return make_wheel(directory, name, version, tag, files)
