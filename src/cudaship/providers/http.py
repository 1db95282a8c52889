"""A small HTTP client for the package index: GET with an ``Accept`` header, byte ranges, counting.

urllib from the standard library (proxies and certificates as the environment sets them), with only its HTTP
and HTTPS handlers: a URL of another scheme (``file:``, ``ftp:``, ``data:``) a project page names is refused,
never opened, and so is a redirect to one. A request names the hosts it may reach (the index's own, the hosts
the index serves files from, those the user allows): a URL or a redirect to any other host is refused
(:class:`RefusedURL`). Every request and every byte received is counted in a
:class:`~cudaship.providers.records.Fetched` (thread-safe: the index is read from several threads at once);
bytes are counted as they stream and a body past the request's ``limit`` is cut off there, whatever
Content-Length says or omits. Errors raise :class:`IndexUnavailable` with one line.
"""

from __future__ import annotations

import threading
import urllib.parse
from collections.abc import Collection
from dataclasses import dataclass
from typing import Any

from cudaship import __version__
from cudaship.errors import CudashipError
from cudaship.providers.records import Fetched

USER_AGENT = f"cudaship/{__version__} (+provider resolution)"
TIMEOUT_S = 30.0
#: Most bytes one answer may carry: a PEP 691 page of a project with thousands of files is a few MB, a range
#: of a wheel's tail far less; an index that streams without end is cut off here, not read into memory.
MAX_RESPONSE = 64 << 20
_READ = 1 << 20  #: bytes read from the socket per step


class IndexUnavailable(CudashipError):
    """The index could not be reached or answered with an error."""


class NotFound(IndexUnavailable):
    """HTTP 404: the project or file does not exist."""


class RefusedURL(CudashipError):
    """A URL (or a redirect) to a scheme other than http(s), or to a host not allowed: not followed. The file
    it names cannot be read; the index still answers for the others."""


class TooLarge(IndexUnavailable):
    """An answer longer than the request's limit: cut off as it streamed."""


def check_url(url: str, hosts: Collection[str] | None) -> None:
    """Raise :class:`RefusedURL` unless ``url`` is http(s) and, when ``hosts`` is given, on one of them."""
    parts = urllib.parse.urlsplit(url)
    if parts.scheme not in ("http", "https"):
        shown = parts.scheme or "no scheme"
        raise RefusedURL(f"{url[:200]}: {shown} URL refused (only http and https are followed)")
    host = (parts.hostname or "").lower()
    if hosts is not None and host not in hosts:
        raise RefusedURL(
            f"{url[:200]}: host {host or '(none)'} is neither the index's nor one allowed with --index-host; "
            "not followed"
        )


def _opener(hosts: Collection[str] | None) -> Any:
    """An ``OpenerDirector`` with HTTP and HTTPS only (no file:, ftp:, data: handler), proxies from the
    environment, and redirects followed only to an http(s) URL on an allowed host. urllib.request is imported
    here: an audit --offline never imports the HTTP stack."""
    import urllib.request

    class Redirects(urllib.request.HTTPRedirectHandler):
        def redirect_request(
            self, req: urllib.request.Request, fp: Any, code: int, msg: str, headers: Any, newurl: str
        ) -> urllib.request.Request | None:
            check_url(urllib.parse.urljoin(req.full_url, newurl), hosts)
            return super().redirect_request(req, fp, code, msg, headers, newurl)

    opener = urllib.request.OpenerDirector()
    for handler in (
        urllib.request.ProxyHandler(),
        urllib.request.HTTPHandler(),
        urllib.request.HTTPSHandler(),
        urllib.request.HTTPDefaultErrorHandler(),
        Redirects(),
        urllib.request.HTTPErrorProcessor(),
    ):
        opener.add_handler(handler)
    return opener


class NotCached(IndexUnavailable):
    """Offline, the cache holds no answer for this one page or wheel: the index cannot answer for this
    project, but it still answers from the cache for the others (unlike an index that cannot be reached)."""


@dataclass(frozen=True)
class Response:
    status: int
    body: bytes
    content_type: str
    content_range: str | None
    url: str


class Client:
    """GETs with counting; one instance is shared by the threads of one resolution."""

    def __init__(self, timeout: float = TIMEOUT_S) -> None:
        self.timeout = timeout
        self.fetched = Fetched()
        self._lock = threading.Lock()

    def _count(self, n: int, page: bool = False) -> None:
        with self._lock:
            self.fetched.requests += 1
            self.fetched.bytes += n
            if page:
                self.fetched.page_bytes += n

    def hit(self) -> None:
        """Count an answer the on-disk cache gave instead of the network."""
        with self._lock:
            self.fetched.cache_hits += 1

    def get(
        self,
        url: str,
        *,
        accept: str | None = None,
        byte_range: str | None = None,
        limit: int | None = None,
        hosts: Collection[str] | None = None,
    ) -> Response:
        """GET ``url``; ``byte_range`` is an HTTP range (``bytes=-65536``, ``bytes=10-99``). ``hosts``: the
        hosts the URL and its redirects may reach (None: any); ``limit``: the most bytes read (None:
        :data:`MAX_RESPONSE`)."""
        import urllib.error  # here: an audit --offline never imports the HTTP stack (20 ms)
        import urllib.request

        check_url(url, hosts)
        if limit is None:
            limit = MAX_RESPONSE
        headers = {"User-Agent": USER_AGENT}
        if accept:
            headers["Accept"] = accept
        if byte_range:
            headers["Range"] = byte_range
        request = urllib.request.Request(url, headers=headers)
        try:
            with _opener(hosts).open(request, timeout=self.timeout) as resp:
                chunks: list[bytes] = []
                received = 0
                while received <= limit:  # counted as it streams: no Content-Length is trusted or needed
                    chunk = resp.read(min(_READ, limit + 1 - received))
                    if not chunk:
                        break
                    chunks.append(chunk)
                    received += len(chunk)
                if received > limit:
                    self._count(received)
                    shown = f"{limit >> 20} MiB" if limit and limit % (1 << 20) == 0 else f"{limit} bytes"
                    raise TooLarge(f"{url}: answer larger than {shown}, not read further")
                body = b"".join(chunks)
                self._count(len(body), page=accept is not None)
                return Response(
                    resp.status,
                    body,
                    resp.headers.get("Content-Type", ""),
                    resp.headers.get("Content-Range"),
                    resp.geturl(),
                )
        except urllib.error.HTTPError as e:
            self._count(0)
            if 300 <= e.code < 400:  # a redirect urllib itself refuses (to file:, data:): that URL's problem
                where = (e.headers.get("Location") if e.headers else None) or "?"
                raise RefusedURL(
                    f"{url}: redirected to {where[:200]}: a non-http(s) URL is refused, not followed"
                ) from None
            if e.code == 404:
                raise NotFound(f"{url}: not found (HTTP 404)") from None
            raise IndexUnavailable(f"{url}: HTTP {e.code} {e.reason}") from None
        except (urllib.error.URLError, OSError, ValueError) as e:
            self._count(0)
            reason = getattr(e, "reason", e)
            raise IndexUnavailable(f"{url}: {reason}") from None
