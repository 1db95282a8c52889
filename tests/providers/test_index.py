"""The package index as a provider source, against a local PEP 691 server: project pages, PEP 658 metadata,
the lazy wheel (central directory by range requests), the on-disk cache and offline use."""

from __future__ import annotations

import os
import socket
import zipfile
from pathlib import Path

import pytest
from packaging.specifiers import SpecifierSet

from cudaship.providers.cache import DiskCache
from cudaship.providers.closure import resolve_closure
from cudaship.providers.http import Client, IndexUnavailable
from cudaship.providers.index import IndexSource
from cudaship.providers.lazywheel import remote_distribution
from cudaship.providers.records import Target
from cudaship.providers.sources import KnowledgeSource
from tests.providers.conftest import LocalIndex, make_wheel

LINUX = Target("linux", "x86_64", "3.12")
WINDOWS = Target("windows", "x86_64", "3.12")


def test_lazy_wheel_reads_a_big_wheel_for_kilobytes(local_index: LocalIndex, tmp_path: Path) -> None:
    # 24 MB of stored (incompressible) library bytes; the file list and METADATA must not fetch them
    lib = os.urandom(24 << 20)
    whl = make_wheel(
        tmp_path,
        "nvidia-cublas",
        "13.1.1.3",
        "py3-none-manylinux_2_27_x86_64",
        {"nvidia/cu13/lib/libcublas.so.13": lib},
    )
    local_index.add(whl)
    client = Client()
    url = local_index.url.rsplit("/", 1)[0] + f"/files/{whl.name}"
    dist = remote_distribution(client, url, whl.stat().st_size, whl.name, "index")
    with zipfile.ZipFile(whl) as local:
        assert set(dist.files) <= set(local.namelist())
    assert "nvidia/cu13/lib/libcublas.so.13" in dist.files
    assert (dist.name, dist.version) == ("nvidia-cublas", "13.1.1.3")  # METADATA read from the remote wheel
    assert client.fetched.bytes < 512 * 1024
    assert client.fetched.bytes == local_index.bytes
    assert all(r.startswith("bytes=") for r in local_index.ranges)


def test_index_source_picks_the_newest_fitting_wheel_with_pep658(
    local_index: LocalIndex, tmp_path: Path
) -> None:
    for version, tag in (
        ("13.0.96", "py3-none-manylinux_2_17_x86_64"),
        ("13.1.80", "py3-none-manylinux_2_17_x86_64"),
        ("13.1.80", "py3-none-win_amd64"),
        ("13.2.1", "py3-none-manylinux_2_17_aarch64"),
    ):
        files = {
            "nvidia/cu13/lib/libcudart.so.13": b"\x7fELF" if "linux" in tag else b"",
            "nvidia/cu13/bin/x86_64/cudart64_13.dll": b"MZ",
        }
        local_index.add(make_wheel(tmp_path, "nvidia-cuda-runtime", version, tag, files))
    local_index.add(
        make_wheel(tmp_path, "nvidia-cuda-runtime", "13.3.0", "py3-none-manylinux_2_17_x86_64", {}),
        yanked=True,
    )
    cache = DiskCache(tmp_path / "cache")
    client = Client()
    source = IndexSource(local_index.url, cache, client)
    dist = source.find("nvidia-cuda-runtime", SpecifierSet(">=13"), LINUX)
    assert dist is not None and dist.version == "13.1.80"
    assert "nvidia/cu13/lib/libcudart.so.13" in dist.files
    win = source.find("nvidia-cuda-runtime", SpecifierSet("==13.1.*"), WINDOWS)
    assert (
        win is not None and win.version == "13.1.80" and "nvidia/cu13/bin/x86_64/cudart64_13.dll" in win.files
    )
    assert source.find("nvidia-cuda-runtime", SpecifierSet("<13"), LINUX) is None
    assert source.find("no-such-project", SpecifierSet(), LINUX) is None
    # PEP 658: METADATA came from the .metadata file; the wheel itself only for its central directory
    assert client.fetched.requests == local_index.requests


