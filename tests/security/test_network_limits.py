"""Issue 30, classes 6 and 9: servers that trickle, mirrors that send more than they declared, and an index
that lies about a wheel's sha256. Each test plants the attack on 127.0.0.1 (or a local mirror) and bounds the
work by counting (bytes the server sent, bytes written, requests seen), never by the clock: the deadlines
are set small (1.5 s) only to keep the tests quick."""

from __future__ import annotations

import hashlib
import http.server
import json
import os
import resource
import subprocess
import sys
import threading
import time
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path

import pytest
from packaging.specifiers import SpecifierSet

from cudaship.errors import ToolkitError
from cudaship.providers.cache import DiskCache
from cudaship.providers.http import Client, IndexUnavailable
from cudaship.providers.index import IndexSource
from cudaship.providers.records import Target
from cudaship.toolkit.download import Cache, FetchOptions, fetch
from tests.providers.conftest import LocalIndex, _handler, make_wheel
from tests.toolkit.builders import LINUX, build_redist

#: what a trickling server would send in all: 60 bytes, one every 0.2 s (12 s), far past the 1.5 s deadline
TRICKLE = 60
STEP_S = 0.2
BODY = bytes(range(TRICKLE))


@dataclass
class Trickle:
    url: str = ""
    sent: int = 0  #: bytes of the trickled part sent before the client gave up
    requests: int = 0
    done: threading.Event = field(default_factory=threading.Event)


@pytest.fixture
def trickle() -> Iterator[Trickle]:
    seen = Trickle()

    class Handler(http.server.BaseHTTPRequestHandler):
        protocol_version = "HTTP/1.1"

        def log_message(self, format: str, *args: object) -> None:
            pass

        def _drip(self, data: bytes) -> bool:
            for i in range(len(data)):
                try:
                    self.wfile.write(data[i : i + 1])
                    self.wfile.flush()
                except OSError:  # the client gave up and closed the connection
                    return False
                seen.sent += 1
                time.sleep(STEP_S)
            return True

        def do_GET(self) -> None:
            seen.requests += 1
            try:
                if self.path.startswith("/headers/"):  # the status line, then headers a byte at a time
                    self.wfile.write(b"HTTP/1.1 200 OK\r\n")
                    pad = b"X-Pad: " + b"p" * (TRICKLE - 9) + b"\r\n"
                    if not self._drip(pad):
                        return
                    self.wfile.write(
                        b"Content-Type: application/vnd.pypi.simple.v1+json\r\nContent-Length: 2\r\n\r\n{}"
                    )
                    return
                self.send_response(200)  # a body a byte at a time
                self.send_header("Content-Length", str(len(BODY)))
                self.end_headers()
                self._drip(BODY)
            finally:
                seen.done.set()

    server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), Handler)
    server.daemon_threads = True
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    seen.url = f"http://127.0.0.1:{server.server_address[1]}"
    try:
        yield seen
    finally:
        server.shutdown()
        server.server_close()


def _options(**changes: float) -> FetchOptions:
    """FetchOptions with a 1.5 s deadline (the field is set only where it exists, so that this file also runs,
    and fails, on the code before deadlines)."""
    if "deadline" in FetchOptions.__dataclass_fields__:
        changes["deadline"] = 1.5
    return FetchOptions(**changes)  # type: ignore[arg-type]


def _wait_done(seen: Trickle) -> None:
    """The server's handler has noticed the client is gone (bounded: it sends at most TRICKLE bytes)."""
    assert seen.done.wait(TRICKLE * STEP_S + 10)


def test_index_page_whose_headers_trickle_fails_at_the_deadline(trickle: Trickle) -> None:
    client = Client(timeout=5)
    client.deadline = 1.5
    with pytest.raises(IndexUnavailable, match="deadline"):
        client.get(f"{trickle.url}/headers/torch/", accept="application/json")
    _wait_done(trickle)
    # given up well before the headers were complete, and not tried again (a deadline is final)
    assert trickle.sent < TRICKLE // 2
    assert trickle.requests == 1
    assert client.fetched.requests == 1


def test_toolkit_archive_that_trickles_fails_at_the_deadline(trickle: Trickle, tmp_path: Path) -> None:
    options = _options(retries=3, backoff=0.01, timeout=5)
    with pytest.raises(ToolkitError, match=r"not complete within the 1\.5 s deadline .*after 1 attempt"):
        fetch(
            f"{trickle.url}/x.tar.xz",
            hashlib.sha256(BODY).hexdigest(),
            "x.tar.xz",
            Cache(tmp_path / "cache"),
            size=len(BODY),
            options=options,
        )
    _wait_done(trickle)
    assert trickle.sent < TRICKLE // 2
    assert trickle.requests == 1  # retries are not spent on a server that stalls: the deadline covers them
    blob = Cache(tmp_path / "cache").blob(hashlib.sha256(BODY).hexdigest())
    assert not blob.exists()  # only a resumable <sha>.part of the few bytes that came
    parts = list(blob.parent.glob("*.part"))
    assert [p.name for p in parts] == [blob.name + ".part"] and parts[0].stat().st_size <= trickle.sent


