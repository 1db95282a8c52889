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
- **Two clocks.** ``timeout`` bounds each socket operation (connect, one read); ``deadline`` (a
  :func:`time.monotonic` instant, :func:`deadline_in`) bounds the whole request, headers and body, retries
  included: every read is given only the time left, so a server that trickles one byte every 2 s (never
  tripping a per-read timeout) fails at the deadline with :class:`DeadlineExceeded`, which is final (not
  retried). Connecting (DNS and TLS handshake included) is bounded by the per-operation timeout only.

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
from cudaship.words import size

USER_AGENT = f"cudaship/{__version__}"
#: Socket timeout of a request when the caller names none (seconds).
TIMEOUT_S = 30.0
#: Total deadline of a request when the caller names none (seconds, headers and body, retries included).
DEADLINE_S = 300.0
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


class DeadlineExceeded(Unavailable):
    """The request's total deadline passed before the answer was complete (a server that trickles): final,
    never retried."""

    def __init__(self, message: str, reason: str) -> None:
        super().__init__(message, reason=reason, transient=False)


class _SocketDeadline(TimeoutError):
    """Raised inside the socket layer when the deadline has passed; turned into :class:`DeadlineExceeded`."""


def deadline_in(seconds: float) -> float:
    """The :func:`time.monotonic` instant ``seconds`` from now (a deadline for :func:`open_url`)."""
    return time.monotonic() + seconds


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


class _DeadlineSocket:
    """A connected socket (plain or TLS) whose every receive and send is given ``min(timeout, time left)``
    and refused once ``deadline`` has passed; everything else is the socket's own."""

    def __init__(self, sock: Any, deadline: float, timeout: float) -> None:
        self._sock = sock
        self._deadline = deadline
        self._timeout = timeout

    def __getattr__(self, name: str) -> Any:
        return getattr(self._sock, name)

    def _arm(self) -> None:
        left = self._deadline - time.monotonic()
        if left <= 0:
            raise _SocketDeadline("deadline passed")
        self._sock.settimeout(min(self._timeout, left))

    def recv_into(self, buffer: Any, nbytes: int = 0, flags: int = 0) -> int:
        self._arm()
        try:
            return int(self._sock.recv_into(buffer, nbytes, flags))
        except TimeoutError:
            if time.monotonic() >= self._deadline:
                raise _SocketDeadline("deadline passed") from None
            raise

    def recv(self, bufsize: int, flags: int = 0) -> bytes:
        self._arm()
        return bytes(self._sock.recv(bufsize, flags))

    def sendall(self, data: Any, flags: int = 0) -> None:
        self._arm()
        self._sock.sendall(data, flags)

    def makefile(self, mode: str = "rb", buffering: int | None = None, **_: Any) -> Any:
        """The buffered reader http.client reads an answer through, its reads going through :meth:`recv_into`
        (the socket's own reference count kept, so that urllib closing the connection early does not close
        the socket under the answer)."""
        import io
        import socket

        raw = socket.SocketIO(self, "rb")  # type: ignore[arg-type]
        self._sock._io_refs += 1
        return io.BufferedReader(raw, buffering if buffering and buffering > 0 else io.DEFAULT_BUFFER_SIZE)


def _handlers(deadline: float) -> tuple[Any, Any]:
    """urllib's HTTP and HTTPS handlers, their connections' sockets held to ``deadline``."""
    import http.client
    import urllib.request

    def bounded(conn: Any, connect: Callable[[], None]) -> None:
        left = deadline - time.monotonic()
        if left <= 0:
            raise _SocketDeadline("deadline passed")
        conn.timeout = min(conn.timeout, left) if isinstance(conn.timeout, (int, float)) else left
        timeout = conn.timeout
        connect()
        conn.sock = _DeadlineSocket(conn.sock, deadline, timeout)

    class HTTPConnection(http.client.HTTPConnection):
        def connect(self) -> None:
            bounded(self, super().connect)

    class HTTPSConnection(http.client.HTTPSConnection):
        def connect(self) -> None:
            bounded(self, super().connect)

    class HTTPHandler(urllib.request.HTTPHandler):
        def http_open(self, req: urllib.request.Request) -> Any:
            return self.do_open(HTTPConnection, req)

    class HTTPSHandler(urllib.request.HTTPSHandler):
        def https_open(self, req: urllib.request.Request) -> Any:
            return self.do_open(
                HTTPSConnection,
                req,
                context=self._context,  # type: ignore[attr-defined]
            )

    return HTTPHandler(), HTTPSHandler()


