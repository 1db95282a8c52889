"""Class 6 of issue 25 (left from round 2): a mirror that sends an endless body without a Content-Length is
cut off at ``toolkit install --max-size``, counted as the bytes arrive, and nothing of it stays on disk; a
``provenance.json`` nested deeper than the loader reads makes ``program check`` end as bad input (exit 2,
one line naming the file), not as a failed check."""

from __future__ import annotations

import http.server
import json
import threading
from collections.abc import Iterator
from pathlib import Path

import pytest

from cudaship.cli.main import main
from cudaship.knowledge import toolkit_data
from cudaship.toolkit.records import Platform
from tests.security.builders import Jail, snapshot

RELEASE = toolkit_data.resolve_release("13.0")
NAME = toolkit_data.source_name("cudart", "redist", RELEASE)


_CHUNK = 1 << 16
_STOP = 128 << 20


def _socket_buffers() -> int:
    """The most the loopback path can hold between the server's writes and the client's reads: the largest
    receive buffer plus the largest send buffer the kernel allows a TCP socket (the third field of
    ``tcp_rmem`` and ``tcp_wmem``); 16 MiB where the kernel does not say."""
    total = 0
    for name in ("tcp_rmem", "tcp_wmem"):
        try:
            total += int(Path("/proc/sys/net/ipv4", name).read_text().split()[2])
        except (OSError, IndexError, ValueError):
            return 16 << 20
    return total


class _Mirror(http.server.BaseHTTPRequestHandler):
    """``redistrib_<release>.json`` naming one archive (no size), and that archive as an endless body."""

    sent = 0

    def log_message(self, *args: object) -> None:
        pass

    def do_GET(self) -> None:
        if self.path.endswith(".json"):
            assert NAME is not None and NAME.name is not None
            body = json.dumps(
                {
                    NAME.name: {
                        Platform.LINUX_X86_64.value: {
                            "relative_path": "cuda_cudart/cudart.tar.xz",
                            "sha256": "0" * 64,
                        }
                    }
                }
            ).encode()
            self.send_response(200)
            self.send_header("Content-Length", str(len(body)))
            self.end_headers()
            self.wfile.write(body)
            return
        self.send_response(200)  # no Content-Length: the body ends when the connection does, i.e. never
        self.end_headers()
        chunk = bytes(_CHUNK)
        try:
            while type(self).sent < _STOP:  # the test's own stop, far past the cap
                self.wfile.write(chunk)
                type(self).sent += len(chunk)
        except OSError:
            return


@pytest.fixture
def mirror() -> Iterator[str]:
    _Mirror.sent = 0
    server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), _Mirror)
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    try:
        yield f"http://127.0.0.1:{server.server_address[1]}"
    finally:
        server.shutdown()
        server.server_close()


def test_endless_body_is_cut_at_max_size(
    mirror: str, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    jail = Jail(tmp_path / "jail")
    cache = tmp_path / "cache"
    code = main(
        [
            "toolkit",
            "install",
            "13.0",
            "--components",
            "cudart",
            "--platform",
            Platform.LINUX_X86_64.value,
            "--mirror",
            mirror,
            "--dest",
            str(jail.dest / "cuda"),
            "--cache-dir",
            str(cache),
            "--retries",
            "0",
            "--max-size",
            "4M",
            "--quiet",
        ]
    )
    err = capsys.readouterr().err.strip().splitlines()
    assert code == 2, err
    assert len(err) == 1 and "cudart.tar.xz: larger than 4194304 bytes (--max-size)" in err[0], err
    # counted as it streamed: the client hung up once the cap was passed, so the server got to send no more
    # than the cap plus what the kernel buffers on the way (both sockets' largest buffers, as this machine
    # sets them), far short of the test's own stop
    assert _Mirror.sent <= (4 << 20) + _socket_buffers() + 2 * _CHUNK < _STOP
    kept = {k: v for k, v in snapshot(cache).items() if v[0]}
    assert all(size < 1 << 20 for size, _links, _target in kept.values()), kept  # no part file left
    jail.assert_untouched()
    assert not (jail.dest / "cuda").exists()


@pytest.mark.parametrize(
    "body",
    [
        pytest.param("[" * 10_000 + "]" * 10_000, id="arrays"),
        pytest.param('{"a":' * 100_000 + "1" + "}" * 100_000, id="objects"),
        pytest.param("{" * 3 + "not json", id="not-json"),
        pytest.param('{"schema": 1}', id="keys-missing"),
    ],
)
def test_bad_provenance_is_bad_input(tmp_path: Path, capsys: pytest.CaptureFixture[str], body: str) -> None:
    export = tmp_path / "export"
    export.mkdir()
    (export / "provenance.json").write_text(body)
    code = main(["program", "check", str(export)])
    captured = capsys.readouterr()
    err = captured.err.strip().splitlines()
    assert code == 2, (captured.out, err)
    assert len(err) == 1 and err[0].startswith(f"cudaship: error: {export / 'provenance.json'}: "), err
    assert captured.out == ""


def test_missing_provenance_is_still_a_failed_check(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    export = tmp_path / "export"
    export.mkdir()
    code = main(["program", "check", str(export)])
    out = capsys.readouterr().out
    assert code == 1
    assert "no provenance.json" in out
