"""The package index's view of the one HTTP client (:mod:`cudaship.http`): GETs that are counted.

Every request and every byte received is counted in a :class:`~cudaship.providers.records.Fetched`
(thread-safe: the index is read from several threads at once); a body past the request's ``limit`` (by default
:data:`MAX_RESPONSE`) is cut off as it streams. A request the index answers with 408, 429 or 5xx is tried once
more after :data:`INDEX_RETRY`'s short pause; one it gives no answer to (refused, unreachable, timed out) is
not: that index is left for the next source (the knowledge table) at once (docs/providers.md, "Retries").
Errors are the client's: :class:`IndexUnavailable`
(the client's ``Unavailable``), :class:`NotFound`, :class:`TooLarge`, :class:`RefusedURL`; :class:`NotCached`
is the index's own.
"""

from __future__ import annotations

import threading
from collections.abc import Collection
from dataclasses import dataclass

from cudaship.http import (
    TIMEOUT_S,
    DeadlineExceeded,
    NotFound,
    RefusedURL,
    Retry,
    TooLarge,
    check_url,
    deadline_in,
    open_url,
)
from cudaship.http import Unavailable as IndexUnavailable
from cudaship.providers.records import Fetched

__all__ = [
    "INDEX_RETRY",
    "MAX_RESPONSE",
    "Client",
    "DeadlineExceeded",
    "IndexUnavailable",
    "NotCached",
    "NotFound",
    "RefusedURL",
    "Response",
    "TooLarge",
    "check_url",
]

#: Most bytes one answer may carry: a PEP 691 page of a project with thousands of files is a few MB, a range
#: of a wheel's tail far less; an index that streams without end is cut off here, not read into memory.
MAX_RESPONSE = 64 << 20
#: The index's retry: one more try, a quarter second later, of a request the server answered with 408, 429
#: or 5xx (a busy or restarting server); none of one it did not answer (an unreachable index costs one
#: time-out, not two, before the knowledge table answers).
INDEX_RETRY = Retry(1, 0.25, answered_only=True)
#: Most seconds one index request (a page, a METADATA file, one range of a wheel) may take in all, its retry
#: included: a server that trickles its headers or body a byte at a time is given up at this deadline, not
#: only when one read waits longer than the per-read timeout.
INDEX_DEADLINE_S = 120.0


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

    def __init__(
        self, timeout: float = TIMEOUT_S, retry: Retry = INDEX_RETRY, deadline: float = INDEX_DEADLINE_S
    ) -> None:
        self.timeout = timeout  #: seconds per socket operation
        self.retry = retry
        self.deadline = deadline  #: seconds one request may take in all, its retry included
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
        check_url(url, hosts)  # refused before any request is made: not counted
        headers = {}
        if accept:
            headers["Accept"] = accept
        if byte_range:
            headers["Range"] = byte_range
        deadline = deadline_in(self.deadline)
        return self.retry.run(
            lambda: self._get(url, headers, accept is not None, limit, hosts, deadline), deadline=deadline
        )

    def _get(
        self,
        url: str,
        headers: dict[str, str],
        page: bool,
        limit: int | None,
        hosts: Collection[str] | None,
        deadline: float,
    ) -> Response:
        """One request (counted, failed or not)."""
        try:
            with open_url(
                url, headers=headers, hosts=hosts, timeout=self.timeout, deadline=deadline
            ) as stream:
                body = stream.read(MAX_RESPONSE if limit is None else limit)
                self._count(len(body), page=page)
                return Response(
                    stream.status, body, stream.content_type, stream.content_range, stream.final_url
                )
        except TooLarge as e:
            self._count(e.received)
            raise
        except (IndexUnavailable, RefusedURL):
            self._count(0)
            raise
