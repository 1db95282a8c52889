"""The one HTTP client (cudaship/http.py): the index and toolkit downloads send one User-Agent, share one
retry policy (a 503 is tried again, a 403 is final), and neither follows a redirect to a non-http(s) URL."""

from __future__ import annotations

import hashlib
import http.server
import threading
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path

import pytest

from cudaship.errors import ToolkitError
from cudaship.http import USER_AGENT, Retry
from cudaship.providers.http import Client, RefusedURL
from cudaship.toolkit.download import Cache, FetchOptions, fetch

BODY = b"the archive's bytes\n" * 100
SHA = hashlib.sha256(BODY).hexdigest()


@dataclass
class Seen:
    agents: list[str] = field(default_factory=list)
    #: path -> statuses still to answer before the body (popped one per request)
    failures: dict[str, list[int]] = field(default_factory=dict)


@pytest.fixture
def server(tmp_path: Path) -> Iterator[tuple[str, Seen, Path]]:
    seen = Seen()
    secret = tmp_path / "secret.txt"
    secret.write_bytes(BODY)

    class Handler(http.server.BaseHTTPRequestHandler):
        def log_message(self, format: str, *args: object) -> None:
            pass

        def do_GET(self) -> None:
            seen.agents.append(self.headers.get("User-Agent", ""))
            pending = seen.failures.get(self.path)
            if pending:
                self.send_error(pending.pop(0))
                return
            if self.path == "/to-file":
                self.send_response(302)
                self.send_header("Location", secret.as_uri())
                self.send_header("Content-Length", "0")
                self.end_headers()
                return
            self.send_response(200)
            self.send_header("Content-Length", str(len(BODY)))
            self.end_headers()
            self.wfile.write(BODY)

    httpd = http.server.ThreadingHTTPServer(("127.0.0.1", 0), Handler)
    thread = threading.Thread(target=httpd.serve_forever, daemon=True)
    thread.start()
    try:
        yield f"http://127.0.0.1:{httpd.server_address[1]}", seen, tmp_path
    finally:
        httpd.shutdown()
        httpd.server_close()


def test_index_and_toolkit_send_one_user_agent(server: tuple[str, Seen, Path]) -> None:
    base, seen, tmp = server
    assert Client().get(f"{base}/page").body == BODY
    blob = fetch(f"{base}/x.tar.xz", SHA, "x.tar.xz", Cache(tmp / "cache"))
    assert blob.read_bytes() == BODY
    assert seen.agents == [USER_AGENT, USER_AGENT] and USER_AGENT.startswith("cudaship/")


def test_one_retry_policy_503_retried_403_final(server: tuple[str, Seen, Path]) -> None:
    base, seen, tmp = server
    seen.failures["/busy.tar.xz"] = [503]
    options = FetchOptions(retries=2, backoff=0.01)
    blob = fetch(f"{base}/busy.tar.xz", SHA, "busy.tar.xz", Cache(tmp / "a"), options=options)
    assert blob.read_bytes() == BODY and len(seen.agents) == 2
    seen.failures["/denied.tar.xz"] = [403, 403, 403]
    with pytest.raises(ToolkitError, match=r"denied\.tar\.xz: HTTP 403 Forbidden$"):
        fetch(f"{base}/denied.tar.xz", SHA, "denied.tar.xz", Cache(tmp / "b"), options=options)
    assert len(seen.agents) == 3
    assert Retry().retries == 0  # the index is not retried: it falls back to the next source at once


def test_redirect_to_a_file_url_is_refused_by_both(server: tuple[str, Seen, Path]) -> None:
    base, _seen, tmp = server
    with pytest.raises(RefusedURL, match="non-http"):
        Client().get(f"{base}/to-file")
    with pytest.raises(ToolkitError, match="non-http") as info:
        fetch(f"{base}/to-file", SHA, "to-file", Cache(tmp / "cache"), options=FetchOptions(retries=0))
    assert "\n" not in str(info.value)
    kept = [p.name for p in (tmp / "cache").rglob("*") if p.is_file() and "lock" not in p.name]
    assert kept == []  # neither a blob nor a part file: the secret file was never read
