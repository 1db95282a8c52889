"""Fetching files into a cache keyed by sha256: HTTP through the one client (:mod:`cudaship.http`: its retry
policy, User-Agent and http(s)-only rule) with Range resume, file:// and local paths.

A blob lands at ``<cache>/blobs/<sha[:2]>/<sha>`` only after its sha256 matched: bytes that hash to anything
else are never stored under that name, so a lying manifest or mirror cannot poison the cache for a later run
against an honest one. Until then they are in this run's own ``.<sha>.<random>.part``, created with
``O_CREAT|O_EXCL|O_NOFOLLOW``; a download cut off (retries or deadline spent) is kept as ``<sha>.part`` and
claimed by the next run with one rename, to resume it. A download never writes more than the size the
manifest declared (HTTP or a local mirror), nor past :attr:`FetchOptions.deadline`. Manifests (which have
no published checksum) are cached by URL so that ``--offline`` can reuse them.
"""

from __future__ import annotations

import hashlib
import os
import re
import stat
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


class DownloadFailed(ToolkitError):
    """The server could not be reached, or kept failing or stalling until the retries or the deadline ran
    out (not a 404 or a wrong checksum): the caller may name another source."""


def default_cache_dir() -> Path:
    """Where downloaded toolkit archives are kept: the tool's cache directory (:mod:`cudaship.cachedir`)
    + ``/toolkit``."""
    return cachedir.folder("toolkit")


@dataclass(frozen=True)
class FetchOptions:
    retries: int = 4  #: extra attempts after the first, for network errors and cut connections
    backoff: float = 1.0  #: seconds before the first retry, doubled each time
    timeout: float = 60.0  #: socket timeout: seconds one connect or one read may wait
    #: Most seconds one file (an archive or a manifest) may take to arrive in all, its retries included
    #: (``toolkit install --deadline``): a server that trickles a byte every few seconds never trips the
    #: per-read ``timeout``, but fails here
    deadline: float = 3600.0
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
    deadline = http.deadline_in(options.deadline)

    def receive(have: int) -> int | None:
        """One request, its body appended to (206) or written over (200) ``part``; the size expected."""
        nonlocal started
        with http.open_url(
            location,
            headers={"Range": f"bytes={have}-"} if have else None,
            timeout=options.timeout,
            deadline=deadline,
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
        http.Retry(options.retries, options.backoff).run(attempt, retrying, deadline)
    except http.RefusedURL as e:
        raise ToolkitError(str(e)) from None
    except http.DeadlineExceeded as e:
        raise DownloadFailed(
            f"{location}: not complete within the {options.deadline:g} s deadline (--deadline) after "
            f"{count(e.attempts, 'attempt')}: the server sends too slowly"
        ) from None
    except http.Unavailable as e:
        if not e.transient:
            raise ToolkitError(f"{location}: HTTP {e.status} {e.reason}" if e.status else str(e)) from None
        raise DownloadFailed(
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


def _claim_part(blob: Path, sha256: str) -> Path:
    """This run's partial download of ``blob``: a new file created exclusively under an unpredictable name
    (``.<sha>.<random>.part``) beside it. When an interrupted run left a resumable ``<sha>.part``, it is
    claimed by renaming it to this run's name (a rename acts on the name: a link planted there becomes a link
    at our name, which :func:`_open_part` then refuses and this run starts afresh)."""
    fd, part = safe_write.create_exclusive(blob.parent, f".{sha256}.", suffix=".part", error=ToolkitError)
    os.close(fd)
    leftover = blob.with_name(blob.name + ".part")
    try:
        os.replace(leftover, part)
    except FileNotFoundError:
        return part
    except OSError:
        return part  # a directory or the like at the leftover's name: not ours to touch
    try:
        os.close(safe_write.open_reusable(part, error=ToolkitError, what="partial download"))
    except ToolkitError:
        part.unlink(missing_ok=True)  # a link or someone else's file: only the name is removed
        fd, part = safe_write.create_exclusive(blob.parent, f".{sha256}.", suffix=".part", error=ToolkitError)
        os.close(fd)
    return part


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
    """Bring the bytes at ``location`` into this run's own ``.part`` file, check size and sha256, and only
    then rename it to ``blob``: bytes that do not hash to ``sha256`` are never stored under that name. A cut
    download's part is kept as ``<sha>.part`` for the next run to resume; any other failure removes it."""
    part = _claim_part(blob, sha256)
    keep = False
    try:
        local = _local_path(location)
        if local is not None:
            _copy_local(local, location, part, filename, size, observer, options)
        else:
            if options.offline:
                raise ToolkitError(
                    f"{filename} is not in the download cache ({cache.root}) and --offline is set"
                )
            try:
                _download(location, part, filename, size, observer, options)
            except DownloadFailed:
                keep = part.exists() and part.stat().st_size > 0  # resumable by the next run
                raise
        actual_size = part.stat().st_size
        if size is not None and actual_size != size:
            raise ToolkitError(f"{filename}: size mismatch: expected {size} bytes, got {actual_size}")
        actual = sha256_file(part)
        if actual != sha256:
            raise ToolkitError(f"{filename}: checksum mismatch: expected sha256 {sha256}, got {actual}")
        safe_write.place(part, blob, error=ToolkitError)
    finally:
        if part.exists() or part.is_symlink():
            if keep:
                try:
                    os.replace(part, blob.with_name(blob.name + ".part"))
                except OSError:
                    part.unlink(missing_ok=True)
            else:
                part.unlink(missing_ok=True)
    observer.download_finished(filename)


def _copy_local(
    local: Path,
    location: str,
    part: Path,
    filename: str,
    size: int | None,
    observer: Observer,
    options: FetchOptions,
) -> None:
    """Copy a local mirror's file into ``part``, never more than the ``size`` its manifest declared (or the
    download cap when it declares none): a larger file is refused when its first byte past that size is
    read, not after it was copied whole."""
    cap = min(MAX_DOWNLOAD_BYTES, options.max_bytes)
    limit = cap if size is None else min(size, cap)
    try:
        src = local.open("rb")
    except FileNotFoundError:
        raise ToolkitError(f"{location}: no such file") from None
    except OSError as e:
        raise ToolkitError(f"cannot copy {location}: {e.strerror or e}") from None
    with src:
        info = os.fstat(src.fileno())
        if not stat.S_ISREG(info.st_mode):
            raise ToolkitError(f"{location}: no such file (not a regular file)")
        observer.download_started(filename, size if size is not None else info.st_size, 0)
        written = 0
        try:
            with _open_part(part, append=False) as out:
                while True:
                    chunk = src.read(min(1 << 20, limit + 1 - written))
                    if not chunk:
                        break
                    if written + len(chunk) > limit:
                        if size is not None and limit == size:
                            raise ToolkitError(
                                f"{location}: larger than the {size} bytes the manifest says; not copied "
                                "further"
                            )
                        raise ToolkitError(f"{location}: larger than {limit} bytes (--max-size)")
                    out.write(chunk)
                    written += len(chunk)
                    observer.download_progress(filename, len(chunk))
        except OSError as e:
            raise ToolkitError(f"cannot copy {location}: {e.strerror or e}") from None


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
