"""Fixtures shared by the parallel-reading tests (threads and worker processes)."""

from __future__ import annotations

from pathlib import Path

import pytest

from tests.inspection.test_parallel import make_wheel


@pytest.fixture
def wheels(tmp_path: Path) -> list[Path]:
    """Three wheels of nvcc-built libraries: two deflated (5 and 4 libraries), one stored (3)."""
    directory = tmp_path / "wheels"
    directory.mkdir()
    return [
        make_wheel(directory, "alpha", 5),
        make_wheel(directory, "beta", 3, stored=True),
        make_wheel(directory, "gamma", 4),
    ]
