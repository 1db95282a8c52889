"""Opening input files without hanging or reading forever.

A FIFO opened for reading blocks until someone writes to it; ``/dev/zero`` never ends; ``/dev/stdin`` may be
either. Every file cudaship reads by name (binaries, wheels, programs, policies, manifests, JSON) is opened
here: without blocking (``O_NONBLOCK``, cleared once the file is known to be regular), checked with ``fstat``
to be a regular file, and read with a size cap. Directories are the caller's business (they are walked, not
read).
"""

from __future__ import annotations

import os
import stat
from pathlib import Path
from typing import BinaryIO

from cudaship.errors import CudashipError


def file_size(path: str | os.PathLike[str]) -> int:
    """The size of the file at ``path`` for planning (progress totals, worker choices), 0 when it cannot be
    stat'ed: opening it fails next, with the message that says why."""
    try:
        return os.stat(path).st_size
    except (OSError, ValueError):  # ValueError: a NUL in the name
        return 0


def kind_of(mode: int) -> str:
    """A file type in words, for "not a regular file" errors."""
    if stat.S_ISFIFO(mode):
        return "a FIFO"
    if stat.S_ISCHR(mode):
        return "a character device"
    if stat.S_ISBLK(mode):
        return "a block device"
    if stat.S_ISSOCK(mode):
        return "a socket"
    if stat.S_ISDIR(mode):
        return "a directory"
    return "not a regular file"


def not_regular_reason(path: str | os.PathLike[str]) -> str | None:
    """Why ``path`` is no regular file cudaship would read (following links), or None when it is one (or does
    not exist: opening it says so)."""
    try:
        mode = os.stat(path).st_mode
    except OSError:
        return None
    if stat.S_ISREG(mode):
        return None
    return f"not a regular file ({kind_of(mode)})"


def open_regular(path: str | os.PathLike[str], *, error: type[CudashipError] = CudashipError) -> BinaryIO:
    """Open ``path`` for reading, binary; :class:`error` (naming the path) when it is missing, unreadable or
    not a regular file. Never blocks on a FIFO."""
    label = os.fspath(path)
    flags = (
        os.O_RDONLY | getattr(os, "O_NONBLOCK", 0) | getattr(os, "O_BINARY", 0) | getattr(os, "O_NOCTTY", 0)
    )
    try:
        fd = os.open(label, flags)
    except FileNotFoundError:
        raise error("no such file", path=label) from None
    except OSError as e:
        raise error(f"cannot open: {e.strerror or e}", path=label) from None
    try:
        mode = os.fstat(fd).st_mode
        if not stat.S_ISREG(mode):
            raise error(f"not a regular file ({kind_of(mode)})", path=label)
        if hasattr(os, "set_blocking"):
            os.set_blocking(fd, True)
        return os.fdopen(fd, "rb")
    except BaseException:
        os.close(fd)
        raise


def read_regular(
    path: str | os.PathLike[str],
    limit: int,
    *,
    error: type[CudashipError] = CudashipError,
    what: str = "file",
) -> bytes:
    """The bytes of the regular file at ``path``, refused when over ``limit`` bytes (counted as read, not
    as the file system says: a file that grows while read is still capped)."""
    chunks: list[bytes] = []
    total = 0
    with open_regular(path, error=error) as f:
        try:
            while total <= limit:  # in chunks: a small file never costs a buffer of ``limit`` bytes
                chunk = f.read(min(1 << 20, limit + 1 - total))
                if not chunk:
                    break
                chunks.append(chunk)
                total += len(chunk)
        except OSError as e:
            raise error(f"cannot read: {e.strerror or e}", path=os.fspath(path)) from None
    data = b"".join(chunks)
    if len(data) > limit:
        raise error(f"{what} larger than {limit} bytes", path=os.fspath(path))
    return data


def is_dir(path: Path) -> bool:
    try:
        return stat.S_ISDIR(os.stat(path).st_mode)
    except OSError:
        return False
