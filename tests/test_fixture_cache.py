"""The test suite's own shared caches: a build or download is made once however many test processes ask
for it at the same time (pytest-xdist workers), and a half-made one is never seen."""

from __future__ import annotations

import multiprocessing
import subprocess
import threading
from pathlib import Path

import pytest

from tests.fixtures import COMPLETE, built_once, content_key
from tests.fixtures import wheels as wheel_fixtures


def _build_counting(directory: str, counter: str) -> str:
    def build(work: Path) -> None:
        with open(counter, "a") as f:
            f.write("built\n")
        (work / "out.bin").write_bytes(b"x" * 4096)

    return str(built_once(Path(directory), build) / "out.bin")


def test_built_once_across_processes(tmp_path: Path) -> None:
    directory, counter = tmp_path / "cache" / "thing-1234", tmp_path / "count.txt"
    context = multiprocessing.get_context("fork")
    with context.Pool(4) as pool:
        outs = pool.starmap(_build_counting, [(str(directory), str(counter))] * 8)
    assert set(outs) == {str(directory / "out.bin")}
    assert counter.read_text() == "built\n"
    assert (directory / COMPLETE).is_file() and (directory / "out.bin").read_bytes() == b"x" * 4096
    assert sorted(p.name for p in directory.parent.iterdir()) == ["thing-1234", "thing-1234.lock"]


def test_failed_build_leaves_nothing_and_is_retried(tmp_path: Path) -> None:
    directory = tmp_path / "thing"

    def broken(work: Path) -> None:
        (work / "half").write_bytes(b"partial")
        raise RuntimeError("compiler crashed")

    with pytest.raises(RuntimeError, match="compiler crashed"):
        built_once(directory, broken)
    assert not directory.exists() and [p.name for p in tmp_path.iterdir()] == ["thing.lock"]
    assert (built_once(directory, lambda work: (work / "ok").write_text("1")) / "ok").read_text() == "1"


def test_content_key_separates_parts() -> None:
    assert content_key("ab", "c") != content_key("a", "bc")
    assert content_key("nvcc 13.0", "-arch=sm_90") == content_key("nvcc 13.0", "-arch=sm_90")


def test_concurrent_wheel_fetch_downloads_once(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("CUDASHIP_TEST_CACHE", str(tmp_path))
    wheel = wheel_fixtures.RealWheel("demo-pkg", "1.0", "manylinux_2_17_x86_64")
    calls: list[list[str]] = []

    def fake_pip(command: list[str], **_: object) -> subprocess.CompletedProcess[str]:
        calls.append(command)
        dest = Path(command[command.index("--dest") + 1])
        assert dest.parent == tmp_path / "wheels" and dest.name.startswith(".download-")
        (dest / "demo_pkg-1.0-py3-none-manylinux_2_17_x86_64.whl").write_bytes(b"PK\x05\x06" + bytes(18))
        return subprocess.CompletedProcess(command, 0, "", "")

    monkeypatch.setattr(wheel_fixtures.subprocess, "run", fake_pip)
    start = threading.Barrier(6)
    got: list[Path] = []

    def fetch() -> None:
        start.wait()
        got.append(wheel_fixtures.fetch(wheel))

    threads = [threading.Thread(target=fetch) for _ in range(6)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    assert len(calls) == 1
    assert len(got) == 6 and len(set(got)) == 1 and got[0].parent == tmp_path / "wheels"
    assert sorted(p.name for p in (tmp_path / "wheels").iterdir()) == [
        "demo-pkg-1.0-manylinux_2_17_x86_64.lock",
        "demo_pkg-1.0-py3-none-manylinux_2_17_x86_64.whl",
    ]
