"""The on-disk cache of index answers: JSON files under one directory, written atomically.

Two kinds of entries: a project's page (PEP 691 JSON), kept for :data:`PAGE_TTL_S` seconds unless offline;
a wheel's METADATA and file list, keyed by the wheel's sha256 and kept for good (a file never changes).
The directory is :func:`cudaship.cachedir.root` (the one cache-directory rule of the tool); entries go under
``index/``.
"""

from __future__ import annotations

import hashlib
import json
import time
from pathlib import Path
from typing import Any

from cudaship import safe_write
from cudaship.errors import CudashipError
from cudaship.loaders import MAX_DOCUMENT, load_json
from cudaship.safe_read import read_regular
from cudaship.schema import Table

PAGE_TTL_S = 24 * 3600.0


class DiskCache:
    """JSON entries by key; reads never raise (a damaged entry is a miss), writes are atomic renames. What
    :meth:`get` returns is the value as written; the caller reads it through :class:`~cudaship.schema.Table`
    (a value of the wrong shape is a miss there too)."""

    def __init__(self, root: Path | None) -> None:
        self.root = root / "index" if root is not None else None

    def _path(self, kind: str, key: str) -> Path | None:
        if self.root is None:
            return None
        # surrogatepass: a key holding a lone surrogate (from an index's JSON) is still a key, never a crash
        digest = hashlib.sha256(key.encode("utf-8", "surrogatepass")).hexdigest()
        return self.root / kind / digest[:2] / f"{digest}.json"

    def get(self, kind: str, key: str, max_age_s: float | None = None) -> Any:
        path = self._path(kind, key)
        if path is None:
            return None
        try:
            if max_age_s is not None and time.time() - path.stat().st_mtime > max_age_s:
                return None
            # a damaged, oversized, deeply nested or non-regular entry (a FIFO would block) is a miss
            entry = Table.of(
                load_json(read_regular(path, MAX_DOCUMENT), error=CudashipError), "", str(path), CudashipError
            )
            if entry.string("key") != key:
                return None
        except (OSError, CudashipError):
            return None
        return entry.get("value")

    def put(self, kind: str, key: str, value: Any) -> None:
        path = self._path(kind, key)
        if path is None:
            return
        data = json.dumps({"key": key, "value": value}).encode("ascii")
        try:  # safe_write: a new file created exclusively beside the entry, renamed over it (a link there is
            # replaced, never followed)
            path.parent.mkdir(parents=True, exist_ok=True)
            safe_write.replace_bytes(path, data, mode=0o644, error=CudashipError)
        except (OSError, CudashipError):
            pass  # a cache that cannot be written only costs time
