"""Fetching files into a cache keyed by sha256: HTTP through the one client (:mod:`cudaship.http`: its retry
policy, User-Agent and http(s)-only rule) with Range resume, file:// and local paths.

A blob lands at ``<cache>/blobs/<sha[:2]>/<sha>`` only after its sha256 matched; until then it is
``<sha>.part`` (kept between runs, so a later run resumes it). Manifests (which have no published checksum)
are cached by URL so that ``--offline`` can reuse them.
"""

from __future__ import annotations

import hashlib
import os
import re
import shutil
import urllib.parse
import urllib.request
from dataclasses import dataclass
from pathlib import Path
from typing import BinaryIO

from cudaship import cachedir, http, safe_write
from cudaship.errors import ToolkitError
from cudaship.hashing import sha256_file
from cudaship.safe_read import read_regular
from cudaship.toolkit.lock import InstallLock
from cudaship.toolkit.records import Observer
from cudaship.words import count

#: Most bytes one download may bring when nothing says its size (the largest redist archive, cuBLAS, is under
#: 1 GiB); a mirror that streams forever without a Content-Length is cut off here.
MAX_DOWNLOAD_BYTES = 8 << 30
_HEX64 = re.compile(r"^[0-9a-f]{64}$")


def default_cache_dir() -> Path:
    """Where downloaded toolkit archives are kept: the tool's cache directory (:mod:`cudaship.cachedir`)
    + ``/toolkit``."""
    return cachedir.folder("toolkit")


@dataclass(frozen=True)
class FetchOptions:
    retries: int = 4  #: extra attempts after the first, for network errors and cut connections
    backoff: float = 1.0  #: seconds before the first retry, doubled each time
    timeout: float = 60.0  #: socket timeout per request
    offline: bool = False  #: only the cache; never the network
    #: Most bytes one download may write (``toolkit install --max-size``), counted as they stream: a mirror
    #: that sends an endless body without a Content-Length is cut off here, not when the disk is full
    max_bytes: int = MAX_DOWNLOAD_BYTES


def is_url(location: str) -> bool:
    return urllib.parse.urlsplit(location).scheme in ("http", "https", "file")


def join_location(base: str, relative: str) -> str:
    """``relative`` (a manifest's relative_path) under ``base`` (a URL or a directory)."""
    if is_url(base):
        return base.rstrip("/") + "/" + urllib.parse.quote(relative)
    return str(Path(base) / relative)


class Cache:
    """The download cache directory."""

    def __init__(self, root: Path) -> None:
        self.root = root

    def blob(self, sha256: str) -> Path:
        return self.root / "blobs" / sha256[:2] / sha256

    def manifest(self, location: str) -> Path:
        key = hashlib.sha256(location.encode("utf-8")).hexdigest()[:32]
        name = re.sub(r"[^A-Za-z0-9._-]", "_", location.rstrip("/").rsplit("/", 1)[-1])[:80]
        return self.root / "manifests" / f"{key}-{name}"

    def pypi_dir(self) -> Path:
        return self.root / "pypi"


def _local_path(location: str) -> Path | None:
    if is_url(location):
        parts = urllib.parse.urlsplit(location)
        if parts.scheme != "file":
            return None
        return Path(urllib.request.url2pathname(parts.path))
    return Path(location)


def _content_range_start(value: str | None) -> int | None:
    match = re.match(r"bytes\s+(\d+)-\d+/(?:\d+|\*)", value or "")
    return int(match.group(1)) if match else None


