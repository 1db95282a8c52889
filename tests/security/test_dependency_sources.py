"""Class 3 of issue 25: the dependency sources are input too. An installed environment (``--env``, ``doctor
--env``), a wheelhouse (``--find-links``) and a package index feed the audit files as hostile as an audited
wheel: a METADATA that is a link to ``/dev/zero``, a RECORD that is a FIFO, not UTF-8 or with a 200 KB field,
encrypted and bzip2-bomb wheels, a project page naming a ``file:`` URL or another host, a redirect to one,
metadata bombs in remote wheels. Each bad distribution is a note (a warning in ``doctor --env``) naming its
file; the good ones beside it are still found; nothing hangs, nothing is read past its cap (counted with
tracemalloc and the client's byte count), the exit code is never 70."""

from __future__ import annotations

import bz2
import http.server
import json
import os
import re
import struct
import threading
import tracemalloc
import zipfile
from collections.abc import Iterator
from pathlib import Path

import pytest
from packaging.specifiers import SpecifierSet

from cudaship.cli.main import main
from cudaship.providers.cache import DiskCache
from cudaship.providers.closure import resolve_closure
from cudaship.providers.http import Client
from cudaship.providers.index import IndexSource
from cudaship.providers.records import Target
from cudaship.providers.sources import EnvSource, KnowledgeSource, WheelhouseSource

LINUX = Target("linux", "x86_64", "3.12")
GOOD_FILE = "good/lib/libgood.so"


def _metadata(name: str, version: str = "1.0", requires: tuple[str, ...] = ()) -> bytes:
    lines = ["Metadata-Version: 2.1", f"Name: {name}", f"Version: {version}"]
    lines += [f"Requires-Dist: {r}" for r in requires]
    return ("\n".join(lines) + "\n").encode()


def _wheel_bytes(name: str, *, metadata: bytes | None = None, method: int = zipfile.ZIP_DEFLATED) -> bytes:
    import io

    buffer = io.BytesIO()
    with zipfile.ZipFile(buffer, "w", zipfile.ZIP_DEFLATED) as zf:
        zf.writestr(f"{name.replace('-', '_')}/lib/lib{name}.so", b"\x7fELF" + bytes(60))
        zf.writestr(
            f"{name.replace('-', '_')}-1.0.dist-info/WHEEL",
            "Wheel-Version: 1.0\nRoot-Is-Purelib: false\nTag: py3-none-any\n",
        )
        info = zipfile.ZipInfo(f"{name.replace('-', '_')}-1.0.dist-info/METADATA")
        info.compress_type = method
        zf.writestr(info, metadata if metadata is not None else _metadata(name))
        zf.writestr(f"{name.replace('-', '_')}-1.0.dist-info/RECORD", "")
    return buffer.getvalue()


def _patch_member(data: bytes, name: str, *, flags: int | None = None, size: int | None = None) -> bytes:
    """Rewrite a member's general-purpose flags (bit 0: encrypted) or declared size, in its local header and
    its central directory entry, as a hostile tool would."""
    out = bytearray(data)
    encoded = name.encode()
    for magic, flag_at, size_at, name_at in ((b"PK\x03\x04", 6, 22, 30), (b"PK\x01\x02", 8, 24, 46)):
        for m in re.finditer(re.escape(magic), bytes(out)):
            start = m.start()
            name_len = struct.unpack_from("<H", out, start + (26 if magic == b"PK\x03\x04" else 28))[0]
            if bytes(out[start + name_at : start + name_at + name_len]) != encoded:
                continue
            if flags is not None:
                struct.pack_into("<H", out, start + flag_at, flags)
            if size is not None:
                struct.pack_into("<I", out, start + size_at, size)
    return bytes(out)


BOMB = bz2.compress(bytes(256 << 20))  # 256 MiB of zeros in a few hundred bytes


def _hostile_wheels() -> dict[str, bytes]:
    meta = "bad_{}-1.0.dist-info/METADATA"
    encrypted = _patch_member(_wheel_bytes("bad-enc"), meta.format("enc"), flags=1)
    honest = _wheel_bytes("bad-bz", metadata=bytes(256 << 20), method=zipfile.ZIP_BZIP2)
    lying = _patch_member(
        _wheel_bytes("bad-lie", metadata=bytes(64 << 20), method=zipfile.ZIP_BZIP2),
        meta.format("lie"),
        size=200,
    )
    return {
        "bad_enc-1.0-py3-none-any.whl": encrypted,
        "bad_bz-1.0-py3-none-any.whl": honest,
        "bad_lie-1.0-py3-none-any.whl": lying,
        "bad_zip-1.0-py3-none-any.whl": b"PK\x03\x04 not a zip at all" * 100,
    }


