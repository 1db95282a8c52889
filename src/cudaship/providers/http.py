"""A small HTTP client for the package index: GET with an ``Accept`` header, byte ranges, counting.

urllib from the standard library (proxies and certificates as the environment sets them). Every request and
every byte received is counted in a :class:`~cudaship.providers.records.Fetched` (thread-safe: the index is
read from several threads at once). Errors raise :class:`IndexUnavailable` with one line.
"""

from __future__ import annotations

import threading
from dataclasses import dataclass

from cudaship import __version__
from cudaship.errors import CudashipError
from cudaship.providers.records import Fetched

USER_AGENT = f"cudaship/{__version__} (+provider resolution)"
TIMEOUT_S = 30.0
#: Most bytes one answer may carry: a PEP 691 page of a project with thousands of files is a few MB, a range
#: of a wheel's tail far less; an index that streams without end is cut off here, not read into memory.
MAX_RESPONSE = 64 << 20


class IndexUnavailable(CudashipError):
    """The index could not be reached or answered with an error."""


class NotFound(IndexUnavailable):
    """HTTP 404: the project or file does not exist."""


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

    def get(self, url: str, *, accept: str | None = None, byte_range: str | None = None) -> Response:
        """GET ``url``; ``byte_range`` is an HTTP range (``bytes=-65536``, ``bytes=10-99``)."""
        import urllib.error  # here: an audit --offline never imports the HTTP stack (20 ms)
        import urllib.request

        headers = {"User-Agent": USER_AGENT}
        if accept:
            headers["Accept"] = accept
        if byte_range:
            headers["Range"] = byte_range
        request = urllib.request.Request(url, headers=headers)
        try:
            with urllib.request.urlopen(request, timeout=self.timeout) as resp:
                body = resp.read(MAX_RESPONSE + 1)
                if len(body) > MAX_RESPONSE:
                    self._count(len(body))
                    raise IndexUnavailable(f"{url}: answer larger than {MAX_RESPONSE >> 20} MiB, not read")
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
            if e.code == 404:
                raise NotFound(f"{url}: not found (HTTP 404)") from None
            raise IndexUnavailable(f"{url}: HTTP {e.code} {e.reason}") from None
        except (urllib.error.URLError, OSError, ValueError) as e:
            self._count(0)
            reason = getattr(e, "reason", e)
            raise IndexUnavailable(f"{url}: {reason}") from None
