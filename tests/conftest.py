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


import gc  # noqa: E402
import io  # noqa: E402
import json  # noqa: E402
import os  # noqa: E402
import tempfile  # noqa: E402
import tracemalloc  # noqa: E402
from collections.abc import Iterator  # noqa: E402
from pathlib import Path  # noqa: E402

import pytest  # noqa: E402

from tests.fixtures import EVENTS, cache_dir, disk_usage  # noqa: E402

_EVENTS_FILE = pytest.StashKey[Path]()


@pytest.fixture(autouse=True)
def _hermetic_providers(
    request: pytest.FixtureRequest, monkeypatch: pytest.MonkeyPatch, tmp_path_factory: pytest.TempPathFactory
) -> None:
    """``cudaship audit`` looks requirements up on PyPI by default; tests not marked ``network`` run it
    offline with an empty cache, so only the knowledge table answers (``network`` tests pass --online)."""
    if request.node.get_closest_marker("network") is None:
        monkeypatch.setenv("CUDASHIP_OFFLINE", "1")
        monkeypatch.setenv("CUDASHIP_CACHE_DIR", str(tmp_path_factory.getbasetemp() / "cudaship-cache"))


def _open_files() -> dict[int, io.FileIO]:
    """Every file object of this process that is open and would close its descriptor (after a collection:
    a file only garbage held is finalised by it, and pytest reports its ResourceWarning as unraisable)."""
    gc.collect()
    # type(), not isinstance(): that reads ``__class__`` of every object, and some warn when asked (torch's
    # deprecated torch.distributed.reduce_op)
    files = (o for o in gc.get_objects() if issubclass(type(o), io.FileIO))
    return {id(f): f for f in files if not f.closed and f.closefd}


@pytest.fixture(scope="session", autouse=True)
def _no_file_left_open() -> Iterator[None]:
    """Every file the tests and fixtures open is closed by the end of the session: set up before any other
    session fixture, so checked after all of them are torn down (in each pytest-xdist worker). A file left
    open fails the last test's teardown naming it, instead of a ResourceWarning printed after the run where
    ``filterwarnings = error`` cannot reach it (issue 23). ``PYTHONTRACEMALLOC=20``: where it was opened."""
    before = set(_open_files())
    yield
    left = [f for i, f in _open_files().items() if i not in before]
    if left:
        lines = []
        for f in left:
            where = tracemalloc.get_object_traceback(f)
            lines.append(f"{f!r}" + ("\n" + "\n".join(where.format()) if where is not None else ""))
        pytest.fail("files left open at the end of the session:\n" + "\n".join(lines), pytrace=False)


def pytest_configure(config: pytest.Config) -> None:
    """The run's record of downloads and builds (tests.fixtures.record): a file every test process appends
    to, made by the main process before pytest-xdist starts its workers (they inherit the variable)."""
    if os.environ.get("PYTEST_XDIST_WORKER") or os.environ.get(EVENTS):
        return
    fd, name = tempfile.mkstemp(prefix="cudaship-test-events-", suffix=".jsonl")
    os.close(fd)
    os.environ[EVENTS] = name
    config.stash[_EVENTS_FILE] = Path(name)


def pytest_unconfigure(config: pytest.Config) -> None:
    path = config.stash.get(_EVENTS_FILE, None)
    if path is not None:
        path.unlink(missing_ok=True)
        os.environ.pop(EVENTS, None)


def _size(n: float) -> str:
    for unit in ("B", "KB", "MB", "GB"):
        if n < 1000 or unit == "GB":
            return f"{n:.0f} {unit}" if unit == "B" else f"{n:.1f} {unit}"
        n /= 1000
    return f"{n:.1f} GB"  # pragma: no cover


def pytest_terminal_summary(terminalreporter: pytest.TerminalReporter, config: pytest.Config) -> None:
    """What this run downloaded and built for its fixtures, by kind (count, bytes, seconds summed over the
    test processes), and what the cache holds now: the numbers behind docs/performance.md's first-run
    table. Nothing when everything came from the cache."""
    path = config.stash.get(_EVENTS_FILE, None)
    if path is None or not path.is_file() or path.stat().st_size == 0:
        return
    totals: dict[str, list[float]] = {}
    for line in path.read_text(encoding="utf-8").splitlines():
        event = json.loads(line)
        count_bytes_seconds = totals.setdefault(event["kind"], [0, 0, 0.0])
        count_bytes_seconds[0] += 1
        count_bytes_seconds[1] += event["bytes"]
        count_bytes_seconds[2] += event["seconds"]
    root = cache_dir()
    terminalreporter.section(f"downloads and builds of this run (cache {root})")
    for kind, (count, size, seconds) in sorted(totals.items()):
        terminalreporter.write_line(f"{kind}: {count:.0f} made, {_size(size)}, {seconds:.0f} s")
    seen: set[tuple[int, int]] = set()
    held = {p.name: disk_usage(p, seen) for p in sorted(root.iterdir()) if p.is_dir()}
    parts = ", ".join(f"{name} {_size(n)}" for name, n in held.items() if n)
    terminalreporter.write_line(f"cache now: {_size(sum(held.values()))} on disk ({parts})")