@pytest.fixture(scope="module")
def hostile_wheels() -> dict[str, bytes]:
    return _hostile_wheels()


def _audited(tmp_path: Path, requires: tuple[str, ...]) -> Path:
    wheel = tmp_path / "pkg-1.0-py3-none-linux_x86_64.whl"
    with zipfile.ZipFile(wheel, "w") as zf:
        zf.writestr("pkg-1.0.dist-info/METADATA", _metadata("pkg", requires=requires))
        zf.writestr(
            "pkg-1.0.dist-info/WHEEL",
            "Wheel-Version: 1.0\nRoot-Is-Purelib: false\nTag: py3-none-linux_x86_64\n",
        )
        zf.writestr("pkg-1.0.dist-info/RECORD", "")
    return wheel


# -- an installed environment --------------------------------------------------------------------------------


def _dist_info(site: Path, name: str) -> Path:
    info = site / f"{name}-1.0.dist-info"
    info.mkdir(parents=True)
    (info / "METADATA").write_bytes(_metadata(name))
    (info / "RECORD").write_text(f"{GOOD_FILE},,\n" if name == "good" else f"{name}/x.py,,\n")
    return info


@pytest.fixture
def hostile_site(tmp_path: Path) -> Path:
    site = tmp_path / "site-packages"
    _dist_info(site, "good")
    zero = _dist_info(site, "zeros") / "METADATA"
    zero.unlink()
    zero.symlink_to("/dev/zero")
    fifo = _dist_info(site, "fifo") / "RECORD"
    fifo.unlink()
    os.mkfifo(fifo)
    (_dist_info(site, "latin") / "RECORD").write_bytes("caf\xe9/x.py,,\n".encode("latin-1"))
    (_dist_info(site, "field") / "RECORD").write_text('"' + "a" * 200_000 + '",,\n')
    (_dist_info(site, "huge") / "METADATA").write_bytes(
        _metadata("huge") + b"X-Pad: " + b"a" * (5 << 20) + b"\n"
    )
    return site


BAD_ENV = {
    "zeros": "zeros-1.0.dist-info/METADATA: not a regular file (a character device)",
    "fifo": "fifo-1.0.dist-info/RECORD: not a regular file (a FIFO)",
    "latin": "latin-1.0.dist-info/RECORD: not UTF-8 text",
    "field": "latin-1.0.dist-info/RECORD: not valid CSV: field larger than field limit".replace(
        "latin", "field"
    ),
    "huge": "huge-1.0.dist-info/METADATA: METADATA larger than",
}


def test_env_source_leaves_out_each_bad_dist_info(hostile_site: Path) -> None:
    tracemalloc.start()
    try:
        source = EnvSource(str(hostile_site))
        _, peak = tracemalloc.get_traced_memory()
    finally:
        tracemalloc.stop()
    assert [d.name for d in source.distributions()] == ["good"]
    assert len(source.problems) == len(BAD_ENV)
    for expected in BAD_ENV.values():
        assert sum(expected in line for line in source.problems) == 1, (expected, source.problems)
    assert all("\n" not in line for line in source.problems)
    assert peak < 32 << 20  # the 5 MiB METADATA is refused at its cap, /dev/zero never read


