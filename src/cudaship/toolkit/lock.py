"""An exclusive, non-blocking lock file that keeps two installs out of one destination.

The lock is an OS lock (``flock`` / ``msvcrt.locking``) on ``.<name>.cudaship-lock`` beside the destination,
so it is released by the OS when the holder dies; the file itself may stay behind and is harmless. It is
opened by :func:`cudaship.safe_write.open_reusable`: created exclusively, or reused only when it is a regular
file with one link owned by this user. A link planted at its (predictable) name is refused, never followed.
"""

from __future__ import annotations

import os
import sys
from pathlib import Path
from types import TracebackType

from cudaship.errors import ToolkitError
from cudaship.safe_write import open_reusable


def lock_path(dest: Path) -> Path:
    return dest.parent / f".{dest.name}.cudaship-lock"


class InstallLock:
    def __init__(self, dest: Path, *, wait: bool = False) -> None:
        self.dest = dest
        self.path = lock_path(dest)
        self.wait = wait  #: block until the holder is done, instead of failing at once
        self._fd: int | None = None

    def acquire(self) -> None:
        self.path.parent.mkdir(parents=True, exist_ok=True)
        fd = open_reusable(self.path, error=ToolkitError, what="lock file")
        try:
            if sys.platform == "win32":  # pragma: no cover - Windows only
                import msvcrt

                msvcrt.locking(fd, msvcrt.LK_LOCK if self.wait else msvcrt.LK_NBLCK, 1)
            else:
                import fcntl

                fcntl.flock(fd, fcntl.LOCK_EX if self.wait else fcntl.LOCK_EX | fcntl.LOCK_NB)
        except OSError:
            try:
                holder = os.read(fd, 64).decode("ascii", "replace").strip() or "unknown"
            finally:
                os.close(fd)
            raise ToolkitError(
                f"another cudaship toolkit operation (pid {holder}) holds the lock {self.path}; "
                "wait for it to finish",
                path=str(self.dest),
            ) from None
        os.ftruncate(fd, 0)
        os.write(fd, str(os.getpid()).encode("ascii"))
        self._fd = fd

    def release(self) -> None:
        if self._fd is None:
            return
        fd, self._fd = self._fd, None
        try:
            os.ftruncate(fd, 0)
            if sys.platform == "win32":  # pragma: no cover - Windows only
                import msvcrt

                os.lseek(fd, 0, os.SEEK_SET)
                msvcrt.locking(fd, msvcrt.LK_UNLCK, 1)
        finally:
            os.close(fd)

    def __enter__(self) -> InstallLock:
        self.acquire()
        return self

    def __exit__(
        self, exc_type: type[BaseException] | None, exc: BaseException | None, tb: TracebackType | None
    ) -> None:
        self.release()