def _nvtx(local_index: LocalIndex, tmp_path: Path) -> None:
    local_index.add(
        make_wheel(
            tmp_path,
            "nvidia-nvtx",
            "13.0.85",
            "py3-none-manylinux1_x86_64",
            {"nvidia/cu13/lib/libnvtx3interop.so.1": b"x"},
        )
    )


def test_warm_cache_and_offline(local_index: LocalIndex, tmp_path: Path) -> None:
    _nvtx(local_index, tmp_path)
    cache = DiskCache(tmp_path / "cache")
    cold = Client()
    assert IndexSource(local_index.url, cache, cold).find("nvidia-nvtx", SpecifierSet(), LINUX) is not None
    served = local_index.requests
    assert cold.fetched.requests == served > 0
    warm = Client()
    assert IndexSource(local_index.url, cache, warm).find("nvidia-nvtx", SpecifierSet(), LINUX) is not None
    assert warm.fetched.requests == 0 and warm.fetched.cache_hits == 2
    assert local_index.requests == served
    offline = Client()
    found = IndexSource(local_index.url, cache, offline, offline=True).find(
        "nvidia-nvtx", SpecifierSet(), LINUX
    )
    assert found is not None and offline.fetched.requests == 0
    with pytest.raises(IndexUnavailable):
        IndexSource(local_index.url, DiskCache(tmp_path / "empty"), Client(), offline=True).find(
            "nvidia-nvtx", SpecifierSet(), LINUX
        )


def test_unreachable_index_falls_back_to_the_knowledge_table(tmp_path: Path) -> None:
    source = IndexSource("http://127.0.0.1:9/simple", DiskCache(tmp_path / "c"), Client())
    closure = resolve_closure(["nvidia-cublas==13.1.1.3"], LINUX, [source], fallback=KnowledgeSource())
    assert [r.dist.name for r in closure.reached] == ["nvidia-cublas"]
    assert "nvidia/cu13/lib/libcublas.so.13" in closure.reached[0].dist.files
    assert closure.reached[0].dist.source.startswith("knowledge")
    assert any("cannot answer" in n for n in closure.notes)


def test_pep691_json_is_required(local_index: LocalIndex, tmp_path: Path) -> None:
    source = IndexSource(local_index.url.rsplit("/", 1)[0] + "/html", DiskCache(None), Client())
    with pytest.raises(IndexUnavailable):
        source.find("x", SpecifierSet(), LINUX)


def test_a_malformed_wheel_does_not_silence_the_index(local_index: LocalIndex, tmp_path: Path) -> None:
    bad = tmp_path / "broken-1.0-py3-none-any.whl"
    bad.write_bytes(b"not a zip at all" * 100)
    local_index.add(bad)
    local_index.pep658 = False  # the broken file has no METADATA to serve
    local_index.add(
        make_wheel(
            tmp_path,
            "nvidia-curand",
            "10.4.0.35",
            "py3-none-manylinux_2_27_x86_64",
            {"nvidia/cu13/lib/libcurand.so.10": b"x"},
        )
    )
    source = IndexSource(local_index.url, DiskCache(None), Client())
    closure = resolve_closure(["broken", "nvidia-curand"], LINUX, [source], fallback=KnowledgeSource())
    assert [r.dist.name for r in closure.reached] == ["nvidia-curand"]
    assert closure.reached[0].dist.source.startswith("index ")
    assert len(closure.unresolved) == 1 and "not a readable zip" in closure.unresolved[0].reason


def test_a_page_nested_too_deep_is_an_unavailable_index(local_index: LocalIndex) -> None:
    """A hostile index's page nested 100,000 levels deep: the index cannot answer (one line), never an
    internal error."""
    source = IndexSource(local_index.url.rsplit("/", 1)[0] + "/deep", DiskCache(None), Client())
    with pytest.raises(IndexUnavailable, match="nested more than 64 levels"):
        source.find("x", SpecifierSet(), LINUX)


