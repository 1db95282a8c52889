"""The one HTTP client of cudaship: the package index (``audit --index-url``) and toolkit downloads
(``toolkit install``) both fetch through it.

- **http(s) only.** urllib from the standard library (proxies and certificates as the environment sets them)
  with only its HTTP and HTTPS handlers: a URL of another scheme (``file:``, ``ftp:``, ``data:``) is refused,
  never opened, and so is a redirect to one. A request may name the hosts it may reach; a URL or a redirect to
  any other host is refused (:class:`RefusedURL`).
- **One User-Agent** (:data:`USER_AGENT`), ``Accept-Encoding: identity`` (bytes are counted as sent).
- **Streaming with caps.** :meth:`Stream.chunks` counts bytes as they arrive and stops one byte past the
  caller's limit (:class:`TooLarge`), whatever Content-Length says or omits; nothing is read whole unasked.
- **One retry policy** (:class:`Retry`): network errors, cut connections and HTTP 408, 429 and 5xx are tried
  again after a pause doubling each time; any other answer (404, 403, ...) is final. Toolkit downloads retry
  both kinds; the index retries only an answer, once (``answered_only``: an unreachable index falls back).

Every failure raises :class:`Unavailable` (one line, with the HTTP status when there was one) or
:class:`RefusedURL`; each caller words its own errors from them (the index's notes, toolkit's ToolkitError).
"""

from __future__ import annotations

import time
import urllib.parse
from collections.abc import Callable, Collection, Iterator, Mapping
from contextlib import contextmanager
from dataclasses import dataclass
from typing import Any, TypeVar

from cudaship import __version__
from cudaship.errors import CudashipError

USER_AGENT = f"cudaship/{__version__}"
#: Socket timeout of a request when the caller names none (seconds).
TIMEOUT_S = 30.0
READ = 1 << 20  #: bytes read from the socket per step

T = TypeVar("T")


class Unavailable(CudashipError):
    """The server could not be reached, the connection broke, or it answered with an HTTP error."""

    def __init__(
        self,
        message: str,
        *,
        path: str | None = None,
        status: int | None = None,
        reason: str = "",
        transient: bool | None = None,
    ) -> None:
        super().__init__(message, path=path)
        self.status = status  #: the HTTP status of an error answer; None when there was no answer
        self.reason = reason or message  #: what went wrong, without the URL
        #: worth trying again (:class:`Retry`): no answer, or 408, 429, 5xx
        self.transient = (
            (status is None or status >= 500 or status in (408, 429)) if transient is None else transient
        )
        self.attempts = 1  #: how many times the request was made before it was given up (:meth:`Retry.run`)


class NotFound(Unavailable):
    """HTTP 404: the page or file does not exist."""


class TooLarge(Unavailable):
    """An answer longer than the caller's limit: cut off as it streamed."""

    def __init__(self, message: str, received: int) -> None:
        super().__init__(message, transient=False)
        self.received = received  #: bytes taken in before it was cut off


class RefusedURL(CudashipError):
    """A URL (or a redirect) to a scheme other than http(s), or to a host not allowed: not followed."""