def _download(
    location: str,
    part: Path,
    filename: str,
    size: int | None,
    observer: Observer,
    options: FetchOptions,
    limit: int | None = None,
) -> None:
    """Fill ``part`` with the bytes at ``location`` (http/https) through the one HTTP client
    (:mod:`cudaship.http`: its retry policy, resuming where the part file ends). Never more than ``limit``,
    ``size`` or :data:`MAX_DOWNLOAD_BYTES` bytes: a server that streams forever without a size is cut off."""
    cap = min(MAX_DOWNLOAD_BYTES, options.max_bytes)
    limit = min(cap if limit is None else limit, cap if size is None else size)
    if size is not None and size > cap:
        raise ToolkitError(
            f"{location}: the manifest says {size} bytes, more than the {cap} allowed (--max-size)"
        )
    started = False

    def receive(have: int) -> int | None:
        """One request, its body appended to (206) or written over (200) ``part``; the size expected."""
        nonlocal started
        with http.open_url(
            location, headers={"Range": f"bytes={have}-"} if have else None, timeout=options.timeout
        ) as response:
            if have and response.status == 206:
                if _content_range_start(response.content_range) != have:
                    raise ToolkitError(f"{location}: server answered a range request with the wrong range")
                mode = "ab"
            else:
                have, mode = 0, "wb"
            length = response.content_length
            if length is not None and have + length > limit:
                raise ToolkitError(
                    f"{location}: the server announces {length} bytes, more than the {limit} expected"
                )
            total = size if size is not None else (have + length if length is not None else None)
            if not started:
                observer.download_started(filename, total, have)
                started = True
            else:
                observer.stage(f"resuming {filename} at {have} bytes")
            try:
                with _open_part(part, append=mode == "ab") as out:
                    for chunk in response.chunks(limit - have):
                        out.write(chunk)
                        observer.download_progress(filename, len(chunk))
            except http.TooLarge:
                part.unlink()  # never kept: the cap holds on disk too
                if size is not None:
                    raise ToolkitError(
                        f"{location}: server sent more than the {size} bytes the manifest says"
                    ) from None
                raise ToolkitError(f"{location}: larger than {limit} bytes (--max-size)") from None
            except OSError as e:  # a local error writing the part file: not worth retrying
                raise ToolkitError(f"cannot write {e.filename or part}: {e.strerror}") from e
        return total

    def attempt() -> None:
        have = part.stat().st_size if part.exists() else 0
        if size is not None and have > size:
            part.unlink()
            have = 0
        if size is not None and have == size:
            return
        try:
            total = receive(have)
        except http.Unavailable as e:
            if e.status == 416 and have:  # our partial file is already complete (or bogus): re-check it
                if size is None or have >= size:
                    return
                part.unlink()
                raise http.Unavailable(e.message, status=416, reason=e.reason, transient=True) from None
            raise
        have = part.stat().st_size
        if total is not None and have < total:
            reason = f"connection closed after {have} of {total} bytes"
            raise http.Unavailable(f"{location}: {reason}", reason=reason)

    def retrying(n: int, e: http.Unavailable) -> None:
        observer.warning(f"{filename}: {e.reason}; retrying ({n}/{options.retries})")

    try:
        http.Retry(options.retries, options.backoff).run(attempt, retrying)
    except http.RefusedURL as e:
        raise ToolkitError(str(e)) from None
    except http.Unavailable as e:
        if not e.transient:
            raise ToolkitError(f"{location}: HTTP {e.status} {e.reason}" if e.status else str(e)) from None
        raise ToolkitError(
            f"{location}: download failed after {count(e.attempts, 'attempt')}: {e.reason}"
        ) from None


def _open_part(part: Path, *, append: bool) -> BinaryIO:
    """The partial download ``part`` for writing: cudaship's own file, reused across runs to resume
    (:func:`safe_write.open_reusable`: a link or a hard link planted at its name is refused, never written
    through); emptied first unless ``append``."""
    fd = safe_write.open_reusable(part, error=ToolkitError, what="partial download")
    try:
        if append:
            os.lseek(fd, 0, os.SEEK_END)
        else:
            os.ftruncate(fd, 0)
        return os.fdopen(fd, "r+b" if not append else "ab")
    except BaseException:
        os.close(fd)
        raise


