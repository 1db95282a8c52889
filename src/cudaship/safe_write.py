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

Everything else cudaship writes (repaired wheels, toolkit installs, caches, lock files) goes through the
primitives below; none of them follows a link and none opens for writing a path this run did not create:

- :func:`new_file` / :func:`replace_bytes`: a new file under an unpredictable name created with
  ``O_CREAT|O_EXCL|O_NOFOLLOW`` in the destination's own directory, renamed into place by :func:`place` only
  when complete. A link at the final name is *replaced* (the rename acts on the name), never written through;
  a directory there is refused. On failure only that temporary file is removed.
- :func:`open_reusable`: cudaship's own well-known files that must outlive a run (a lock file, a resumable
  download's ``.part``): created exclusively, or reopened only when it is a regular file with one link owned
  by this user, opened without following a link.
- :func:`make_owned_dir` / :func:`remove_owned`: a work directory under an unpredictable name holding a
  marker file (:data:`OWNER_MARKER`) written exclusively at creation. Cleanup removes a directory only when
  the marker proves it is cudaship's own: a user's directory whose name merely begins the same way is never
  removed.
"""

from __future__ import annotations

import errno
import os
import secrets
import stat
from collections.abc import Iterator
from contextlib import contextmanager, suppress
from dataclasses import dataclass
from pathlib import Path
from typing import BinaryIO

from cudaship import tree
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


def check_writable(path: str | os.PathLike[str], *, error: type[CudashipError] = UsageError) -> None:
    """Raise ``error`` when :func:`write_bytes` could not write ``path``, before a command does any work: a
    directory, socket or link to nothing there; a missing directory, or one that is not a directory or not
    writable, to create the file (or its temporary file) in. A device or FIFO is only checked for write
    permission (opening a FIFO would wait for its reader)."""
    label = os.fspath(path)
    try:
        os.lstat(label)
    except NotADirectoryError:
        raise error(f"cannot write: {Path(label).parent} is not a directory", path=label) from None
    except OSError:
        pass  # nothing there (or a problem _resolve words)
    target, info = _resolve(Path(label), error, "write")
    if info is not None:
        _refuse_kind(info, error, label, "write")
        if not stat.S_ISREG(info.st_mode):
            if not os.access(target, os.W_OK):
                raise error("cannot write: permission denied", path=label)
            return
    directory = target.parent
    try:
        where = os.stat(directory)
    except FileNotFoundError:
        raise error(f"cannot write: the directory {directory} does not exist", path=label) from None
    except NotADirectoryError:
        raise error(f"cannot write: {directory} is not a directory", path=label) from None
    except OSError as e:
        raise error(f"cannot write: {directory}: {e.strerror or e}", path=label) from None
    if not stat.S_ISDIR(where.st_mode):
        raise error(f"cannot write: {directory} is not a directory", path=label)
    if not os.access(directory, os.W_OK | os.X_OK):
        raise error(f"cannot write: the directory {directory} is not writable", path=label)


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


# ---------------------------------------------------------------------------------------------------------
# Files and directories cudaship creates itself (wheels, toolkits, caches, locks)

#: The marker file inside a directory made by :func:`make_owned_dir`.
OWNER_MARKER = ".cudaship-owner"
_MARKER_MAGIC = "cudaship work directory, safe to delete when no cudaship run holds its lock\n"
_MARKER_LIMIT = 4096


def _fail(error: type[CudashipError], what: str, e: OSError, label: str) -> CudashipError:
    return error(f"cannot {what}: {e.strerror or e}", path=label)


def create_exclusive(
    directory: Path,
    prefix: str,
    *,
    suffix: str = ".tmp",
    mode: int = 0o600,
    error: type[CudashipError] = UsageError,
) -> tuple[int, Path]:
    """A new, empty regular file in ``directory`` under an unpredictable name (``prefix`` + 16 random hex
    digits + ``suffix``), created with ``O_CREAT|O_EXCL|O_NOFOLLOW``: (its descriptor, for writing; its path).
    """
    for _ in range(16):
        path = directory / f"{prefix}{secrets.token_hex(8)}{suffix}"
        try:
            return os.open(path, os.O_WRONLY | os.O_CREAT | os.O_EXCL | _NOFOLLOW | _NOCTTY, mode), path
        except FileExistsError:
            continue  # someone else's name (or a planted link): never touched, pick another
        except OSError as e:
            raise _fail(error, "create a file", e, str(directory)) from None
    raise error("cannot create a file: 16 random names were all taken", path=str(directory))


def place(tmp: Path, target: Path, *, error: type[CudashipError] = UsageError) -> None:
    """Rename ``tmp`` (a file this run created) to ``target`` in one step. Whatever file or link is at
    ``target`` is replaced, never written through (a link is replaced as a link; what it pointed to is left
    alone); a directory there is refused."""
    try:
        info = os.lstat(target)
    except FileNotFoundError:
        info = None
    except OSError as e:
        raise _fail(error, "write", e, str(target)) from None
    if info is not None and stat.S_ISDIR(info.st_mode):
        raise error("cannot write: a directory is there (refused, left as it is)", path=str(target))
    try:
        os.replace(tmp, target)
    except OSError as e:
        raise _fail(error, "write", e, str(target)) from None


@dataclass
class NewFile:
    """A file being written under a temporary name beside ``target`` (see :func:`new_file`)."""

    file: BinaryIO
    tmp: Path
    target: Path
    error: type[CudashipError]
    placed: bool = False

    def place(self) -> None:
        """Close the file and rename it to ``target`` (:func:`place`)."""
        try:
            self.file.close()
        except OSError as e:
            raise _fail(self.error, "write", e, str(self.target)) from None
        place(self.tmp, self.target, error=self.error)
        self.placed = True


@contextmanager
def new_file(
    target: Path, *, mode: int = 0o666, error: type[CudashipError] = UsageError
) -> Iterator[NewFile]:
    """Write ``target`` through a temporary file created exclusively in its own directory; call
    ``.place()`` when complete. Leaving the block without placing (an error, an interrupt) removes the
    temporary file, which this run created, and nothing else."""
    fd, tmp = create_exclusive(target.parent, f".{target.name}.", mode=mode, error=error)
    handle = NewFile(os.fdopen(fd, "wb"), tmp, target, error)
    try:
        yield handle
    finally:
        if not handle.placed:
            handle.file.close()
            with suppress(OSError):
                os.unlink(tmp)


def replace_bytes(
    target: Path, data: bytes, *, mode: int = 0o666, error: type[CudashipError] = UsageError
) -> None:
    """Put ``data`` at ``target`` by :func:`new_file` (a link there is replaced, not followed)."""
    with new_file(target, mode=mode, error=error) as out:
        try:
            out.file.write(data)
        except OSError as e:
            raise _fail(error, "write", e, str(target)) from None
        out.place()


def open_reusable(path: Path, *, error: type[CudashipError] = UsageError, what: str = "file") -> int:
    """A descriptor (read/write) on one of cudaship's own files that outlives a run (a lock file, a
    resumable ``.part``): created with ``O_EXCL`` when missing; when present, opened without following a link
    and kept only if it is a regular file with one link, owned by this user. Anything else is refused: a
    planted link or hard link never makes cudaship write elsewhere."""
    label = str(path)
    try:
        return os.open(path, os.O_RDWR | os.O_CREAT | os.O_EXCL | _NOFOLLOW | _NOCTTY, 0o644)
    except FileExistsError:
        pass
    except OSError as e:
        raise _fail(error, f"create the {what}", e, label) from None
    try:
        fd = os.open(path, os.O_RDWR | _NOFOLLOW | _NOCTTY | _NONBLOCK)
    except OSError as e:
        if e.errno == errno.ELOOP or os.path.islink(path):
            raise error(f"the {what} is a symbolic link (refused; remove it)", path=label) from None
        raise _fail(error, f"open the {what}", e, label) from None
    info = os.fstat(fd)
    problem = None
    if not stat.S_ISREG(info.st_mode):
        problem = f"{kind_of(info.st_mode)}, not a file"
    elif info.st_nlink != 1:
        problem = f"a file with {info.st_nlink} hard links"
    elif hasattr(os, "geteuid") and info.st_uid != os.geteuid():
        problem = "a file owned by another user"
    if problem is not None:
        os.close(fd)
        raise error(f"the {what} is {problem} (refused; remove it)", path=label)
    os.set_blocking(fd, True)
    return fd


@dataclass(frozen=True)
class OwnedDir:
    """A directory made by :func:`make_owned_dir`."""

    path: Path

    def remove(self) -> None:
        remove_owned(self.path)


def _marker_text(name: str) -> bytes:
    return f"{_MARKER_MAGIC}{name}\n".encode()


def make_owned_dir(parent: Path, prefix: str, *, error: type[CudashipError] = UsageError) -> OwnedDir:
    """A new directory ``parent/<prefix><16 random hex digits>`` (mode 0700) holding :data:`OWNER_MARKER`,
    created exclusively, that names it: the proof :func:`owns` asks before anything is removed."""
    for _ in range(16):
        path = parent / f"{prefix}{secrets.token_hex(8)}"
        try:
            os.mkdir(path, 0o700)
        except FileExistsError:
            continue
        except OSError as e:
            raise _fail(error, "create a directory", e, str(parent)) from None
        try:
            fd = os.open(path / OWNER_MARKER, os.O_WRONLY | os.O_CREAT | os.O_EXCL | _NOFOLLOW, 0o600)
            with os.fdopen(fd, "wb") as f:
                f.write(_marker_text(path.name))
        except OSError as e:
            with suppress(OSError):
                os.rmdir(path)
            raise _fail(error, "create a directory", e, str(path)) from None
        return OwnedDir(path)
    raise error("cannot create a directory: 16 random names were all taken", path=str(parent))


def owns(path: Path) -> bool:
    """Whether ``path`` is a directory (not a link) owned by this user that :func:`make_owned_dir` made: its
    marker is a regular file (not a link) naming this very directory."""
    try:
        info = os.lstat(path)
        if not stat.S_ISDIR(info.st_mode):
            return False
        if hasattr(os, "geteuid") and info.st_uid != os.geteuid():
            return False
        fd = os.open(path / OWNER_MARKER, os.O_RDONLY | _NOFOLLOW | _NONBLOCK | _NOCTTY)
    except OSError:
        return False
    try:
        if not stat.S_ISREG(os.fstat(fd).st_mode):
            return False
        return os.read(fd, _MARKER_LIMIT) == _marker_text(path.name)
    except OSError:
        return False
    finally:
        os.close(fd)


def remove_owned(path: Path) -> bool:
    """Remove ``path`` and everything under it (links removed, never followed) only when :func:`owns` proves
    it is cudaship's; whether it was removed."""
    if not owns(path):
        return False
    tree.remove(path)
    return True