def _install(
    tmp_path: Path, mirror: str, *extra: str, fsize: int | None = None
) -> subprocess.CompletedProcess[str]:
    """``cudaship toolkit install`` in a child (with a file-size limit when ``fsize`` is given)."""

    def limit() -> None:
        if fsize is not None:
            resource.setrlimit(resource.RLIMIT_FSIZE, (fsize, fsize))

    env = {**os.environ, "PYTHONPATH": str(Path(__file__).resolve().parents[2] / "src")}
    return subprocess.run(
        [
            sys.executable,
            "-m",
            "cudaship",
            "toolkit",
            "install",
            "13.0.2",
            "--platform",
            LINUX,
            "-c",
            "cudart",
            "--mirror",
            mirror,
            "--dest",
            str(tmp_path / "cuda"),
            "--cache-dir",
            str(tmp_path / "cache"),
            "--quiet",
            *extra,
        ],
        capture_output=True,
        text=True,
        env=env,
        preexec_fn=limit,
        timeout=120,
        check=False,
    )


def test_toolkit_install_deadline_option_stops_a_trickling_mirror(trickle: Trickle, tmp_path: Path) -> None:
    """`toolkit install --deadline 1.5` against a mirror that trickles its manifest a byte every 0.2 s: one
    line naming the deadline and the other sources (--source pypi, --mirror), exit 2, one request (the
    retries are not spent on a server that stalls), nothing at --dest."""
    done = _install(tmp_path, trickle.url, "--deadline", "1.5", "--retries", "3")
    lines = done.stderr.strip().splitlines()
    assert done.returncode == 2, done.stderr
    assert len(lines) == 1, done.stderr
    _wait_done(trickle)
    assert "redistrib_13.0.2.json: not complete within the 1.5 s deadline (--deadline)" in lines[0]
    assert "after 1 attempt" in lines[0]
    assert "--source pypi" in lines[0] and "--mirror URL|DIR" in lines[0]
    assert trickle.sent < TRICKLE // 2 and trickle.requests == 1
    assert not (tmp_path / "cuda").exists()


def test_local_mirror_archive_larger_than_its_manifest_is_not_copied(tmp_path: Path) -> None:
    """A mirror whose archive is 3 MiB where the manifest says 1 KiB: refused at byte 1,025, under a 1 MiB
    file-size limit one line and exit 2 (not exit 70), and nothing past 1 KiB written to the cache."""
    tree = build_redist(tmp_path / "redist")
    archive = tree.archives[("cuda_cudart", LINUX)]
    with archive.open("ab") as f:
        f.write(os.urandom(3 << 20))
    manifest = tree.manifest()
    entry = manifest["cuda_cudart"]
    assert isinstance(entry, dict)
    entry[LINUX]["size"] = "1024"
    tree.write_manifest(manifest)
    done = _install(tmp_path, str(tree.root), fsize=1 << 20)
    lines = done.stderr.strip().splitlines()
    assert done.returncode == 2, done.stderr
    assert len(lines) == 1 and "larger than the 1024 bytes the manifest says" in lines[0], done.stderr
    written = [p.stat().st_size for p in (tmp_path / "cache").rglob("*") if p.is_file()]
    assert max(written, default=0) <= 1024 or all(
        p.suffix == ".json"
        for p in (tmp_path / "cache").rglob("*")
        if p.is_file() and p.stat().st_size > 1024
    )
    assert not (tmp_path / "cuda").exists()


def test_http_mirror_sending_more_than_declared_stops_at_the_declared_size(tmp_path: Path) -> None:
    """No Content-Length, 4 MiB streamed for a declared 1 KiB: cut at 1,025 bytes received, none kept."""
    sent = [0]

    class Handler(http.server.BaseHTTPRequestHandler):
        def log_message(self, format: str, *args: object) -> None:
            pass

        def do_GET(self) -> None:
            self.send_response(200)
            self.end_headers()
            try:
                for _ in range(64):
                    self.wfile.write(b"\0" * (1 << 16))
                    sent[0] += 1 << 16
            except OSError:
                return

    server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), Handler)
    server.daemon_threads = True
    threading.Thread(target=server.serve_forever, daemon=True).start()
    try:
        with pytest.raises(ToolkitError, match="more than the 1024 bytes the manifest says"):
            fetch(
                f"http://127.0.0.1:{server.server_address[1]}/x.tar.xz",
                "a" * 64,
                "x.tar.xz",
                Cache(tmp_path / "cache"),
                size=1024,
                options=FetchOptions(retries=2, backoff=0.01, timeout=5),
            )
    finally:
        server.shutdown()
        server.server_close()
    assert [p for p in (tmp_path / "cache").rglob("*") if p.is_file() and p.stat().st_size > 0] == []


