"""Dropping pages of a file map that a reader has passed (a 500 MB library or wheel read end to end should not
stay resident: file-backed pages count in the process's RSS while mapped)."""

from __future__ import annotations

import mmap

from cudaship.records.buffer import Buffer


def read_only_map(buf: Buffer) -> mmap.mmap | None:
    """``buf`` when it is a read-only ``mmap`` (always a shared map of a file in CPython) on a system with
    ``MADV_DONTNEED``: dropping its pages loses nothing, they are read again from the file. (On a private or
    anonymous map they would come back as zeros.) Else None."""
    if not isinstance(buf, mmap.mmap) or not hasattr(mmap, "MADV_DONTNEED"):
        return None
    try:
        with memoryview(buf) as view:
            return buf if view.readonly else None
    except (ValueError, BufferError):  # closed
        return None
