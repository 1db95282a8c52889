"""The package index as a provider source: PEP 691 JSON project pages, PEP 658 metadata, lazy wheels.

For a requirement: the project's page (``Accept: application/vnd.pypi.simple.v1+json``) lists its files;
the newest wheel that fits the target platform and the specifier is chosen; its METADATA comes from the
PEP 658 file next to it when the page advertises one (``core-metadata``), else from the wheel itself; the
file list always comes from the wheel's central directory, read with HTTP range requests
(:mod:`.lazywheel`). Answers are cached on disk (:mod:`.cache`); ``offline`` uses only the cache.

What a project page names is input: a file URL is followed only when it is http(s) and on the index's own
host, a host the index serves its files from (``files.pythonhosted.org`` for PyPI, from
``knowledge/data/providers.toml``) or one the user allows (``--index-host``). A file that cannot be read this
way is that file's problem (:class:`BadDistribution`), named in the audit's notes; the index still answers
for the others.
"""

from __future__ import annotations

import datetime as dt
import hashlib
import html.parser
import json
import threading
import urllib.parse
from collections.abc import Callable, Iterable
from typing import Any, TypeVar

from packaging.specifiers import SpecifierSet
from packaging.utils import canonicalize_name

from cudaship.errors import CudashipError
from cudaship.knowledge.providers import index_file_hosts
from cudaship.loaders import load_json
from cudaship.providers.cache import PAGE_TTL_S, DiskCache
from cudaship.providers.constraints import upload_time
from cudaship.providers.http import Client, IndexUnavailable, NotCached, NotFound, RefusedURL, TooLarge
from cudaship.providers.lazywheel import remote_wheel
from cudaship.providers.records import Distribution, Target
from cudaship.providers.select import Candidate, best, pins_exactly, wheel_version
from cudaship.schema import Table
from cudaship.wheel.metadata import MAX_METADATA_BYTES

T = TypeVar("T")

DEFAULT_INDEX = "https://pypi.org/simple"
JSON_ACCEPT = "application/vnd.pypi.simple.v1+json"
HTML_ACCEPT = "text/html"


class BadDistribution(CudashipError):
    """One file on the index cannot be read (malformed zip, wrong hash): that project is not found, the
    index still answers for the others."""


