"""The package index as a provider source: ``providers/index.py`` IndexSource over an index whose answers
come from the input. An input that starts with ``{`` is the project page (PEP 691 JSON: file URLs of any
scheme and host, sizes, hashes, metadata flags) and the files it names are a fixed small wheel; any other
input is the one wheel the page lists, read remotely (HTTP ranges served from the input, as a server
would): ``providers/lazywheel.py`` and the archive layer on a remote central directory and METADATA. The
client is the real one but for its transport: URLs are still checked (only http(s), only allowed hosts)."""

from __future__ import annotations

import io
import json
import re
import zipfile
from collections.abc import Collection

from packaging.specifiers import SpecifierSet

from cudaship.providers.cache import DiskCache
from cudaship.providers.http import Client, NotFound, Response, check_url
from cudaship.providers.index import IndexSource
from cudaship.providers.records import Target as Platform
from fuzz._harness import Target

LINUX = Platform("linux", "x86_64", "3.12")
INDEX = "https://index.example/simple"


def _small_wheel() -> bytes:
    buffer = io.BytesIO()
    with zipfile.ZipFile(buffer, "w", zipfile.ZIP_DEFLATED) as zf:
        zf.writestr("fuzzed-1.0.dist-info/METADATA", "Metadata-Version: 2.1\nName: fuzzed\nVersion: 1.0\n")
        zf.writestr("fuzzed/lib/libx.so", b"\x7fELF" + bytes(60))
    return buffer.getvalue()


class _Served(Client):
    """The real client's checks and counting, answers from memory."""

    def __init__(self, page: bytes, wheel: bytes) -> None:
        super().__init__()
        self.page = page
        self.wheel = wheel

    def get(
        self,
        url: str,
        *,
        accept: str | None = None,
        byte_range: str | None = None,
        limit: int | None = None,
        hosts: Collection[str] | None = None,
    ) -> Response:
        check_url(url, hosts)
        if accept:
            self._count(len(self.page), page=True)
            return Response(200, self.page, "application/vnd.pypi.simple.v1+json", None, url)
        if url.endswith(".metadata"):
            raise NotFound(f"{url}: not found (HTTP 404)")
        m = re.fullmatch(r"bytes=(\d+)-(\d+)", byte_range or "")
        if m is None:
            self._count(len(self.wheel))
            return Response(200, self.wheel, "application/octet-stream", None, url)
        lo, hi = int(m.group(1)), min(int(m.group(2)), len(self.wheel) - 1)
        body = self.wheel[lo : hi + 1]
        self._count(len(body))
        return Response(206, body, "application/octet-stream", f"bytes {lo}-{hi}/{len(self.wheel)}", url)


def run(data: bytes) -> object:
    if data[:1] == b"{":
        page, wheel = data, _small_wheel()
    else:
        wheel = data
        entry = {"filename": "fuzzed-1.0-py3-none-any.whl", "url": "/files/fuzzed.whl", "size": len(data)}
        page = json.dumps({"meta": {"api-version": "1.1"}, "name": "fuzzed", "files": [entry]}).encode()
    client = _Served(page, wheel)
    source = IndexSource(INDEX, DiskCache(None), client)
    found = source.find("fuzzed", SpecifierSet(), LINUX)
    if client.fetched.bytes > 64 << 20:
        raise AssertionError(f"{client.fetched.bytes} bytes fetched for one wheel")
    return found


TARGET = Target(
    name="index",
    summary="IndexSource.find over answers from the input (a PEP 691 page, or the wheel read in ranges)",
    run=run,
    seed_kinds=("wheel", "index"),
    modules=("providers/index.py", "providers/lazywheel.py", "providers/http.py", "providers/distinfo.py"),
)
