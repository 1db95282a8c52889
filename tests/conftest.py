"""Session-wide fixtures. The builders live in tests/fixtures/ (one module per kind of input)."""

from __future__ import annotations

pytest_plugins = [
    "tests.fixtures.nvcc",
    "tests.fixtures.mingw",
    "tests.fixtures.wheels",
    "tests.fixtures.synthetic_wheels",
]