class IndexSource:
    """Distributions from a PEP 691 index; thread-safe (the client counts under a lock)."""

    def __init__(
        self,
        url: str,
        cache: DiskCache,
        client: Client,
        *,
        offline: bool = False,
        allowed_hosts: Iterable[str] = (),
        exclude_newer: dt.datetime | None = None,
    ) -> None:
        self.url = url.rstrip("/")
        #: files uploaded after this are ignored (PEP 700 ``upload-time``); None: every file
        self.exclude_newer = exclude_newer
        #: projects with a file the index gave no upload time for, while :attr:`exclude_newer` was set
        self.undated: set[str] = set()
        self._lock = threading.Lock()
        self.cache = cache
        self.client = client
        self.offline = offline
        own = (urllib.parse.urlsplit(self.url).hostname or "").lower()
        #: where the page and its files may be fetched from (redirects included)
        self.hosts = frozenset(
            {own, *index_file_hosts(own), *(h.strip().lower() for h in allowed_hosts if h.strip())}
        )
        self._left_out: set[str] = set()  #: files of a page left out (see :attr:`problems`)

    @property
    def problems(self) -> list[str]:
        """Files the pages named that were left out, one line each (sorted: the lookups run in threads)."""
        return sorted(self._left_out)

    @property
    def label(self) -> str:
        return f"index {self.url}" + (" (offline: cache only)" if self.offline else "")

    def project_files(self, name: str) -> list[Candidate]:
        """Every wheel on ``name``'s page, yanked ones included (marked), from a PEP 691 JSON page or, where
        the index serves only HTML, a PEP 503 page (no sizes, no upload times there); NotFound when the
        index has no such project. ``cudaship survey`` lists an index this way."""
        return self._page(name, html=True)

    def _page(self, name: str, *, html: bool = False) -> list[Candidate]:
        """``name``'s wheels; ``html``: a PEP 503 HTML page is read too (the resolution asks for PEP 691
        JSON only: it needs the files' sizes to read them by range)."""
        page_url = f"{self.url}/{canonicalize_name(name)}/"
        cached = self._cached("page", page_url, _candidates, page_url, None if self.offline else PAGE_TTL_S)
        if cached is not None:
            return cached
        if self.offline:
            raise NotCached(f"{page_url}: not in the cache (offline)")
        accept = f"{JSON_ACCEPT}, {HTML_ACCEPT};q=0.1" if html else JSON_ACCEPT
        resp = self.client.get(page_url, accept=accept, hosts=self.hosts)
        if html and "html" in resp.content_type:
            files = _files_of_html(resp.body, resp.url, page_url)
        elif "json" not in resp.content_type:
            raise IndexUnavailable(
                f"{page_url}: answered {resp.content_type or 'no content type'}, not PEP 691 JSON"
                + (" or PEP 503 HTML" if html else "")
            )
        else:
            page = load_json(resp.body, error=IndexUnavailable, label=page_url)
            try:
                files = _files_of(
                    Table.of(page, "", page_url, IndexUnavailable, "a JSON object"), resp.url, self._left_out
                )
            except IndexUnavailable as e:
                raise IndexUnavailable(f"{page_url}: not a PEP 691 project page: {e.message}") from None
        self.cache.put("page", page_url, files)
        return _candidates(files, page_url)

    def _cached(
        self, kind: str, key: str, read: Callable[[Any, str], T], source: str, max_age_s: float | None = None
    ) -> T | None:
        """The cache's entry ``key`` as ``read(value, source)`` reads it (counted as a hit), or None: absent,
        too old, or of the wrong shape (``read`` raised)."""
        value = self.cache.get(kind, key, max_age_s)
        if value is None:
            return None
        try:
            out = read(value, source)
        except CudashipError:
            return None
        self.client.hit()
        return out

    def find(self, name: str, spec: SpecifierSet, target: Target) -> Distribution | None:
        """The newest fitting distribution, or None when the project has no fitting wheel; raises
        IndexUnavailable when the index cannot answer, NotCached when offline the cache has no answer for this
        project."""
        try:
            candidates = self._page(name)
        except NotFound:
            return None
        chosen = best(self._eligible(name, candidates, spec), spec, target)
        if chosen is None:
            return None
        return self._read(chosen)

    def _eligible(self, name: str, candidates: list[Candidate], spec: SpecifierSet) -> list[Candidate]:
        """The candidates a resolution may take: not yanked (unless ``spec`` pins the version exactly), and
        with ``exclude_newer`` not uploaded after it. A file without an upload time is kept (the index cannot
        say when it came) and its project remembered in :attr:`undated`: a warning, never a silent pass."""
        exact = pins_exactly(spec)
        out = [c for c in candidates if exact or not c.yanked]
        if self.exclude_newer is None:
            return out
        if any(c.upload_time is None for c in out):
            with self._lock:
                self.undated.add(canonicalize_name(name))
        return [c for c in out if c.upload_time is None or c.upload_time <= self.exclude_newer]

    def _read(self, c: Candidate) -> Distribution:
        # Keyed by verified content only: an entry under the sha256 alone is shared by every index that names
        # that hash, so it is written only when this run hashed the whole file and it matched. A wheel read in
        # ranges is unverified: its entry is keyed by where it came from as well, so that a lying index (a
        # good wheel's hash, another wheel's bytes) never answers for an honest one. (Entries of the kind
        # "wheel", which earlier versions keyed by the claimed hash alone, are no longer read.)
        unverified_key = f"{c.location}#sha256={c.sha256 or ''}"
        keys = [("wheel-verified", c.sha256)] if c.sha256 else []
        for kind, key in [*keys, ("wheel-at", unverified_key)]:
            cached = self._cached(kind, key, _dist_from_json, f"index {c.location}")
            if cached is not None:
                return cached
        if self.offline:
            raise NotCached(f"{c.filename}: not in the cache (offline)")
        metadata: bytes | None = None
        try:
            if c.metadata_url:
                try:
                    resp = self.client.get(c.metadata_url, limit=MAX_METADATA_BYTES, hosts=self.hosts)
                except NotFound:  # advertised but absent: the wheel's own METADATA will do
                    resp = None
                if resp is not None:
                    if c.metadata_sha256 and hashlib.sha256(resp.body).hexdigest() != c.metadata_sha256:
                        raise BadDistribution(f"{c.metadata_url}: sha256 does not match the index's")
                    metadata = resp.body
            if c.size is None:
                raise BadDistribution(f"{c.location}: the index gives no size; cannot read its end")
            dist, verified = remote_wheel(
                self.client,
                c.location,
                c.size,
                c.filename,
                f"index {c.location}",
                metadata,
                self.hosts,
                c.sha256,
            )
        except (RefusedURL, TooLarge, BadDistribution) as e:
            raise BadDistribution(
                f"{c.filename}: {e}" if not str(e).startswith(c.filename) else str(e)
            ) from None
        except IndexUnavailable:
            raise
        except Exception as e:  # a malformed remote wheel is that wheel's problem, not the index's
            raise BadDistribution(f"{c.filename}: {e}") from None
        if verified and c.sha256:
            self.cache.put("wheel-verified", c.sha256, _dist_to_json(dist))
        else:
            self.cache.put("wheel-at", unverified_key, _dist_to_json(dist))
        return dist