def _opener(hosts: Collection[str] | None, deadline: float) -> Any:
    """An ``OpenerDirector`` with HTTP and HTTPS only (no file:, ftp:, data: handler), proxies from the
    environment, redirects followed only to an http(s) URL on an allowed host, and every socket held to
    ``deadline``. urllib.request is imported here, not at the top: an ``audit --offline`` never imports the
    HTTP stack (start-up time)."""
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
    plain, secure = _handlers(deadline)
    for handler in (
        urllib.request.ProxyHandler(),
        plain,
        secure,
        urllib.request.HTTPDefaultErrorHandler(),
        Redirects(),
        urllib.request.HTTPErrorProcessor(),
    ):
        opener.add_handler(handler)
    return opener


def _network_error(url: str, e: BaseException) -> Unavailable:
    """A failure with no HTTP answer (refused, reset, timed out, cut short, a malformed URL) as one line; the
    deadline passing is :class:`DeadlineExceeded`."""
    cause = getattr(e, "reason", None)
    if isinstance(e, _SocketDeadline) or isinstance(cause, _SocketDeadline):
        reason = "no complete answer before the deadline (a server sending too slowly)"
        return DeadlineExceeded(f"{url}: {reason}", reason)
    reason = str(cause or e)
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
        trusted or needed). A connection that breaks mid-body is :class:`Unavailable`; the request's deadline
        passing, :class:`DeadlineExceeded`."""
        import http.client  # with urllib.request: start-up time

        received = 0
        while True:
            try:
                chunk = self._response.read1(min(READ, limit + 1 - received))
            except (OSError, http.client.HTTPException, ValueError) as e:
                raise _network_error(self.url, e) from None
            if not chunk:
                return
            received += len(chunk)
            if received > limit:
                raise TooLarge(f"{self.url}: answer larger than {size(limit)}, not read further", received)
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
    deadline: float | None = None,
) -> Iterator[Stream]:
    """GET ``url`` with :data:`USER_AGENT` and ``headers`` (``Accept``, ``Range``); ``hosts``: where the URL
    and its redirects may go (None: any http(s) host); ``timeout``: seconds per socket operation;
    ``deadline``: the :func:`time.monotonic` instant by which the whole answer must be in (None:
    :data:`DEADLINE_S` from now). An HTTP error answer raises :class:`Unavailable` with its status
    (:class:`NotFound` for 404); a redirect urllib refuses (to ``file:``), :class:`RefusedURL`; the deadline
    passing, :class:`DeadlineExceeded`."""
    import http.client  # here: an audit --offline never imports the HTTP stack (start-up time)
    import urllib.error
    import urllib.request

    check_url(url, hosts)
    if deadline is None:
        deadline = deadline_in(DEADLINE_S)
    request = urllib.request.Request(
        url, headers={"User-Agent": USER_AGENT, "Accept-Encoding": "identity", **(headers or {})}
    )
    try:
        response = _opener(hosts, deadline).open(request, timeout=timeout)
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

    def run(
        self,
        attempt: Callable[[], T],
        on_retry: Callable[[int, Unavailable], None] | None = None,
        deadline: float | None = None,
    ) -> T:
        """``attempt()`` until it returns, raises anything but a transient :class:`Unavailable`, or has failed
        ``retries + 1`` times; the last failure is raised with :attr:`attempts` set on it. ``on_retry(n, e)``
        is told before the n-th retry. With ``deadline`` (a :func:`time.monotonic` instant), no retry starts
        whose pause would end past it: the last failure is raised instead."""
        tries = 0
        while True:
            tries += 1
            try:
                return attempt()
            except Unavailable as e:
                pause = self.backoff * (2 ** (tries - 1))
                late = deadline is not None and time.monotonic() + pause >= deadline
                if (
                    not e.transient
                    or (self.answered_only and e.status is None)
                    or tries > self.retries
                    or late
                ):
                    e.attempts = tries
                    raise
                if on_retry is not None:
                    on_retry(tries, e)
            time.sleep(pause)
