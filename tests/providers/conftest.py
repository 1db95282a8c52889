"""A local PEP 691 index over HTTP for the provider tests: project pages, wheel files with byte ranges,
PEP 658 metadata files; it counts the requests and bytes it serves."""

from __future__ import annotations

import hashlib
import json
import re
import threading
import zipfile
from collections.abc import Iterator
from dataclasses import dataclass, field
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path

import pytest

from tests.fixtures.plant import record_hash


@dataclass
class LocalIndex:
    root: Path
    url: str = ""
    pep658: bool = True
    busy: int = 0  #: how many of the next requests are answered 503 (a busy server)
    requests: int = 0
    bytes: int = 0
    ranges: list[str] = field(default_factory=list)
    lock: threading.Lock = field(default_factory=threading.Lock)
    #: file name -> PEP 700 ``upload-time`` served for it (a file not named here is served without one)
    uploaded: dict[str, str] = field(default_factory=dict)

    def add(self, wheel: Path, *, yanked: bool = False, uploaded: str | None = None) -> None:
        if not (self.root / wheel.name).exists():
            (self.root / wheel.name).symlink_to(wheel.resolve())
        if yanked:
            (self.root / (wheel.name + ".yanked")).write_text("")
        if uploaded is not None:
            self.uploaded[wheel.name] = uploaded

    def page(self, project: str) -> dict[str, object] | None:
        files = []
        for whl in sorted(self.root.glob("*.whl")):
            name = re.sub(r"[-_.]+", "-", whl.name.split("-", 1)[0]).lower()
            if name != project:
                continue
            entry: dict[str, object] = {
                "filename": whl.name,
                "url": f"/files/{whl.name}",
                "hashes": {"sha256": hashlib.sha256(whl.read_bytes()).hexdigest()},
                "size": whl.stat().st_size,
                "yanked": (self.root / (whl.name + ".yanked")).exists(),
            }
            if whl.name in self.uploaded:
                entry["upload-time"] = self.uploaded[whl.name]
            if self.pep658:
                entry["core-metadata"] = {"sha256": hashlib.sha256(_metadata(whl)).hexdigest()}
            files.append(entry)
        if not files:
            return None
        return {"meta": {"api-version": "1.1"}, "name": project, "files": files}


def _metadata(whl: Path) -> bytes:
    with zipfile.ZipFile(whl) as zf:
        name = next(n for n in zf.namelist() if n.endswith(".dist-info/METADATA"))
        return zf.read(name)


def _handler(index: LocalIndex) -> type[BaseHTTPRequestHandler]:
    class Handler(BaseHTTPRequestHandler):
        def log_message(self, format: str, *args: object) -> None:
            pass

        def _send(self, status: int, body: bytes, ctype: str, extra: dict[str, str] | None = None) -> None:
            with index.lock:
                index.requests += 1
                index.bytes += len(body)
            self.send_response(status)
            self.send_header("Content-Type", ctype)
            self.send_header("Content-Length", str(len(body)))
            for k, v in (extra or {}).items():
                self.send_header(k, v)
            self.end_headers()
            self.wfile.write(body)

        def do_GET(self) -> None:
            with index.lock:
                busy, index.busy = index.busy > 0, max(index.busy - 1, 0)
            if busy:
                self._send(503, b"busy", "text/plain")
                return
            if self.path.startswith("/malformed/"):  # a PEP 691 page whose file has a number for its URL
                files = [{"filename": "x-1.0-py3-none-any.whl", "url": 7}]
                page = {"meta": {"api-version": "1.1"}, "files": files}
                self._send(200, json.dumps(page).encode(), "application/vnd.pypi.simple.v1+json")
                return
            if self.path.startswith("/deep/"):  # a hostile page: JSON nested 100,000 levels deep
                self._send(200, b"[" * 100_000 + b"]" * 100_000, "application/vnd.pypi.simple.v1+json")
                return
            if self.path.startswith("/endless/"):  # a hostile page: streams without a size, without end
                self.send_response(200)
                self.send_header("Content-Type", "application/vnd.pypi.simple.v1+json")
                self.end_headers()
                chunk = b" " * (1 << 16)
                try:
                    while True:
                        self.wfile.write(chunk)
                        with index.lock:
                            index.bytes += len(chunk)
                except OSError:  # the client stopped reading and closed the connection
                    return
            if self.path.startswith("/html/"):  # a PEP 503 (HTML only) index
                self._send(200, b"<html><body></body></html>", "text/html")
                return
            m = re.fullmatch(r"/simple/([^/]+)/", self.path)
            if m:
                page = index.page(m.group(1))
                if page is None:
                    self._send(404, b"not found", "text/plain")
                else:
                    self._send(200, json.dumps(page).encode(), "application/vnd.pypi.simple.v1+json")
                return
            m = re.fullmatch(r"/files/(.+\.whl)(\.metadata)?", self.path)
            if not m or not (index.root / m.group(1)).exists():
                self._send(404, b"not found", "text/plain")
                return
            path = index.root / m.group(1)
            if m.group(2):
                self._send(200, _metadata(path), "application/octet-stream")
                return
            size = path.stat().st_size
            rng = self.headers.get("Range")
            if not rng:
                self._send(200, path.read_bytes(), "application/octet-stream")
                return
            index.ranges.append(rng)
            a, b = rng.removeprefix("bytes=").split("-")
            start, end = (size - int(b), size - 1) if a == "" else (int(a), min(int(b), size - 1))
            with path.open("rb") as f:
                f.seek(start)
                body = f.read(end - start + 1)
            self._send(
                206, body, "application/octet-stream", {"Content-Range": f"bytes {start}-{end}/{size}"}
            )

    return Handler


@pytest.fixture
def local_index(tmp_path: Path) -> Iterator[LocalIndex]:
    root = tmp_path / "index-files"
    root.mkdir()
    index = LocalIndex(root)
    server = ThreadingHTTPServer(("127.0.0.1", 0), _handler(index))
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    index.url = f"http://127.0.0.1:{server.server_address[1]}/simple"
    try:
        yield index
    finally:
        server.shutdown()
        server.server_close()


def make_wheel(
    directory: Path,
    name: str,
    version: str,
    tag: str,
    files: dict[str, bytes],
    requires: tuple[str, ...] = (),
    extras: tuple[str, ...] = (),
) -> Path:
    """A small wheel written with zipfile: METADATA, WHEEL, RECORD and ``files``."""
    dist = re.sub(r"[-_.]+", "_", name)
    path = directory / f"{dist}-{version}-{tag}.whl"
    info = f"{dist}-{version}.dist-info"
    meta = ["Metadata-Version: 2.1", f"Name: {name}", f"Version: {version}"]
    meta += [f"Provides-Extra: {e}" for e in extras]
    meta += [f"Requires-Dist: {r}" for r in requires]
    members = dict(files)
    members[f"{info}/METADATA"] = ("\n".join(meta) + "\n").encode()
    members[f"{info}/WHEEL"] = f"Wheel-Version: 1.0\nRoot-Is-Purelib: false\nTag: {tag}\n".encode()
    record = [f"{m},{record_hash(d)},{len(d)}" for m, d in members.items()] + [f"{info}/RECORD,,"]
    members[f"{info}/RECORD"] = ("\n".join(record) + "\n").encode()
    with zipfile.ZipFile(path, "w") as zf:
        for member, data in members.items():
            zf.writestr(member, data)
    return path
