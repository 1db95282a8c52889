"""Where a member's bytes go while they stream, and their hash.

- :func:`spill`: a member's chunks into memory (when small) or an anonymous temporary file (mapped), checked
  against the free space of the temporary directory first; the buffer lives inside the ``with`` block;
- :class:`Sink` with :class:`MemoryBudget`: the same for readers on several threads that share one memory
  budget (the audit's wheel scan);
- :class:`Hasher`: a digest of the chunks, on a helper thread for large members.
"""

from __future__ import annotations

import hashlib
import mmap
import queue
import shutil
import tempfile
import threading
from collections.abc import Iterable, Iterator
from contextlib import contextmanager, suppress
from typing import IO, Protocol

from cudaship.errors import ArchiveError
from cudaship.records.buffer import Buffer

#: Members from this size on are unpacked into populated anonymous memory (see :func:`_memory`).
_POPULATE_SIZE = 8 << 20


class Budget(Protocol):
    """Reserves bytes of memory for members (:class:`MemoryBudget`, or a worker process's budget)."""

    def acquire(self, n: int, *, wait: bool = True) -> bool: ...

    def release(self, n: int) -> None: ...


class MemoryBudget:
    """Bytes of unpacked members held in memory at once, across threads."""

    def __init__(self, limit: int) -> None:
        self.limit = limit
        self.used = 0
        self._cond = threading.Condition()

    def acquire(self, n: int, *, wait: bool = True) -> bool:
        """Reserve ``n`` bytes, waiting for others to finish (unless ``wait`` is False); False when ``n`` can
        never fit, or does not fit now and ``wait`` is False."""
        if n > self.limit:
            return False
        with self._cond:
            while self.used + n > self.limit:
                if not wait:
                    return False
                self._cond.wait()
            self.used += n
        return True

    def release(self, n: int) -> None:
        with self._cond:
            self.used -= n
            self._cond.notify_all()


def _memory(size: int) -> bytearray | mmap.mmap:
    """Memory for a member's bytes. On Linux, for a large member, an anonymous private map populated in one
    call (``MAP_POPULATE``): a third less CPU than a bytearray whose pages fault in one by one."""
    populate = getattr(mmap, "MAP_POPULATE", None)
    if size >= _POPULATE_SIZE and populate is not None:
        try:
            return mmap.mmap(-1, size, flags=mmap.MAP_PRIVATE | mmap.MAP_ANONYMOUS | populate)
        except (OSError, ValueError, OverflowError):  # pragma: no cover - the bytearray will say why
            pass
    return bytearray(size)


def _temporary_file(size: int) -> IO[bytes]:
    directory = tempfile.gettempdir()
    free = shutil.disk_usage(directory).free
    if size > free:
        raise ArchiveError(f"{size} bytes to unpack but only {free} free in {directory} (set TMPDIR)")
    return tempfile.TemporaryFile(prefix="cudaship-member-")


class Sink:
    """Where one member's bytes go: memory of the declared ``size`` when the budget has room (waiting for it
    below ``spill_size``), else an anonymous temporary file. Never more than ``size`` bytes."""

    def __init__(self, size: int, budget: Budget, *, spill_size: int = 64 << 20) -> None:
        self.size = size
        self.budget = budget
        self.reserved = size if size and budget.acquire(size, wait=size < spill_size) else 0
        self.memory: bytearray | mmap.mmap | None = _memory(size) if self.reserved or not size else None
        self.file: IO[bytes] | None = None
        if self.memory is None:
            self.file = _temporary_file(size)
        self.pos = 0
        self.map: mmap.mmap | None = None

    def write(self, chunk: bytes) -> None:
        end = self.pos + len(chunk)
        if end > self.size:
            raise ArchiveError(f"more data than the declared {self.size} bytes")
        if self.memory is not None:
            self.memory[self.pos : end] = chunk
        else:
            assert self.file is not None
            try:
                self.file.write(chunk)
            except OSError as e:
                raise ArchiveError(f"cannot unpack: {e.strerror or e}") from None
        self.pos = end

    def buffer(self) -> Buffer:
        if self.memory is not None:
            return memoryview(self.memory)[: self.pos]
        assert self.file is not None
        self.file.flush()
        if self.pos == 0:
            return b""
        self.map = mmap.mmap(self.file.fileno(), 0, access=mmap.ACCESS_READ)
        return self.map

    def close(self) -> None:
        if self.map is not None:
            with suppress(BufferError):  # a view outlived the report; the map goes when it does
                self.map.close()
        if self.file is not None:
            self.file.close()
        if isinstance(self.memory, mmap.mmap):
            with suppress(BufferError):
                self.memory.close()
        self.memory = None
        if self.reserved:
            self.budget.release(self.reserved)
            self.reserved = 0


@contextmanager
def spill(chunks: Iterable[bytes], size: int, *, memory_limit: int = 64 << 20) -> Iterator[Buffer]:
    """``chunks`` (at most ``size`` bytes in all) as one buffer, valid inside the ``with`` block."""
    sink = Sink(size, MemoryBudget(memory_limit), spill_size=0)
    try:
        for chunk in chunks:
            sink.write(chunk)
        with released(sink.buffer()) as buf:
            yield buf
    finally:
        sink.close()


@contextmanager
def released(buf: Buffer) -> Iterator[Buffer]:
    """``buf`` inside the ``with`` block; a memoryview is released at its end. A view still exported (a
    search's ctypes buffer awaiting garbage collection) keeps the memory alive until it goes: never an error
    (it was an intermittent exit 70)."""
    try:
        yield buf
    finally:
        if isinstance(buf, memoryview):
            with suppress(BufferError):
                buf.release()


class Hasher:
    """Hashes chunks, on a helper thread when ``threaded`` (hashing and inflating both release the GIL)."""

    def __init__(self, algorithm: str, threaded: bool = False) -> None:
        self.hash = hashlib.new(algorithm)
        self._queue: queue.Queue[bytes | None] | None = None
        self._thread: threading.Thread | None = None
        if threaded:
            self._queue = queue.Queue(maxsize=16)
            self._thread = threading.Thread(target=self._loop, name="cudaship-hash", daemon=True)
            self._thread.start()

    def _loop(self) -> None:
        assert self._queue is not None
        while True:
            chunk = self._queue.get()
            if chunk is None:
                return
            self.hash.update(chunk)

    def update(self, chunk: bytes) -> None:
        if self._queue is not None:
            self._queue.put(chunk)
        else:
            self.hash.update(chunk)

    def digest(self) -> bytes:
        self.finish()
        return self.hash.digest()

    def finish(self) -> None:
        if self._queue is not None and self._thread is not None:
            self._queue.put(None)
            self._thread.join()
            self._queue = None
