"""The download cache: sha256-keyed, shared safely between runs, self-healing when a blob is corrupt."""

from __future__ import annotations

import hashlib
import threading
import time
from pathlib import Path

import pytest

from cudaship.errors import ToolkitError
from cudaship.toolkit.download import Cache, FetchOptions, fetch
from tests.toolkit.builders import LINUX, RedistTree, ServerControl


def _archive(redist: RedistTree) -> tuple[Path, str]:
    path = redist.archives[("cuda_cudart", LINUX)]
    return path, hashlib.sha256(path.read_bytes()).hexdigest()


def _url(base: str, redist: RedistTree, path: Path) -> str:
    return f"{base}/{path.relative_to(redist.root).as_posix()}"


def test_two_runs_fetching_one_blob_take_turns(
    redist: RedistTree, server: tuple[str, ServerControl], cache_dir: Path
) -> None:
    base, control = server
    path, digest = _archive(redist)
    gate = threading.Event()
    control.hold[path.name] = gate
    results: list[Path | BaseException] = []

    def run() -> None:
        try:
            results.append(fetch(_url(base, redist, path), digest, path.name, Cache(cache_dir)))
        except BaseException as e:  # reported by the assertion below
            results.append(e)

    threads = [threading.Thread(target=run) for _ in range(2)]
    for thread in threads:
        thread.start()
    deadline = time.monotonic() + 20
    while not control.requests and time.monotonic() < deadline:
        time.sleep(0.01)
    time.sleep(0.2)  # the second run is now waiting on the blob's lock, not on the server
    gate.set()
    for thread in threads:
        thread.join(timeout=30)
    assert len(results) == 2 and all(isinstance(r, Path) for r in results), results
    assert [p for p, _ in control.requests if p.endswith(path.name)] == [
        path.relative_to(redist.root).as_posix()
    ]


def test_corrupt_cached_blob_is_fetched_again(
    redist: RedistTree, server: tuple[str, ServerControl], cache_dir: Path
) -> None:
    base, control = server
    path, digest = _archive(redist)
    blob = fetch(_url(base, redist, path), digest, path.name, Cache(cache_dir))
    blob.write_bytes(b"bit rot")
    again = fetch(_url(base, redist, path), digest, path.name, Cache(cache_dir))
    assert again.read_bytes() == path.read_bytes()
    assert len([p for p, _ in control.requests if p.endswith(path.name)]) == 2


def test_file_url_and_missing_file(redist: RedistTree, cache_dir: Path) -> None:
    path, digest = _archive(redist)
    blob = fetch(path.as_uri(), digest, path.name, Cache(cache_dir))
    assert blob.read_bytes() == path.read_bytes()
    with pytest.raises(ToolkitError, match="no such file"):
        fetch((path.parent / "gone.tar.xz").as_uri(), "a" * 64, "gone.tar.xz", Cache(cache_dir))


def test_http_404_is_not_retried(
    redist: RedistTree, server: tuple[str, ServerControl], cache_dir: Path
) -> None:
    base, control = server
    with pytest.raises(ToolkitError, match="HTTP 404"):
        fetch(
            f"{base}/nope.tar.xz", "b" * 64, "nope.tar.xz", Cache(cache_dir), options=FetchOptions(retries=3)
        )
    assert len(control.requests) == 1


def test_refused_connection_is_retried_then_reported(cache_dir: Path) -> None:
    with pytest.raises(ToolkitError, match="download failed after 3 attempts"):
        fetch(
            "http://127.0.0.1:9/x.tar.xz",
            "c" * 64,
            "x.tar.xz",
            Cache(cache_dir),
            options=FetchOptions(retries=2, backoff=0.01, timeout=2),
        )


def test_bad_sha_in_manifest(cache_dir: Path) -> None:
    with pytest.raises(ToolkitError, match="manifest gives no valid sha256"):
        fetch("http://127.0.0.1:9/x", "not-a-hash", "x", Cache(cache_dir))
