"""Workers shared by one command: a pool of threads for reading archive members and files, with one memory
budget and one lock for progress hooks.

Inflating (ISA-L, zlib, bz2, lzma), hashing (hashlib) and the device-code search (``memmem`` through ctypes)
release the GIL, so members of one wheel, members of several wheels and plain files all read at once on
threads, one core each. A command makes one :class:`Workers` and hands it down: however many wheels and
files it reads, at most ``count`` of them are being read at any time, and the decompressed members held in
memory at once stay within one :class:`~cudaship.archive.spill.MemoryBudget`.

With one worker every task runs in the caller's thread the moment it is submitted, in submission order: the
sequential behaviour, exactly.
"""

from __future__ import annotations

import mmap
import os
import threading
from collections.abc import Callable
from types import TracebackType
from typing import TYPE_CHECKING, Generic, ParamSpec, Protocol, TypeVar

from cudaship.archive.spill import MemoryBudget
from cudaship.binary.records import Buffer
from cudaship.pages import read_only_map

#: Decompressed members held in memory at once (all workers together); a member that does not fit waits for
#: others to finish (when small) or goes to an anonymous temporary file, mapped (see :data:`SPILL_SIZE`).
#: 384 MiB rather than 640: the torch wheel's two 450-500 MB libraries then both go to temporary files, whose
#: pages the scan drops behind it, and the peak RSS of its audit and inspect falls from 0.85-0.94 GB to
#: 0.47-0.56 GB for the same time (docs/performance.md).
MEMORY_BUDGET = 384 << 20
#: A member from this size on that does not fit the memory budget at the moment goes to a temporary file,
#: mapped, instead of waiting for memory: large libraries then unpack on several cores at once.
SPILL_SIZE = 64 << 20

if TYPE_CHECKING:
    from concurrent.futures import ThreadPoolExecutor

_P = ParamSpec("_P")
_T = TypeVar("_T")
_T_co = TypeVar("_T_co", covariant=True)


class Pending(Protocol[_T_co]):
    """A task handed to :class:`Workers`: ``result()`` waits for it and returns its value or raises its
    exception (a :class:`concurrent.futures.Future`, or a task already run)."""

    def result(self) -> _T_co: ...


class _Done(Generic[_T]):
    """A task run at once in the caller's thread (one worker)."""

    def __init__(self, value: _T | None, error: BaseException | None) -> None:
        self._value = value
        self._error = error

    def result(self) -> _T:
        if self._error is not None:
            raise self._error
        return self._value  # type: ignore[return-value]


def usable_cpus() -> int:
    """CPUs this process may run on (its affinity mask where the OS has one)."""
    try:
        return max(1, len(os.sched_getaffinity(0)))
    except (AttributeError, OSError):  # pragma: no cover - not Linux
        return max(1, os.cpu_count() or 1)


#: Workers used when ``-j`` is not given, at most (fewer on a machine with fewer CPUs). Measured on a
#: 16-core machine (docs/performance.md): audit, inspect and gpus of a wheel or a directory of wheels are
#: fastest at 4 workers; past that the Python work of the readers and checks, serialised by the GIL,
#: dominates and more threads only contend for it (16 workers were 8-30% slower than 4).
DEFAULT_MAX_WORKERS = 4


def worker_count(jobs: int | None) -> int:
    """``jobs`` when given (``-j``), else every usable CPU up to :data:`DEFAULT_MAX_WORKERS`."""
    return max(1, jobs) if jobs is not None else min(usable_cpus(), DEFAULT_MAX_WORKERS)


class Workers:
    """A thread pool of ``count`` workers (none when ``count`` is 1), the memory budget its tasks share, and a
    lock that serialises progress hooks called from them. A context manager: leaving it waits for every
    task."""

    def __init__(self, count: int = 1, *, memory_budget: int = MEMORY_BUDGET) -> None:
        self.count = max(1, count)
        self.budget = MemoryBudget(memory_budget)
        #: held while calling an observer from a worker, so observers need not be thread-safe
        self.hooks_lock = threading.Lock()
        self._pool: ThreadPoolExecutor | None = None
        if self.count > 1:
            # imported here: concurrent.futures imports logging, start-up a one-file inspect does not need
            from concurrent.futures import ThreadPoolExecutor

            self._pool = ThreadPoolExecutor(max_workers=self.count, thread_name_prefix="cudaship-worker")

    def submit(self, fn: Callable[_P, _T], /, *args: _P.args, **kwargs: _P.kwargs) -> Pending[_T]:
        """Run ``fn`` on a worker (at once, in this thread, with one worker); its result or exception is the
        pending task's."""
        if self._pool is not None:
            return self._pool.submit(fn, *args, **kwargs)
        try:
            return _Done(fn(*args, **kwargs), None)
        except BaseException as e:  # handed to whoever asks for the result, as the pool does
            return _Done(None, e)

    def close(self) -> None:
        if self._pool is not None:
            self._pool.shutdown(wait=True)
            self._pool = None

    def __enter__(self) -> Workers:
        return self

    def __exit__(
        self, exc_type: type[BaseException] | None, exc: BaseException | None, tb: TracebackType | None
    ) -> None:
        self.close()


class CompressedPages:
    """Drops the pages of a wheel's read-only map that a member's inflation has passed, so reading a 500 MB
    wheel does not leave 500 MB of it resident (file pages count in the process's RSS while mapped).

    The inflater's position in the compressed bytes is estimated from the bytes produced (in proportion,
    less a margin); a page dropped too early costs nothing but a fault, since a read-only map of a file reads
    it again from the page cache. On any other buffer (bytes, a private map) it does nothing."""

    MARGIN = 4 << 20
    STEP = 16 << 20

    def __init__(self, buf: Buffer, start: int, length: int, size: int) -> None:
        self._map: mmap.mmap | None = read_only_map(buf)
        self._start = start
        self._end = start + length
        self._per_byte = length / size if size else 0.0
        self._released = start - start % mmap.PAGESIZE
        self._produced = 0

    def produced(self, nbytes: int) -> None:
        """``nbytes`` more bytes of the member were inflated."""
        self._produced += nbytes
        if self._map is not None:
            at = self._start + int(self._produced * self._per_byte) - self.MARGIN
            if at - self._released >= self.STEP:
                self._drop(at)

    def finished(self) -> None:
        """The member is read: drop the rest of its compressed bytes."""
        if self._map is not None:
            self._drop(self._end)

    def _drop(self, upto: int) -> None:
        assert self._map is not None
        end = min(upto - upto % mmap.PAGESIZE, len(self._map))
        if end <= self._released:
            return
        try:
            self._map.madvise(mmap.MADV_DONTNEED, self._released, end - self._released)
        except (OSError, ValueError):  # advice only: never fail a read over it (a closed map, no madvise)
            self._map = None
            return
        self._released = end

