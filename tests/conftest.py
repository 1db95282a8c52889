"""Session-wide fixtures. The builders live in tests/fixtures/ (one module per kind of input)."""

from __future__ import annotations

pytest_plugins = [
    "tests.fixtures.nvcc",
    "tests.fixtures.mingw",
    "tests.fixtures.wheels",
    "tests.fixtures.envs",
    "tests.fixtures.synthetic_wheels",
    "tests.fixtures.repair_wheels",
]


import pytest  # noqa: E402


@pytest.fixture(autouse=True)
def _hermetic_providers(
    request: pytest.FixtureRequest, monkeypatch: pytest.MonkeyPatch, tmp_path_factory: pytest.TempPathFactory
) -> None:
    """``cudaship audit`` looks requirements up on PyPI by default; tests not marked ``network`` run it
    offline with an empty cache, so only the knowledge table answers (``network`` tests pass --online)."""
    if request.node.get_closest_marker("network") is None:
        monkeypatch.setenv("CUDASHIP_OFFLINE", "1")
        monkeypatch.setenv("CUDASHIP_CACHE_DIR", str(tmp_path_factory.getbasetemp() / "cudaship-cache"))