def fetch(
    location: str,
    sha256: str,
    filename: str,
    cache: Cache,
    *,
    size: int | None = None,
    observer: Observer | None = None,
    options: FetchOptions | None = None,
) -> Path:
    """The cached, sha256-verified copy of the file at ``location`` (a URL or a local path)."""
    observer = observer or Observer()
    options = options or FetchOptions()
    sha256 = sha256.lower()
    if not _HEX64.match(sha256):
        raise ToolkitError(f"{filename}: manifest gives no valid sha256 ({sha256!r})")
    blob = cache.blob(sha256)
    if blob.is_file():
        if sha256_file(blob) == sha256:
            observer.download_finished(filename)
            return blob
        blob.unlink()  # a corrupted cache entry: fetch again
        observer.warning(f"{filename}: cached copy was corrupt; fetching again")
    blob.parent.mkdir(parents=True, exist_ok=True)
    with InstallLock(blob, wait=True):  # two runs fetching one blob take turns on its .part file
        if blob.is_file() and sha256_file(blob) == sha256:  # the other run finished it meanwhile
            observer.download_finished(filename)
            return blob
        _fill(blob, location, sha256, filename, cache, size, observer, options)
    return blob


def _fill(
    blob: Path,
    location: str,
    sha256: str,
    filename: str,
    cache: Cache,
    size: int | None,
    observer: Observer,
    options: FetchOptions,
) -> None:
    part = blob.with_name(blob.name + ".part")
    local = _local_path(location)
    if local is not None:
        if not local.is_file():
            raise ToolkitError(f"{location}: no such file")
        observer.download_started(filename, local.stat().st_size, 0)
        try:
            with local.open("rb") as src, _open_part(part, append=False) as out:
                shutil.copyfileobj(src, out, 1 << 20)
        except OSError as e:
            raise ToolkitError(f"cannot copy {location}: {e.strerror or e}") from None
        observer.download_progress(filename, local.stat().st_size)
    else:
        if options.offline:
            raise ToolkitError(f"{filename} is not in the download cache ({cache.root}) and --offline is set")
        _download(location, part, filename, size, observer, options)
    actual_size = part.stat().st_size
    if size is not None and actual_size != size:
        part.unlink()
        raise ToolkitError(f"{filename}: size mismatch: expected {size} bytes, got {actual_size}")
    actual = sha256_file(part)
    if actual != sha256:
        part.unlink()
        raise ToolkitError(f"{filename}: checksum mismatch: expected sha256 {sha256}, got {actual}")
    safe_write.place(part, blob, error=ToolkitError)
    observer.download_finished(filename)


def fetch_manifest(
    location: str,
    cache: Cache,
    *,
    observer: Observer | None = None,
    options: FetchOptions | None = None,
    limit: int = 64 << 20,
) -> bytes:
    """The bytes of a manifest (no checksum exists for it); cached by location for ``--offline``."""
    observer = observer or Observer()
    options = options or FetchOptions()
    cached = cache.manifest(location)
    local = _local_path(location)
    if local is not None:
        try:  # a FIFO or /dev/zero is refused, not read forever
            return read_regular(local, limit, error=ToolkitError, what="manifest")
        except ToolkitError as e:
            if e.message == "no such file":
                raise ToolkitError(f"{location}: no such manifest") from None
            raise ToolkitError(f"{location}: {e.message}") from None
    if options.offline:
        if cached.is_file():
            return cached.read_bytes()
        raise ToolkitError(f"{location} is not in the download cache ({cache.root}) and --offline is set")
    cached.parent.mkdir(parents=True, exist_ok=True)
    fd, part = safe_write.create_exclusive(
        cached.parent, f".{cached.name}.", suffix=".part", error=ToolkitError
    )
    os.close(fd)
    try:
        observer.stage(f"reading {location}")
        name = location.rsplit("/", 1)[-1]
        _download(location, part, name, None, observer, options, limit)
        observer.download_finished(name)
        if part.stat().st_size > limit:
            raise ToolkitError(f"{location}: manifest larger than {limit} bytes")
        data = part.read_bytes()
        safe_write.place(part, cached, error=ToolkitError)
        return data
    finally:
        part.unlink(missing_ok=True)
