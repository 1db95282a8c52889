"""The one way cudaship writes a file: reports (``-o``, ``--report``), GitHub Actions files, env files,
toolkit manifests and program provenance.

What happens depends on what is at the path, checked with ``lstat``/``fstat`` (never guessed from the name):

- **nothing**: a new regular file is created with mode ``0666 & ~umask`` (0644 under the usual 022), written
  in full to a temporary file beside it and renamed into place, so a reader never sees half a report;
- **a regular file**: replaced the same way (atomically), keeping its permission bits;
- **a character device or a FIFO** (``/dev/null``, ``/dev/stdout``, a pipe made with ``mkfifo``): written
  through, never replaced. A FIFO with no reader is refused at once ("no process is reading it") rather than
  blocking;
- **a symbolic link**: followed, deliberately, like a shell's ``>``: what it points to is written (by the
  rules above) and the link stays a link. A link that points nowhere is refused: the file it would create
  could be anywhere;
- **anything else** (a directory, a block device, a socket): refused, untouched.

Appending (:func:`append_text`, for ``$GITHUB_ENV`` and friends) follows the same rules, appending to a
regular file (created with ``0666 & ~umask`` when missing) instead of replacing it.

Nothing is written anywhere but the path asked for and, for a moment, a temporary file in the same directory
(``.NAME.XXXXXXXX.tmp``), removed on failure. Errors are the caller's error class (one line, naming the path).
"""

from __future__ import annotations

import errno
import os
import secrets
import stat
from pathlib import Path

from cudaship.errors import CudashipError, UsageError
from cudaship.safe_read import kind_of

_NONBLOCK = getattr(os, "O_NONBLOCK", 0)
_NOCTTY = getattr(os, "O_NOCTTY", 0)
_NOFOLLOW = getattr(os, "O_NOFOLLOW", 0)


def _resolve(path: Path, error: type[CudashipError], what: str) -> tuple[Path, os.stat_result | None]:
    """The path to write (a link followed) and what is there now (None: nothing)."""
    label = str(path)
    try:
        info = os.lstat(path)
    except FileNotFoundError:
        return path, None
    except OSError as e:
        raise error(f"cannot {what}: {e.strerror or e}", path=label) from None
    if stat.S_ISLNK(info.st_mode):
        try:
            info = os.stat(path)
        except FileNotFoundError:
            raise error(f"cannot {what}: a symbolic link to nothing (refused)", path=label) from None
        except OSError as e:
            raise error(f"cannot {what}: {e.strerror or e}", path=label) from None
        path = Path(os.path.realpath(path))
    return path, info


def _refuse_kind(info: os.stat_result, error: type[CudashipError], label: str, what: str) -> None:

    mode = info.st_mode
    if not (stat.S_ISREG(mode) or stat.S_ISCHR(mode) or stat.S_ISFIFO(mode)):
        raise error(f"cannot {what}: {kind_of(mode)}, not a file (refused, left as it is)", path=label)


def _write_through(path: Path, data: bytes, append: bool, error: type[CudashipError], label: str) -> None:
    """Write to a device or FIFO in place; a FIFO without a reader is refused instead of blocking."""
    flags = os.O_WRONLY | _NONBLOCK | _NOCTTY | (os.O_APPEND if append else 0)
    try:
        fd = os.open(path, flags)
    except OSError as e:
        if e.errno == errno.ENXIO:
            raise error("cannot write: a FIFO that no process is reading", path=label) from None
        raise error(f"cannot write: {e.strerror or e}", path=label) from None
    try:
        mode = os.fstat(fd).st_mode
        if not (stat.S_ISCHR(mode) or stat.S_ISFIFO(mode)):  # it changed under us
            raise error("cannot write: the file changed kind while being opened", path=label)
        os.set_blocking(fd, True)
        view = memoryview(data)
        while view:
            written = os.write(fd, view)
            view = view[written:]
    except OSError as e:
        raise error(f"cannot write: {e.strerror or e}", path=label) from None
    finally:
        os.close(fd)


def write_bytes(
    path: str | os.PathLike[str], data: bytes, *, error: type[CudashipError] = UsageError
) -> None:
    """Write ``data`` to ``path`` by the rules of this module."""
    label = os.fspath(path)
    target, info = _resolve(Path(label), error, "write")
    if info is not None:
        _refuse_kind(info, error, label, "write")
        if not stat.S_ISREG(info.st_mode):
            _write_through(target, data, False, error, label)
            return
    mode = stat.S_IMODE(info.st_mode) if info is not None else 0o666
    directory = target.parent
    tmp = directory / f".{target.name}.{secrets.token_hex(4)}.tmp"
    try:
        fd = os.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_EXCL | _NOFOLLOW, 0o666)
    except OSError as e:
        raise error(f"cannot write: {e.strerror or e}", path=label) from None
    try:
        try:
            with os.fdopen(fd, "wb") as f:
                f.write(data)
                if info is not None:  # keep an existing file's permissions; a new one gets the umask's
                    os.fchmod(f.fileno(), mode)
            os.replace(tmp, target)
        except OSError as e:
            raise error(f"cannot write: {e.strerror or e}", path=label) from None
    except BaseException:
        tmp.unlink(missing_ok=True)
        raise


def write_text(path: str | os.PathLike[str], text: str, *, error: type[CudashipError] = UsageError) -> None:
    """Write ``text`` (UTF-8, ``\\n`` line ends) to ``path`` by the rules of this module."""
    write_bytes(path, text.encode("utf-8"), error=error)


def append_text(path: str | os.PathLike[str], text: str, *, error: type[CudashipError] = UsageError) -> None:
    """Append ``text`` (UTF-8) to ``path``: a regular file (created when missing), a device or a FIFO."""
    label = os.fspath(path)
    data = text.encode("utf-8")
    target, info = _resolve(Path(label), error, "append")
    if info is not None:
        _refuse_kind(info, error, label, "append")
        if not stat.S_ISREG(info.st_mode):
            _write_through(target, data, True, error, label)
            return
    try:
        fd = os.open(target, os.O_WRONLY | os.O_APPEND | os.O_CREAT | _NOFOLLOW | _NONBLOCK | _NOCTTY, 0o666)
    except OSError as e:
        raise error(f"cannot append: {e.strerror or e}", path=label) from None
    try:
        if not stat.S_ISREG(os.fstat(fd).st_mode):
            raise error("cannot append: not a regular file (it changed while being opened)", path=label)
        os.set_blocking(fd, True)
        view = memoryview(data)
        while view:
            view = view[os.write(fd, view) :]
    except OSError as e:
        raise error(f"cannot append: {e.strerror or e}", path=label) from None
    finally:
        os.close(fd)