def test_an_endless_answer_is_cut_off(local_index: LocalIndex, monkeypatch: pytest.MonkeyPatch) -> None:
    """An index that streams without a size and without end is read up to the cap, then refused."""
    import cudaship.providers.http as http

    monkeypatch.setattr(http, "MAX_RESPONSE", 1 << 20)
    client = Client()
    source = IndexSource(local_index.url.rsplit("/", 1)[0] + "/endless", DiskCache(None), client)
    with pytest.raises(IndexUnavailable, match=r"larger than 1\.0 MiB"):
        source.find("x", SpecifierSet(), LINUX)
    assert client.fetched.bytes <= (1 << 20) + 1  # what the client took in: the cap, not the stream


def test_a_damaged_or_hostile_cache_entry_is_a_miss(tmp_path: Path) -> None:
    cache = DiskCache(tmp_path)
    cache.put("page", "k", {"a": 1})
    assert cache.get("page", "k") == {"a": 1}
    entry = cache._path("page", "k")
    assert entry is not None
    entry.write_bytes(b"[" * 100_000)  # nested too deep: a miss, not a RecursionError
    assert cache.get("page", "k") is None
    entry.unlink()
    os.mkfifo(entry)  # a FIFO in the cache would block a plain open: refused, a miss
    assert cache.get("page", "k") is None


def test_a_busy_index_is_asked_once_more(local_index: LocalIndex, tmp_path: Path) -> None:
    """docs/providers.md, "Retries": a 503 (or 408, 429, another 5xx) is tried once more, after a pause."""
    _nvtx(local_index, tmp_path)
    calm = Client()
    assert IndexSource(local_index.url, DiskCache(None), calm).find("nvidia-nvtx", SpecifierSet(), LINUX)
    local_index.busy = 1
    busy = Client()
    found = IndexSource(local_index.url, DiskCache(None), busy).find("nvidia-nvtx", SpecifierSet(), LINUX)
    assert found is not None and found.version == "13.0.85"
    assert busy.fetched.requests == calm.fetched.requests + 1  # the 503, then the same requests as before
    local_index.busy = 2  # still busy when asked again: the index cannot answer, and says why
    twice = Client()
    with pytest.raises(IndexUnavailable, match="HTTP 503"):
        IndexSource(local_index.url, DiskCache(None), twice).find("nvidia-nvtx", SpecifierSet(), LINUX)
    assert twice.fetched.requests == 2 and local_index.busy == 0


def test_an_index_that_does_not_answer_is_not_asked_again(tmp_path: Path) -> None:
    """No answer at all (here: connection refused) is not retried, so the knowledge table answers at once."""
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]  # closed when the block ends: nothing listens there
    client = Client()
    with pytest.raises(IndexUnavailable):
        IndexSource(f"http://127.0.0.1:{port}/simple", DiskCache(None), client).find(
            "nvidia-nvtx", SpecifierSet(), LINUX
        )
    assert client.fetched.requests == 1


def test_a_malformed_page_names_the_key(local_index: LocalIndex) -> None:
    source = IndexSource(local_index.url.rsplit("/", 1)[0] + "/malformed", DiskCache(None), Client())
    with pytest.raises(
        IndexUnavailable,
        match=r"/malformed/x/: not a PEP 691 project page: files\[0\]\.url: must be a non-empty string, "
        r"not an integer$",
    ):
        source.find("x", SpecifierSet(), LINUX)


def test_a_cache_entry_of_the_wrong_shape_is_a_miss(local_index: LocalIndex, tmp_path: Path) -> None:
    _nvtx(local_index, tmp_path)
    cache = DiskCache(tmp_path / "cache")
    source = IndexSource(local_index.url, cache, Client())
    assert source.find("nvidia-nvtx", SpecifierSet(), LINUX) is not None
    page = f"{local_index.url}/nvidia-nvtx/"
    cache.put("page", page, [{"filename": 7}])  # valid JSON, not what the index writes: asked again
    (wheel_key,) = (p for p in (tmp_path / "cache" / "index" / "wheel-verified").rglob("*.json"))
    wheel_key.write_text('{"key": "elsewhere", "value": {}}')  # an entry for another key: a miss
    again = Client()
    found = IndexSource(local_index.url, cache, again).find("nvidia-nvtx", SpecifierSet(), LINUX)
    assert found is not None and found.version == "13.0.85"
    assert again.fetched.cache_hits == 0 and again.fetched.requests > 0