def test_audit_with_a_hostile_env(
    hostile_site: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    wheel = _audited(tmp_path, ("good", *BAD_ENV))
    code = main(["audit", "--offline", "--format", "json", "--env", str(hostile_site), str(wheel)])
    captured = capsys.readouterr()
    assert code in (0, 1), captured.err
    report = json.loads(captured.out)
    text = json.dumps(report)
    for expected in BAD_ENV.values():
        assert expected in text, expected
    assert "internal error" not in captured.err


def test_doctor_env_with_a_hostile_env(hostile_site: Path, capsys: pytest.CaptureFixture[str]) -> None:
    code = main(["doctor", "--env", str(hostile_site), "--format", "json", "--no-system"])
    captured = capsys.readouterr()
    assert code in (0, 1), captured.err
    findings = json.loads(captured.out)["findings"]
    unreadable = [f for f in findings if f["rule"] == "unreadable-distribution"]
    assert len(unreadable) == len(BAD_ENV)
    for expected in BAD_ENV.values():
        assert sum(expected in f["message"] for f in unreadable) == 1, expected
    assert all(f["severity"] == "warning" for f in unreadable)


# -- a wheelhouse ----------------------------------------------------------------------------------------


def test_wheelhouse_with_hostile_wheels(tmp_path: Path, hostile_wheels: dict[str, bytes]) -> None:
    house = tmp_path / "house"
    house.mkdir()
    (house / "good-1.0-py3-none-any.whl").write_bytes(_wheel_bytes("good"))
    for name, data in hostile_wheels.items():
        (house / name).write_bytes(data)
    os.mkfifo(house / "bad_fifo-1.0-py3-none-any.whl")
    wanted = ["good", "bad-enc", "bad-bz", "bad-lie", "bad-zip", "bad-fifo"]
    tracemalloc.start()
    try:
        closure = resolve_closure(wanted, LINUX, [WheelhouseSource(str(house))], fallback=KnowledgeSource())
        _, peak = tracemalloc.get_traced_memory()
    finally:
        tracemalloc.stop()
    assert [r.dist.name for r in closure.reached] == ["good"]
    assert peak < 64 << 20  # the 256 MiB bzip2 bomb is refused, not inflated
    notes = "\n".join(closure.unreadable)
    for name, problem in [
        ("bad_enc", "encrypted"),
        ("bad_bz", "bytes, too large for a metadata file"),
        ("bad_lie", "more data than the declared 200 bytes"),
        ("bad_zip", "not a readable zip archive"),
        ("bad_fifo", "not a regular file (a FIFO)"),
    ]:
        line = next((n for n in closure.unreadable if f"{name}-1.0-py3-none-any.whl" in n), None)
        assert line is not None and problem in line, (name, notes)
        assert line.startswith(f"wheelhouse {house}: ")


# -- a package index ------------------------------------------------------------------------------------


class _Index:
    """A hostile PEP 691 index: pages naming file: URLs, other hosts, redirects, and bomb wheels."""

    def __init__(self, root: Path, wheels: dict[str, bytes]) -> None:
        self.root = root
        self.wheels = wheels
        self.requests: list[str] = []
        self.bytes = 0
        self.url = ""
        self.lock = threading.Lock()

    def page(self, project: str) -> dict[str, object] | None:
        files: list[dict[str, object]] = []
        secret = self.root / "secret-1.0-py3-none-any.whl"
        if project == "secret":  # a local wheel the page points at by file: URL
            files.append({"filename": secret.name, "url": secret.as_uri(), "size": secret.stat().st_size})
        elif project == "elsewhere":  # the same server under another name: not the index's host
            url = self.url.replace("127.0.0.1", "localhost") + "/files/good-1.0-py3-none-any.whl"
            size = len(self.wheels["good-1.0-py3-none-any.whl"])
            files.append({"filename": "elsewhere-1.0-py3-none-any.whl", "url": url, "size": size})
        elif project == "redirected":  # on the index's host, but redirected to a file: URL
            files.append(
                {
                    "filename": "redirected-1.0-py3-none-any.whl",
                    "url": "/redirect",
                    "size": 1000,
                    "core-metadata": True,
                }
            )
        else:
            for name, data in self.wheels.items():
                if name.split("-", 1)[0].replace("_", "-") == project:
                    files.append({"filename": name, "url": f"/files/{name}", "size": len(data)})
        if not files:
            return None
        return {"meta": {"api-version": "1.1"}, "name": project, "files": files}


def _handler(index: _Index) -> type[http.server.BaseHTTPRequestHandler]:
    class Handler(http.server.BaseHTTPRequestHandler):
        def log_message(self, format: str, *args: object) -> None:
            pass

        def _send(self, status: int, body: bytes, extra: dict[str, str] | None = None) -> None:
            with index.lock:
                index.bytes += len(body)
            self.send_response(status)
            self.send_header("Content-Type", "application/vnd.pypi.simple.v1+json")
            self.send_header("Content-Length", str(len(body)))
            for k, v in (extra or {}).items():
                self.send_header(k, v)
            self.end_headers()
            self.wfile.write(body)

        def do_GET(self) -> None:
            with index.lock:
                index.requests.append(f"{self.headers.get('Host')}{self.path}")
            m = re.fullmatch(r"/simple/([^/]+)/", self.path)
            if m:
                page = index.page(m.group(1))
                self._send(404, b"") if page is None else self._send(200, json.dumps(page).encode())
                return
            if self.path.startswith("/redirect"):
                secret = index.root / "secret-1.0-py3-none-any.whl"
                self._send(302, b"", {"Location": secret.as_uri()})
                return
            m = re.fullmatch(r"/files/(.+\.whl)", self.path)
            data = index.wheels.get(m.group(1)) if m else None
            if data is None:
                self._send(404, b"")
                return
            rng = re.fullmatch(r"bytes=(\d+)-(\d+)", self.headers.get("Range", ""))
            if rng is None:
                self._send(200, data)
                return
            lo, hi = int(rng.group(1)), min(int(rng.group(2)), len(data) - 1)
            self._send(206, data[lo : hi + 1], {"Content-Range": f"bytes {lo}-{hi}/{len(data)}"})

    return Handler


@pytest.fixture
def hostile_index(tmp_path: Path, hostile_wheels: dict[str, bytes]) -> Iterator[_Index]:
    root = tmp_path / "index"
    root.mkdir()
    (root / "secret-1.0-py3-none-any.whl").write_bytes(_wheel_bytes("secret"))
    index = _Index(root, {**hostile_wheels, "good-1.0-py3-none-any.whl": _wheel_bytes("good")})
    server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), _handler(index))
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    index.url = f"http://127.0.0.1:{server.server_address[1]}"
    try:
        yield index
    finally:
        server.shutdown()
        server.server_close()