def check_url(url: str, hosts: Collection[str] | None = None) -> None:
    """Raise :class:`RefusedURL` unless ``url`` is http(s) and, when ``hosts`` is given, on one of them."""
    try:
        url.encode("utf-8")
    except UnicodeEncodeError:  # a lone surrogate ("\\ud800" in an index's JSON): no request can carry it
        shown = url[:200].encode("utf-8", "backslashreplace").decode("utf-8")
        raise RefusedURL(f"{shown}: URL is not valid Unicode (a lone surrogate); not followed") from None
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
    here, not at the top: an ``audit --offline`` never imports the HTTP stack (start-up time)."""
    import urllib.request

    class Redirects(urllib.request.HTTPRedirectHandler):
        def redirect_request(
            self, req: urllib.request.Request, fp: Any, code: int, msg: str, headers: Any, newurl: str
        ) -> urllib.request.Request | None:
            try:
                check_url(urllib.parse.urljoin(req.full_url, newurl), hosts)
            except RefusedURL:
                fp.close()  # the redirect's own answer, not read further
                raise
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


def _network_error(url: str, e: BaseException) -> Unavailable:
    """A failure with no HTTP answer (refused, reset, timed out, cut short, a malformed URL) as one line."""
    reason = str(getattr(e, "reason", None) or e)
    return Unavailable(f"{url}: {reason}", reason=reason, transient=not isinstance(e, ValueError))


@dataclass
class Stream:
    """An answer being received (inside :func:`open_url`'s block)."""

    url: str  #: the URL asked for
    final_url: str  #: where the answer came from, after redirects
    status: int
    content_type: str
    content_range: str | None
    #: the Content-Length the server announced, when it is a plain number
    content_length: int | None
    _response: Any

    def chunks(self, limit: int) -> Iterator[bytes]:
        """The body as it arrives, counted: past ``limit`` bytes, :class:`TooLarge` (no Content-Length is
        trusted or needed). A connection that breaks mid-body is :class:`Unavailable`."""
        import http.client  # with urllib.request: start-up time

        received = 0
        while True:
            try:
                chunk = self._response.read(min(READ, limit + 1 - received))
            except (OSError, http.client.HTTPException, ValueError) as e:
                raise _network_error(self.url, e) from None
            if not chunk:
                return
            received += len(chunk)
            if received > limit:
                shown = f"{limit >> 20} MiB" if limit and limit % (1 << 20) == 0 else f"{limit} bytes"
                raise TooLarge(f"{self.url}: answer larger than {shown}, not read further", received)
            yield chunk

    def read(self, limit: int) -> bytes:
        """The whole body, at most ``limit`` bytes (else :class:`TooLarge`)."""
        return b"".join(self.chunks(limit))


@contextmanager
def open_url(
    url: str,
    *,
    headers: Mapping[str, str] | None = None,
    hosts: Collection[str] | None = None,
    timeout: float = TIMEOUT_S,
) -> Iterator[Stream]:
    """GET ``url`` with :data:`USER_AGENT` and ``headers`` (``Accept``, ``Range``); ``hosts``: where the URL
    and its redirects may go (None: any http(s) host). An HTTP error answer raises :class:`Unavailable` with
    its status (:class:`NotFound` for 404); a redirect urllib refuses (to ``file:``), :class:`RefusedURL`."""
    import http.client  # here: an audit --offline never imports the HTTP stack (start-up time)
    import urllib.error
    import urllib.request

    check_url(url, hosts)
    request = urllib.request.Request(
        url, headers={"User-Agent": USER_AGENT, "Accept-Encoding": "identity", **(headers or {})}
    )
    try:
        response = _opener(hosts).open(request, timeout=timeout)
    except urllib.error.HTTPError as e:
        e.close()  # its body is not read
        if 300 <= e.code < 400:  # a redirect urllib itself refuses (to file:, data:): that URL's problem
            where = (e.headers.get("Location") if e.headers else None) or "?"
            raise RefusedURL(
                f"{url}: redirected to {where[:200]}: a non-http(s) URL is refused, not followed"
            ) from None
        if e.code == 404:
            raise NotFound(f"{url}: not found (HTTP 404)", status=404, reason=str(e.reason)) from None
        raise Unavailable(f"{url}: HTTP {e.code} {e.reason}", status=e.code, reason=str(e.reason)) from None
    except (urllib.error.URLError, OSError, http.client.HTTPException, ValueError) as e:
        raise _network_error(url, e) from None
    with response:
        length = response.headers.get("Content-Length")
        yield Stream(
            url,
            response.geturl(),
            response.status,
            response.headers.get("Content-Type", ""),
            response.headers.get("Content-Range"),
            int(length) if length and length.isdigit() and len(length) < 20 else None,
            response,
        )


@dataclass(frozen=True)
class Retry:
    """How often a failed request is tried again: ``retries`` more times after the first, waiting
    ``backoff`` seconds before the first retry and twice as long before each next one. Only a transient
    failure (:attr:`Unavailable.transient`) is retried; with ``answered_only``, only one the server answered
    (HTTP 408, 429, 5xx), not a server that gave no answer (refused, unreachable, timed out)."""

    retries: int = 0
    backoff: float = 1.0
    answered_only: bool = False

    def run(self, attempt: Callable[[], T], on_retry: Callable[[int, Unavailable], None] | None = None) -> T:
        """``attempt()`` until it returns, raises anything but a transient :class:`Unavailable`, or has failed
        ``retries + 1`` times; the last failure is raised with :attr:`attempts` set on it. ``on_retry(n, e)``
        is told before the n-th retry."""
        tries = 0
        while True:
            tries += 1
            try:
                return attempt()
            except Unavailable as e:
                if not e.transient or (self.answered_only and e.status is None) or tries > self.retries:
                    e.attempts = tries
                    raise
                if on_retry is not None:
                    on_retry(tries, e)
            time.sleep(self.backoff * (2 ** (tries - 1)))
