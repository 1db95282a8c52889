"""Fixtures of the toolkit tests: a built redist tree and a local HTTP server in front of it."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest

from tests.toolkit.builders import RedistTree, ServerControl, build_redist, serve


@pytest.fixture
def redist(tmp_path: Path) -> RedistTree:
    return build_redist(tmp_path / "redist")


@pytest.fixture
def server(redist: RedistTree) -> Iterator[tuple[str, ServerControl]]:
    with serve(redist.root) as started:
        yield started


@pytest.fixture
def cache_dir(tmp_path: Path) -> Path:
    return tmp_path / "cache"