def test_index_follows_only_http_urls_on_allowed_hosts(hostile_index: _Index) -> None:
    client = Client()
    source = IndexSource(hostile_index.url + "/simple", DiskCache(None), client)
    wanted = ["good", "secret", "elsewhere", "redirected", "bad-enc", "bad-bz", "bad-lie", "bad-zip"]
    tracemalloc.start()
    try:
        closure = resolve_closure(wanted, LINUX, [source])
        _, peak = tracemalloc.get_traced_memory()
    finally:
        tracemalloc.stop()
    assert [r.dist.name for r in closure.reached] == ["good"]
    notes = "\n".join(closure.unreadable)
    for filename, problem in [
        ("secret-1.0-py3-none-any.whl", "file URL refused (only http and https are followed)"),
        ("elsewhere-1.0-py3-none-any.whl", "host localhost is neither the index's nor one allowed"),
        ("redirected-1.0-py3-none-any.whl", "URL is refused"),
        ("bad_enc-1.0-py3-none-any.whl", "encrypted"),
        ("bad_bz-1.0-py3-none-any.whl", "over the 4194304 byte limit"),
        ("bad_lie-1.0-py3-none-any.whl", "more data than the declared 200 bytes"),
        ("bad_zip-1.0-py3-none-any.whl", "not a readable zip"),
    ]:
        line = next((n for n in closure.unreadable if filename in n), None)
        assert line is not None and problem in line, (filename, notes)
    # nothing was asked of the other host; the file: URLs were never opened (the wheel there would be found)
    assert not any(r.startswith("localhost") for r in hostile_index.requests)
    assert "secret" not in {r.dist.name for r in closure.reached}
    # bounded by counting: the bombs' METADATA was not fetched whole nor inflated
    assert client.fetched.bytes < 4 << 20
    assert peak < 64 << 20


def test_index_host_option_allows_a_host(hostile_index: _Index, tmp_path: Path) -> None:
    source = IndexSource(
        hostile_index.url + "/simple", DiskCache(None), Client(), allowed_hosts=["LOCALHOST"]
    )
    assert "localhost" in source.hosts
    found = source.find("elsewhere", SpecifierSet(), LINUX)
    assert found is not None and found.name == "good"  # followed to the allowed host (the server's own wheel)


def test_audit_against_a_hostile_index(
    hostile_index: _Index, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    wheel = _audited(tmp_path, ("good", "secret", "bad-bz"))
    code = main(
        [
            "audit",
            "--online",
            "--format",
            "json",
            "--index-url",
            hostile_index.url + "/simple",
            "--cache-dir",
            str(tmp_path / "cache"),
            str(wheel),
        ]
    )
    captured = capsys.readouterr()
    assert code in (0, 1), captured.err
    text = captured.out
    assert "secret-1.0-py3-none-any.whl" in text and "file URL refused" in text
    assert "bad_bz-1.0-py3-none-any.whl" in text
    notes = json.loads(text)["wheels"][0]["notes"]
    left_out = [n for n in notes if n.startswith("provider left out: ")]
    assert len(left_out) == 2, notes  # one note per bad provider, each naming its file


@pytest.mark.parametrize("url", ["file:///srv/simple", "ftp://index.example/simple", "/srv/simple"])
def test_index_url_must_be_http(tmp_path: Path, capsys: pytest.CaptureFixture[str], url: str) -> None:
    code = main(["audit", "--online", "--index-url", url, str(_audited(tmp_path, ("good",)))])
    err = capsys.readouterr().err.strip().splitlines()
    assert code == 2 and len(err) == 1 and "--index-url" in err[0] and "not an http(s) URL" in err[0], err