def _unencodable(entry: Table) -> bool:
    """Whether a string in ``entry`` (keys too) cannot be written in UTF-8: a lone surrogate (legal JSON)."""
    try:
        json.dumps(entry.data, ensure_ascii=False).encode("utf-8")
    except UnicodeEncodeError:
        return True
    return False


def _files_of(page: Table, base: str, left_out: set[str] | None = None) -> list[dict[str, Any]]:
    """The wheels of a PEP 691 project page, as the cache keeps them (URLs resolved against ``base``). A file
    whose name, URL or hashes are not valid Unicode (a lone surrogate, ``"\\ud800"`` in the JSON) is left
    out, with a line in ``left_out``: the page's other files still answer."""
    files = []
    for f in page.rows("files", required=True, what="a list of objects"):
        filename = f.text("filename")
        if not filename.endswith(".whl"):
            continue
        if _unencodable(f):
            if left_out is not None:
                shown = filename.encode("utf-8", "backslashreplace").decode("utf-8")
                left_out.add(f"{base}: {shown}: its entry is not valid Unicode (a lone surrogate); left out")
            continue
        url = urllib.parse.urljoin(base, f.text("url"))
        entry: dict[str, Any] = {"filename": filename, "url": url}
        if f.get("yanked"):  # kept: an exact pin still takes it (PEP 592)
            entry["yanked"] = True
        uploaded = f.get("upload-time")  # PEP 700; checked where it is used (an unreadable one: undated)
        if isinstance(uploaded, str):
            entry["upload_time"] = uploaded
        size = f.get("size")
        if isinstance(size, int) and not isinstance(size, bool):  # else that file's problem ("no size")
            entry["size"] = size
        hashes = f.sub("hashes")
        sha = hashes.string("sha256") if hashes is not None else None
        if sha:
            entry["sha256"] = sha
        key = "core-metadata" if "core-metadata" in f else "data-dist-info-metadata"  # PEP 714's old name
        meta = f.sub(key) if isinstance(f.get(key), dict) else None  # its hashes; else true or false
        advertised = bool(meta.data) if meta is not None else f.boolean(key, False)
        if advertised:  # PEP 658: the METADATA is served next to the file
            entry["metadata_url"] = url.split("#", 1)[0] + ".metadata"
            meta_sha = meta.string("sha256") if meta is not None else None
            if meta_sha:
                entry["metadata_sha256"] = meta_sha
        files.append(entry)
    return files