def test_toolkit_blob_with_the_wrong_bytes_is_never_stored_under_the_asked_hash(tmp_path: Path) -> None:
    """A lying mirror serves other bytes for an archive's sha256: refused, and nothing cached under that
    hash, so the honest mirror is asked the next time (one request reaches it)."""
    good = tmp_path / "good" / "x.tar.xz"
    bad = tmp_path / "bad" / "x.tar.xz"
    good.parent.mkdir()
    bad.parent.mkdir()
    good.write_bytes(b"the real archive\n" * 64)
    bad.write_bytes(b"another archive!\n" * 64)
    sha = hashlib.sha256(good.read_bytes()).hexdigest()
    cache = Cache(tmp_path / "cache")
    with pytest.raises(ToolkitError, match="checksum mismatch"):
        fetch(str(bad), sha, "x.tar.xz", cache, size=good.stat().st_size)
    assert not cache.blob(sha).exists()
    assert [p.name for p in cache.blob(sha).parent.iterdir() if not p.name.endswith("-lock")] == []
    assert (
        fetch(str(good), sha, "x.tar.xz", cache, size=good.stat().st_size).read_bytes() == good.read_bytes()
    )


# --- class 9: the index cache -------------------------------------------------------------------------------


@pytest.fixture
def two_indexes(tmp_path: Path) -> Iterator[tuple[LocalIndex, LocalIndex]]:
    servers = []
    indexes = []
    for name in ("lying", "honest"):
        root = tmp_path / name
        root.mkdir()
        index = LocalIndex(root, pep658=False)
        server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), _handler(index))
        server.daemon_threads = True
        threading.Thread(target=server.serve_forever, daemon=True).start()
        index.url = f"http://127.0.0.1:{server.server_address[1]}/simple"
        servers.append(server)
        indexes.append(index)
    try:
        yield indexes[0], indexes[1]
    finally:
        for server in servers:
            server.shutdown()
            server.server_close()


LINUX_TARGET = Target("linux", "x86_64", "3.12")


def _lying_setup(tmp_path: Path, lying: LocalIndex, honest: LocalIndex, padding: int) -> None:
    """The honest index serves ``pkg`` 1.0 requiring ``good-dep``; the lying one serves a wheel of the same
    name requiring ``evil-dep`` but lists the honest wheel's sha256 (and size) for it."""
    (tmp_path / "g").mkdir()
    (tmp_path / "b").mkdir()
    pad = {"pkg/pad.bin": os.urandom(padding)} if padding else {}
    good = make_wheel(
        tmp_path / "g", "pkg", "1.0", "py3-none-any", {"pkg/__init__.py": b"", **pad}, ("good-dep",)
    )
    bad = make_wheel(
        tmp_path / "b", "pkg", "1.0", "py3-none-any", {"pkg/__init__.py": b"", **pad}, ("evil-dep",)
    )
    honest.add(good)
    lying.add(bad)
    claimed = hashlib.sha256(good.read_bytes()).hexdigest()
    original = lying.page

    def page(project: str) -> dict[str, object] | None:
        found = original(project)
        if found is not None:
            for entry in found["files"]:  # type: ignore[union-attr]
                entry["hashes"] = {"sha256": claimed}
        return found

    lying.page = page  # type: ignore[method-assign]


def _find(index: LocalIndex, cache: Path) -> tuple[object, Client]:
    client = Client(timeout=5)
    source = IndexSource(index.url, DiskCache(cache), client)
    try:
        return source.find("pkg", SpecifierSet(), LINUX_TARGET), client
    except Exception as e:  # a refused file is reported by the assertion below
        return e, client


@pytest.mark.parametrize(
    ("padding", "lying_verdict"),
    [
        pytest.param(0, "refused", id="small-wheel-hashed-whole"),
        pytest.param(200_000, "read-unverified", id="large-wheel-read-in-ranges"),
    ],
)
def test_lying_index_cannot_poison_the_cache_of_an_honest_one(
    tmp_path: Path, two_indexes: tuple[LocalIndex, LocalIndex], padding: int, lying_verdict: str
) -> None:
    lying, honest = two_indexes
    _lying_setup(tmp_path, lying, honest, padding)
    cache = tmp_path / "cache"
    first, _ = _find(lying, cache)
    if lying_verdict == "refused":  # the whole file was fetched: its hash is checked, the lie found
        assert "sha256 does not match the index's" in str(first)
    else:  # read in ranges: cannot be verified, so it is not cached under the claimed hash
        assert list(first.requires_dist) == ["evil-dep"]  # type: ignore[attr-defined]
    before = honest.requests
    second, _ = _find(honest, cache)
    assert list(second.requires_dist) == ["good-dep"], second  # type: ignore[attr-defined]
    assert honest.requests - before >= 2  # its page and its wheel: the honest index was asked
    entries = json.dumps([p.read_text() for p in cache.rglob("*.json")])
    assert "evil-dep" not in entries or lying_verdict == "read-unverified"
