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

import hashlib
import urllib.parse
from collections.abc import Iterable
from typing import Any

from packaging.specifiers import SpecifierSet
from packaging.utils import canonicalize_name

from cudaship.errors import CudashipError
from cudaship.knowledge.providers import index_file_hosts
from cudaship.loaders import load_json
from cudaship.providers.cache import PAGE_TTL_S, DiskCache
from cudaship.providers.http import Client, IndexUnavailable, NotCached, NotFound, RefusedURL, TooLarge
from cudaship.providers.lazywheel import remote_distribution
from cudaship.providers.records import Distribution, Target
from cudaship.providers.select import Candidate, best, wheel_version
from cudaship.wheel.metadata import MAX_METADATA_BYTES

DEFAULT_INDEX = "https://pypi.org/simple"
JSON_ACCEPT = "application/vnd.pypi.simple.v1+json"


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
    ) -> None:
        self.url = url.rstrip("/")
        self.cache = cache
        self.client = client
        self.offline = offline
        own = (urllib.parse.urlsplit(self.url).hostname or "").lower()
        #: where the page and its files may be fetched from (redirects included)
        self.hosts = frozenset(
            {own, *index_file_hosts(own), *(h.strip().lower() for h in allowed_hosts if h.strip())}
        )

    @property
    def label(self) -> str:
        return f"index {self.url}" + (" (offline: cache only)" if self.offline else "")

    def _page(self, name: str) -> list[Candidate]:
        page_url = f"{self.url}/{canonicalize_name(name)}/"
        cached = self.cache.get("page", page_url, None if self.offline else PAGE_TTL_S)
        if cached is None:
            if self.offline:
                raise NotCached(f"{page_url}: not in the cache (offline)")
            resp = self.client.get(page_url, accept=JSON_ACCEPT, hosts=self.hosts)
            if "json" not in resp.content_type:
                raise IndexUnavailable(
                    f"{page_url}: answered {resp.content_type or 'no content type'}, not PEP 691 JSON"
                )
            try:
                cached = _files_of(load_json(resp.body, error=IndexUnavailable, label=page_url), resp.url)
            except (ValueError, TypeError, KeyError) as e:
                raise IndexUnavailable(f"{page_url}: not a PEP 691 project page: {e}") from None
            self.cache.put("page", page_url, cached)
        else:
            self.client.hit()
        out = []
        for f in cached:
            version = wheel_version(f["filename"])
            if version is None:
                continue
            out.append(
                Candidate(
                    f["filename"],
                    version,
                    f["url"],
                    f.get("size"),
                    f.get("sha256"),
                    f.get("metadata_url"),
                    f.get("metadata_sha256"),
                )
            )
        return out

    def find(self, name: str, spec: SpecifierSet, target: Target) -> Distribution | None:
        """The newest fitting distribution, or None when the project has no fitting wheel; raises
        IndexUnavailable when the index cannot answer, NotCached when offline the cache has no answer for this
        project."""
        try:
            candidates = self._page(name)
        except NotFound:
            return None
        chosen = best(candidates, spec, target)
        if chosen is None:
            return None
        return self._read(chosen)

    def _read(self, c: Candidate) -> Distribution:
        key = c.sha256 or c.location
        cached = self.cache.get("wheel", key)
        if isinstance(cached, dict):
            self.client.hit()
            return _dist_from_json(cached, f"index {c.location}")
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
            dist = remote_distribution(
                self.client, c.location, c.size, c.filename, f"index {c.location}", metadata, self.hosts
            )
        except (RefusedURL, TooLarge, BadDistribution) as e:
            raise BadDistribution(
                f"{c.filename}: {e}" if not str(e).startswith(c.filename) else str(e)
            ) from None
        except IndexUnavailable:
            raise
        except Exception as e:  # a malformed remote wheel is that wheel's problem, not the index's
            raise BadDistribution(f"{c.filename}: {e}") from None
        self.cache.put("wheel", key, _dist_to_json(dist))
        return dist


def _files_of(page: Any, base: str) -> list[dict[str, Any]]:
    files = []
    for f in page["files"]:
        filename = f["filename"]
        if not filename.endswith(".whl") or f.get("yanked"):
            continue
        url = urllib.parse.urljoin(base, f["url"])
        entry: dict[str, Any] = {"filename": filename, "url": url}
        if isinstance(f.get("size"), int):
            entry["size"] = f["size"]
        sha = (f.get("hashes") or {}).get("sha256")
        if sha:
            entry["sha256"] = sha
        meta = f.get("core-metadata", f.get("data-dist-info-metadata"))
        if meta:
            entry["metadata_url"] = url.split("#", 1)[0] + ".metadata"
            if isinstance(meta, dict) and meta.get("sha256"):
                entry["metadata_sha256"] = meta["sha256"]
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


def _dist_from_json(v: dict[str, Any], source: str) -> Distribution:
    return Distribution(
        v["name"],
        v["version"],
        tuple(v["requires_dist"]),
        tuple(v["files"]),
        source,
        tuple(v.get("provides_extra", ())),
    )
