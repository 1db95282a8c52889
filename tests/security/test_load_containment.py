"""``audit --load`` runs the wheel's code: what that code can reach (issue 30, class 5). Each test plants a
package built here, installs it offline into a fresh venv and imports it, in a fresh cudaship process bounded
by a timeout (a hang is a failure, not a stuck suite); the grandchild's pid file and ``os.kill(pid, 0)`` say
whether anything is left running."""

from __future__ import annotations

import contextlib
import json
import os
import signal
import subprocess
from pathlib import Path

import pytest

from tests.security.load_wheels import (
    DAEMON,
    HOG,
    MARKER,
    SECRETS,
    SLEEPER,
    SPY,
    probes,
    pure_wheel,
    run_load,
    sdist_only,
)


def _alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    try:  # a zombie is not running: /proc says Z
        with open(f"/proc/{pid}/stat", "rb") as f:
            return f.read().rsplit(b")", 1)[1].split()[0] != b"Z"
    except OSError:
        return True


@pytest.fixture
def leftovers():
    """Pids the planted grandchildren wrote; any still running after the test is killed (and fails it)."""
    pids: list[int] = []
    yield pids
    for pid in pids:
        with contextlib.suppress(OSError):
            os.kill(pid, signal.SIGKILL)


def test_the_import_sees_no_secret_and_not_the_callers_home(tmp_path: Path) -> None:
    report = tmp_path / "seen.jsonl"
    home = tmp_path / "caller-home"
    home.mkdir()
    wheel = pure_wheel(tmp_path / "dist", "spypkg", {"spypkg/__init__.py": SPY.format(report=str(report))})
    done, _data = run_load(wheel, tmp_path / "dist", env={"HOME": str(home), "TMPDIR": str(tmp_path)})
    assert done.returncode in (0, 1), done.stderr
    seen = [json.loads(line) for line in report.read_text().splitlines()]
    assert seen, "the planted import did not run"
    for one in seen:
        assert not set(SECRETS) & set(one["keys"]), one["keys"]
        assert not set(SECRETS.values()) & set(one["values"])
        assert Path(one["home"]) != home and not Path(one["home"]).is_relative_to(home)
        run_dir = Path(one["home"]).parent
        assert Path(one["cwd"]).is_relative_to(run_dir) and Path(one["tmp"]).is_relative_to(run_dir)
        assert not run_dir.exists(), "the run's own directory is removed at the end"
    assert not (home / ".spy-was-here").exists()


def test_a_setsid_grandchild_holding_stderr_neither_hangs_the_run_nor_outlives_it(
    tmp_path: Path, leftovers: list[int]
) -> None:
    pids = tmp_path / "pids"
    pids.mkdir()
    init = DAEMON.format(pids=str(pids))
    wheel = pure_wheel(tmp_path / "dist", "daemonpkg", {"daemonpkg/__init__.py": init})
    try:
        done, _data = run_load(wheel, tmp_path / "dist", "--load-timeout", "5", timeout=150)
    finally:
        leftovers.extend(int(p.name) for p in pids.iterdir())
    assert done.returncode in (0, 1), done.stderr
    assert leftovers, "the planted grandchild never started"
    assert [pid for pid in leftovers if _alive(pid)] == []


def test_the_memory_limit_stops_a_2_gib_allocation(tmp_path: Path) -> None:
    wheel = pure_wheel(tmp_path / "dist", "hogpkg", {"hogpkg/__init__.py": HOG})
    done, data = run_load(wheel, tmp_path / "dist", "--load-memory", "1G")
    assert done.returncode == 1, done.stderr
    (probe,) = [p for p in probes(data) if p["label"] == "import hogpkg"]
    assert not probe["ok"] and "MemoryError" in (probe["message"] or ""), probe


def test_3000_top_level_modules_run_in_a_bounded_number_of_interpreters(tmp_path: Path) -> None:
    from cudaship.oracle.observe import MAX_IMPORT_INTERPRETERS

    markers = tmp_path / "markers"
    markers.mkdir()
    text = MARKER.format(markers=str(markers))
    files = {f"mod{n:04d}.py": text for n in range(3000)}
    wheel = pure_wheel(tmp_path / "dist", "manymods", files)
    done, data = run_load(wheel, tmp_path / "dist", "--load-timeout", "30", timeout=400)
    assert done.returncode == 0, done.stderr[-2000:]
    imported = [p for p in probes(data) if p["label"].startswith("import mod")]
    assert len(imported) == 3000 and all(p["ok"] for p in imported)
    assert 1 <= len(list(markers.iterdir())) <= MAX_IMPORT_INTERPRETERS


def test_a_requirement_only_an_sdist_provides_is_not_built_unless_allowed(tmp_path: Path) -> None:
    mark = tmp_path / "backend-ran"
    dist = tmp_path / "dist"
    sdist_only(dist, "buildme", mark)
    wheel = pure_wheel(dist, "needsdist", {"needsdist/__init__.py": ""}, requires=("buildme",))
    done, data = run_load(wheel, dist)
    assert done.returncode == 1, done.stderr
    assert not mark.exists(), "pip ran the sdist's build backend"
    load = data["wheels"][0]["load"]
    assert any("only-binary" in n or "sdist" in n for n in load["notes"]), load
    # --allow-sdist: the backend runs, and sees none of the caller's secrets either
    done, data = run_load(wheel, dist, "--allow-sdist")
    assert mark.exists()
    for line in mark.read_text().splitlines():
        assert not set(SECRETS) & set(json.loads(line))


def test_the_whole_run_has_a_deadline(tmp_path: Path) -> None:
    files = {f"slow{n}.py": SLEEPER for n in range(6)}
    wheel = pure_wheel(tmp_path / "dist", "slowmods", files)
    try:
        done, data = run_load(
            wheel, tmp_path / "dist", "--load-timeout", "600", "--load-deadline", "20", timeout=200
        )
    except subprocess.TimeoutExpired:
        pytest.fail("audit --load did not return within 200 s with --load-deadline 20")
    assert done.returncode == 1, done.stderr
    slow = [p for p in probes(data) if p["label"].startswith("import slow")]
    assert len(slow) == 6 and not any(p["ok"] for p in slow)
    assert all("deadline" in (p["message"] or "") or "did not finish" in (p["message"] or "") for p in slow)