class _Anchors(html.parser.HTMLParser):
    """The ``<a>`` elements of a PEP 503 page: (attributes, text)."""

    def __init__(self) -> None:
        super().__init__(convert_charrefs=True)
        self.found: list[tuple[dict[str, str | None], str]] = []
        self._open: dict[str, str | None] | None = None
        self._text: list[str] = []

    def handle_starttag(self, tag: str, attrs: list[tuple[str, str | None]]) -> None:
        if tag == "a":
            self._open, self._text = dict(attrs), []

    def handle_data(self, data: str) -> None:
        if self._open is not None:
            self._text.append(data)

    def handle_endtag(self, tag: str) -> None:
        if tag == "a" and self._open is not None:
            self.found.append((self._open, "".join(self._text).strip()))
            self._open = None


def _files_of_html(body: bytes, base: str, page_url: str) -> list[dict[str, Any]]:
    """The wheels of a PEP 503 project page, as :func:`_files_of` writes them: the anchor's text is the file
    name, its URL's ``#sha256=`` fragment the hash, ``data-yanked`` and ``data-core-metadata`` (or
    ``data-dist-info-metadata``) as PEP 592 and PEP 658 say. Such a page gives no size and no upload time."""
    parser = _Anchors()
    try:
        parser.feed(body.decode("utf-8", "replace"))
        parser.close()
    except Exception as e:  # html.parser is lenient; anything it still refuses is the page's problem
        raise IndexUnavailable(f"{page_url}: not a PEP 503 project page: {e}") from None
    files = []
    for attrs, text in parser.found:
        href = attrs.get("href")
        if not href:
            continue
        url = urllib.parse.urljoin(base, href)
        plain, _, fragment = url.partition("#")
        filename = text or urllib.parse.unquote(plain.rsplit("/", 1)[-1])
        if not filename.endswith(".whl"):
            continue
        entry: dict[str, Any] = {"filename": filename, "url": plain}
        if "data-yanked" in attrs:
            entry["yanked"] = True
        algo, _, digest = fragment.partition("=")
        if algo == "sha256" and len(digest) == 64:
            entry["sha256"] = digest.lower()
        meta = attrs.get("data-core-metadata", attrs.get("data-dist-info-metadata"))
        if meta is not None and meta.lower() != "false":
            entry["metadata_url"] = plain + ".metadata"
            m_algo, _, m_digest = meta.partition("=")
            if m_algo == "sha256" and len(m_digest) == 64:
                entry["metadata_sha256"] = m_digest.lower()
        files.append(entry)
    return files


def _dist_to_json(d: Distribution) -> dict[str, Any]:
    return {
        "name": d.name,
        "version": d.version,
        "requires_dist": list(d.requires_dist),
        "provides_extra": list(d.provides_extra),
        "files": list(d.files),
    }


def _candidates(files: Any, source: str) -> list[Candidate]:
    """The wheels of a page as :func:`_files_of` wrote them (fresh or from the cache)."""
    out = []
    for f in Table({"files": files}, "", source, CudashipError).rows("files", required=True):
        filename = f.text("filename")
        version = wheel_version(filename)
        if version is None:
            continue
        out.append(
            Candidate(
                filename,
                version,
                f.text("url"),
                f.integer("size"),
                f.string("sha256"),
                f.string("metadata_url"),
                f.string("metadata_sha256"),
                upload_time(f.get("upload_time")),
                f.get("yanked") is True,
            )
        )
    return out


def _dist_from_json(value: Any, source: str) -> Distribution:
    """A distribution as :func:`_dist_to_json` wrote it into the cache."""
    v = Table.of(value, "", source, CudashipError)
    return Distribution(
        v.text("name"),
        v.text("version"),
        v.strings("requires_dist", single=False, required=False, strip=False),
        v.strings("files", single=False, strip=False),
        source,
        v.strings("provides_extra", single=False, strip=False),
    )
