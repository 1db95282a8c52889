"""Workers shared by one command: a pool of threads for reading archive members and files, with one memory
budget and one lock for progress hooks, and, for large wheels, a pool of processes.

Inflating (ISA-L, zlib, bz2, lzma), hashing (hashlib) and the device-code search (``memmem`` through ctypes)
release the GIL, so members of one wheel, members of several wheels and plain files all read at once on
threads, one core each. A command makes one :class:`Workers` and hands it down: however many wheels and
files it reads, at most ``count`` of them are being read at any time, and the decompressed members held in
memory at once stay within one :class:`~cudaship.archive.spill.MemoryBudget`.

With one worker every task runs in the caller's thread the moment it is submitted, in submission order: the
sequential behaviour, exactly.

**Processes.** Inflating releases the GIL, but reading what was inflated (host symbol tables, fatbin
containers, RECORD bookkeeping for thousands of small members) is Python, and on threads it is serialised:
measured on 16 cores, threads stopped helping past 4 workers. So the members of a large wheel go to worker
*processes* (:meth:`Workers.processes`): each opens the wheel itself (:func:`shared_archive`, checked to be
the very file the command opened), takes members by their central-directory facts (no second directory
parse) and sends back plain records. Processes are forked from the command's own process while it has no
other thread (Linux), else come from a fork server (:mod:`multiprocessing`'s ``forkserver``, ``spawn``
where there is none) that imports the reading modules once: a process with threads is never forked.
"""

from __future__ import annotations

import itertools
import mmap
import os
import signal
import sys
import threading
from collections.abc import Callable, Iterator, Sequence
from contextlib import contextmanager, suppress
from dataclasses import dataclass
from types import TracebackType
from typing import TYPE_CHECKING, Any, Generic, ParamSpec, Protocol, TypeVar

from cudaship import envvars
from cudaship.archive.spill import Budget, MemoryBudget
from cudaship.archive.zip import ZipArchive, ZipFile, ZipMember
from cudaship.errors import ArchiveError
from cudaship.pages import read_only_map
from cudaship.records.buffer import Buffer
from cudaship.safe_read import file_size
from cudaship.waits import wait_interruptibly

#: Decompressed members held in memory at once (all workers together); a member that does not fit waits for
#: others to finish (when small) or goes to an anonymous temporary file, mapped (see :data:`SPILL_SIZE`).
#: 384 MiB rather than 640: the torch wheel's two 450-500 MB libraries then both go to temporary files, whose
#: pages the scan drops behind it, and the peak RSS of its audit and inspect falls from 0.85-0.94 GB to
#: 0.47-0.56 GB for the same time (docs/performance.md).
MEMORY_BUDGET = 384 << 20
#: A member from this size on that does not fit the memory budget at the moment goes to a temporary file,
#: mapped, instead of waiting for memory: large libraries then unpack on several cores at once.
SPILL_SIZE = 64 << 20

#: A wheel whose members unpack to at least this many bytes is read on worker processes (when there is more
#: than one worker): below it, starting processes (a fork server importing the readers, about 0.1-0.2 s of
#: one CPU) costs more than the GIL does.
PROCESS_MIN_BYTES = 64 << 20
#: Members of a batch handed to one worker process at once (small members travel together: one task each
#: would cost more in messages than in inflating), and the compressed bytes a batch holds at most.
BATCH_MEMBERS = 512
BATCH_BYTES = 4 << 20
#: A wheel unpacks to about this many times its file size, as far as starting the worker processes early goes
#: (whether a wheel is read on them is decided on its members' declared sizes).
UNPACK_RATIO = 2
#: Bytes of large members (over :data:`SPILL_SIZE`) all worker processes together hold in memory at once
#: (reserved by the command when it hands them out); a large member that does not fit goes to a temporary
#: file. One 500 MB library in memory rather than in a temporary file saves 0.15-1.1 s of writing on the
#: critical path of a torch-sized audit, while the memory of the command stays under 1 GB (two such libraries
#: would not: docs/performance.md, round 3).
PROCESS_MEMORY_BUDGET = 640 << 20
#: Modules the fork server imports before it forks workers: the task functions' modules, and the CLI's
#: entry module, which a worker of the ``cudaship`` console script imports again as its main module (imported
#: once in the server, it costs the workers nothing).
PRELOAD = ("cudaship.inspection.member", "cudaship.cli.main")

if TYPE_CHECKING:
    from concurrent.futures import Executor, Future, ThreadPoolExecutor

_P = ParamSpec("_P")
_T = TypeVar("_T")
_T_co = TypeVar("_T_co", covariant=True)


class Pending(Protocol[_T_co]):
    """A task handed to :class:`Workers`: ``result()`` waits for it and returns its value or raises its
    exception (a :class:`concurrent.futures.Future`, or a task already run)."""

    def result(self) -> _T_co: ...


class MemberReader(Protocol[_T_co]):
    """What :meth:`Workers.dispatch` runs for each member: ``read(archive, member, budget, announce,
    *args)``; ``announce(member)`` (None on a worker process) says the member is about to be read."""

    def __call__(
        self,
        archive: ZipArchive,
        member: ZipMember,
        budget: Budget,
        announce: Callable[[ZipMember], None] | None,
        /,
        *args: Any,
    ) -> _T_co: ...


class _Done(Generic[_T]):
    """A task run at once in the caller's thread (one worker)."""

    def __init__(self, value: _T | None, error: BaseException | None) -> None:
        self._value = value
        self._error = error

    def result(self) -> _T:
        if self._error is not None:
            raise self._error
        return self._value  # type: ignore[return-value]

    @classmethod
    def of(cls, fn: Callable[_P, _T], /, *args: _P.args, **kwargs: _P.kwargs) -> _Done[_T]:
        """``fn`` run now; its result or exception kept for whoever asks."""
        try:
            return cls(fn(*args, **kwargs), None)
        except BaseException as e:  # handed to whoever asks for the result, as the pool does
            return cls(None, e)


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
    lock that serialises progress hooks called from them; on demand, ``count`` worker processes for large
    wheels (:meth:`processes`). A context manager: leaving it waits for every task.

    ``processes``: True to read every wheel's members on processes (with more than one worker), False never,
    None (default) for wheels of :data:`PROCESS_MIN_BYTES` or more when the program's main module allows
    (:func:`main_module_is_safe`: the ``cudaship`` command does); the ``CUDASHIP_PROCESSES`` environment
    variable (``always``, ``never``, ``auto``) overrides the default."""

    def __init__(
        self, count: int = 1, *, memory_budget: int = MEMORY_BUDGET, processes: bool | None = None
    ) -> None:
        self.count = max(1, count)
        self.budget = MemoryBudget(memory_budget)
        #: held while calling an observer from a worker, so observers need not be thread-safe
        self.hooks_lock = threading.Lock()
        self._pool: ThreadPoolExecutor | None = None
        self._processes_wanted = _processes_setting(processes)
        #: memory for members over SPILL_SIZE on the worker processes, all together (see :meth:`reserve`)
        self.process_memory = MemoryBudget(PROCESS_MEMORY_BUDGET)
        self._process_pool: Executor | None = None
        self._process_lock = threading.Lock()
        self._prestart: threading.Thread | None = None
        if self.count > 1:
            # imported here: concurrent.futures imports logging, start-up a one-file inspect does not need
            from concurrent.futures import ThreadPoolExecutor

            self._pool = ThreadPoolExecutor(max_workers=self.count, thread_name_prefix="cudaship-worker")

    def submit(self, fn: Callable[_P, _T], /, *args: _P.args, **kwargs: _P.kwargs) -> Pending[_T]:
        """Run ``fn`` on a worker (at once, in this thread, with one worker); its result or exception is the
        pending task's."""
        if self._pool is not None:
            return self._pool.submit(fn, *args, **kwargs)
        return _Done.of(fn, *args, **kwargs)

    def use_processes(self, unpacked_bytes: int) -> bool:
        """Whether a wheel whose members unpack to ``unpacked_bytes`` should be read on processes."""
        if self.count < 2 or self._processes_wanted is False:
            return False
        return self._processes_wanted is True or unpacked_bytes >= PROCESS_MIN_BYTES

    def reserve(self, batch: list[ZipMember]) -> Callable[[object], None] | None:
        """Memory for a batch about to go to a worker process: a batch holding a member over
        :data:`SPILL_SIZE` gets it in memory when :data:`PROCESS_MEMORY_BUDGET` (all workers together) has
        room now, and then the returned callable gives it back (call it when the batch is done); None: the
        batch's large member goes to a temporary file (or it has none). Members are handed out largest first,
        so the memory goes to those that take longest to inflate."""
        large = sum(m.size for m in batch if m.size > SPILL_SIZE)
        if not large or not self.process_memory.acquire(large, wait=False):
            return None

        def give_back(_done: object = None) -> None:
            self.process_memory.release(large)

        return give_back

    def submit_batches(
        self,
        members: list[ZipMember],
        task: Callable[..., _T],
        *args: object,
        per_batch: Callable[[list[ZipMember]], tuple[object, ...]] = lambda batch: (),
    ) -> list[tuple[list[ZipMember], Future[_T]]]:
        """Hand ``members`` (largest first) to the worker processes in :func:`batches`, each as
        ``task(*args, batch, *per_batch(batch), large_in_memory)``; memory for a batch's large member is
        reserved (:meth:`reserve`) and given back when the batch is done. Once the pool is broken (a worker
        died), the batches still to submit get futures that raise :class:`~concurrent.futures.BrokenExecutor`,
        as the ones already running do."""
        from concurrent.futures import BrokenExecutor, Future  # logging with it: start-up time, as above

        executor = self.processes()
        out: list[tuple[list[ZipMember], Future[_T]]] = []
        for batch in batches(members):
            give_back = self.reserve(batch)
            try:
                future = executor.submit(task, *args, batch, *per_batch(batch), give_back is not None)
            except BrokenExecutor:
                future = Future()
                future.set_exception(BrokenExecutor())
            if give_back is not None:
                future.add_done_callback(give_back)
            out.append((batch, future))
        return out

    def dispatch(
        self,
        archive: ZipArchive,
        ref: ArchiveRef | None,
        members: Sequence[ZipMember],
        read: MemberReader[_T],
        args: Callable[[ZipMember], tuple[Any, ...]],
        *,
        failed: Callable[[ZipMember, str], _T],
        on_done: Callable[[ZipMember, _T, bool], None] | None = None,
        announce: Callable[[ZipMember], None] | None = None,
        unpacked_bytes: int | None = None,
        inline: bool = False,
    ) -> list[Pending[_T]]:
        """The one batch dispatcher of archive members (inspect, gpus and audit alike): ``read(archive,
        member, budget, announce, *args(member))`` for each of ``members``, handed out largest first; one
        pending result per member, in the order given.

        The members go to the worker processes, in :func:`batches`, when ``ref`` is given and the archive is
        large enough (:meth:`use_processes` on ``unpacked_bytes``, default the members' sizes): ``read``
        must then be a module-level function, and ``args`` picklable. Otherwise they go to the threads (all
        in this thread, in order, with ``inline``). ``announce`` (called under the hooks lock, threads only)
        is what ``read`` may call once it knows it will read the member. ``on_done(member, result, remote)``
        is called under the hooks lock as each member is read (``remote``: on a worker process, then for a
        whole batch at once). ``failed(member, message)`` is the result of a member whose batch could not
        open the archive, or whose worker process died (:data:`WORKER_DIED`); it may raise instead."""
        order = sorted(range(len(members)), key=lambda i: members[i].compressed_size, reverse=True)
        unpacked = sum(m.size for m in members) if unpacked_bytes is None else unpacked_bytes
        if ref is not None and self.use_processes(unpacked):
            return self._dispatch_processes(ref, members, order, read, args, failed, on_done)
        lock = self.hooks_lock

        def told(member: ZipMember) -> None:
            assert announce is not None
            with lock:
                announce(member)

        def one(member: ZipMember) -> _T:
            result = read(archive, member, self.budget, told if announce is not None else None, *args(member))
            if on_done is not None:
                with lock:
                    on_done(member, result, False)
            return result

        pending: dict[int, Pending[_T]] = {}
        for i in order:
            pending[i] = _Done.of(one, members[i]) if inline else self.submit(one, members[i])
        return [pending[i] for i in range(len(members))]

    def _dispatch_processes(
        self,
        ref: ArchiveRef,
        members: Sequence[ZipMember],
        order: list[int],
        read: MemberReader[_T],
        args: Callable[[ZipMember], tuple[Any, ...]],
        failed: Callable[[ZipMember, str], _T],
        on_done: Callable[[ZipMember, _T, bool], None] | None,
    ) -> list[Pending[_T]]:
        by_member: dict[int, Pending[_T]] = {}
        largest_first = [members[i] for i in order]
        for batch, future in self.submit_batches(
            largest_first, read_batch, read, ref, per_batch=lambda batch: ([args(m) for m in batch],)
        ):
            if on_done is not None:
                future.add_done_callback(_BatchDone(batch, failed, on_done, self.hooks_lock))
            for i, member in enumerate(batch):
                by_member[id(member)] = _BatchItem(future, i, member, failed)
        return [by_member[id(m)] for m in members]

    def processes(self) -> Executor:
        """The worker processes (started on first call; ``count`` of them)."""
        with self._process_lock:
            if self._process_pool is None:
                self._process_pool = _start_processes(self.count)
            return self._process_pool

    def prestart_for(self, wheel_sizes: list[int]) -> None:
        """:meth:`prestart` when one of the wheels about to be read (file sizes given) will likely go to the
        worker processes (a wheel unpacks to about :data:`UNPACK_RATIO` times its size)."""
        if any(self.use_processes(UNPACK_RATIO * size) for size in wheel_sizes):
            self.prestart()

    def prestart(self) -> None:
        """Start the worker processes now, so that their start overlaps what the command does before it
        hands them members (the central directory, the dist-info). Forked at once when this process has no
        other thread (see :func:`_start_processes`); else on a thread of their own, from the fork server.
        Does nothing with one worker or when processes are off."""
        if self.count < 2 or self._processes_wanted is False:
            return
        if _may_fork():
            with suppress(OSError, RuntimeError):  # an optimisation only: they start when asked
                self.processes()
            return

        def start() -> None:
            try:
                executor = self.processes()
                for _ in range(self.count):
                    executor.submit(os.getpid)
            except RuntimeError:  # closed meanwhile: nothing to start
                pass

        self._prestart = threading.Thread(target=start, name="cudaship-prestart", daemon=True)
        self._prestart.start()

    def close(self, *, abort: bool = False) -> None:
        """Wait for the tasks handed out, then end the workers; with ``abort`` (Ctrl-C), drop the tasks not
        started, end the worker processes at once (they ignore SIGINT: the command decides) and wait for
        nothing but a thread's member already being read."""
        if self._prestart is not None:
            self._prestart.join()
            self._prestart = None
        if self._pool is not None:
            self._pool.shutdown(wait=not abort, cancel_futures=abort)
            self._pool = None
        with self._process_lock:
            if self._process_pool is not None:
                if abort:
                    _end_processes(self._process_pool)
                else:
                    self._process_pool.shutdown(wait=True)
                self._process_pool = None

    def __enter__(self) -> Workers:
        return self

    def __exit__(
        self, exc_type: type[BaseException] | None, exc: BaseException | None, tb: TracebackType | None
    ) -> None:
        self.close(abort=exc_type is not None and issubclass(exc_type, KeyboardInterrupt))


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


#: What a wheel's members read as when a worker process ended abruptly (killed, out of memory) while holding
#: them: the wheel could not be read (exit 2), and the way around it.
WORKER_DIED = (
    "a worker process ended abruptly while reading this wheel (killed, or out of memory?); "
    "CUDASHIP_PROCESSES=never reads it on threads"
)


def _processes_setting(given: bool | None) -> bool | None:
    if given is not None:
        return given
    value = (envvars.get("CUDASHIP_PROCESSES") or "auto").strip().lower()
    if value in ("always", "never"):
        return value == "always"
    return None if main_module_is_safe() else False


#: Console scripts of cudaship (what ``pip install`` writes), which only run their command when they are the
#: main module.
_SCRIPTS = frozenset({"cudaship", "cudaship.exe", "cudaship-script.py"})


def main_module_is_safe() -> bool:
    """Whether worker processes may be started by default: a new process of :mod:`multiprocessing` imports
    the program's main module again (as ``__mp_main__``), which is harmless for ``python -m cudaship`` (and
    any ``-m`` package: their ``__main__`` is skipped), or cudaship's console script (it runs its command only
    as ``__main__``), but would run a caller's script again if it lacks an ``if __name__ == "__main__"``
    guard, and fails for a program read from standard input. So a library caller gets threads unless it asks
    for processes (``Workers(processes=True)``, or ``CUDASHIP_PROCESSES=always``)."""
    main = sys.modules.get("__main__")
    spec = getattr(main, "__spec__", None)
    name = getattr(spec, "name", None) or ""
    if name.endswith(".__main__"):
        return True
    path = getattr(main, "__file__", None)
    return isinstance(path, str) and os.path.basename(path) in _SCRIPTS


def start_fork_server_early(args: list[str]) -> None:
    """Start the fork server of the worker processes now, when the command line names a wheel large enough
    to be read on them (``inspect``, ``gpus``, ``audit``; not with ``-j 1`` or ``CUDASHIP_PROCESSES=never``)
    and a progress display will run (its thread rules out forking the workers straight from the command), so
    that the server's imports run while the command's own are still being done (about 0.3 s each on the
    16-core machine: docs/performance.md, round 3). Only the server: the workers are forked when the command
    asks for them. Called by the ``cudaship`` entry point; never raises."""
    try:
        if not args or args[0] not in ("inspect", "gpus", "audit") or _processes_setting(None) is False:
            return
        progress = "--progress" in args or ("--no-progress" not in args and sys.stderr.isatty())
        if not progress:  # the workers will be forked from the command itself: no server needed
            return
        if any(a in ("-j1", "--jobs=1") for a in args) or any(
            a in ("-j", "--jobs") and b == "1" for a, b in itertools.pairwise(args)
        ):
            return
        if usable_cpus() < 2 or not any(
            a.endswith(".whl") and UNPACK_RATIO * file_size(a) >= PROCESS_MIN_BYTES for a in args
        ):
            return
        import multiprocessing  # only for a run that may use worker processes: start-up time

        if "forkserver" not in multiprocessing.get_all_start_methods():
            return
        context: Any = multiprocessing.get_context("forkserver")
        context.set_forkserver_preload(list(PRELOAD))
        threading.Thread(target=_start_fork_server, name="cudaship-forkserver", daemon=True).start()
    except Exception:  # an optimisation only: the workers start when asked, as without it
        return


def _may_fork() -> bool:
    """Whether worker processes may be forked straight from this process: on Linux, and only while no other
    thread runs (a fork copies one thread; another's locks would stay held in the child forever)."""
    import multiprocessing  # only when processes are asked for: start-up time

    return (
        sys.platform.startswith("linux")
        and threading.active_count() == 1
        and "fork" in multiprocessing.get_all_start_methods()
    )


@contextmanager
def interrupt_blocked() -> Iterator[None]:
    """SIGINT blocked in this thread meanwhile: a process started inside (forked, or forked and executed: the
    fork server, its resource tracker) inherits the mask and never takes Ctrl-C, not even while it is still
    importing, before any handler could be set. The terminal sends Ctrl-C to every process of its foreground
    group; the command alone answers it and ends the others (issue 35: tracebacks of the fork server, its
    tracker and the workers followed ``cudaship: aborted``). A SIGINT that comes meanwhile waits for the end
    of the block, in the main thread; no other thread ever takes it."""
    if not hasattr(signal, "pthread_sigmask"):  # pragma: no cover - Windows
        yield
        return
    old = signal.pthread_sigmask(signal.SIG_BLOCK, {signal.SIGINT})
    try:
        yield
    finally:
        signal.pthread_sigmask(signal.SIG_SETMASK, old)


def _start_fork_server() -> None:
    """Start the fork server (and its resource tracker) with SIGINT blocked: the server, and every worker it
    forks, never takes Ctrl-C (:func:`interrupt_blocked`). The tracker first: starting it blocks SIGINT for
    its own start and then *unblocks* it in the calling thread, which would undo the block."""
    from multiprocessing import forkserver, resource_tracker

    resource_tracker.ensure_running()
    with interrupt_blocked():
        forkserver.ensure_running()


def _ignore_interrupt() -> None:
    """A worker process's initializer: Ctrl-C reaches every process of the terminal's foreground group, but
    ending the workers is the command's (:meth:`Workers.close`); a worker that took it printed a 22-line
    ``ForkServerProcess`` traceback before the command's ``cudaship: aborted`` (issue 35)."""
    signal.signal(signal.SIGINT, signal.SIG_IGN)


def _end_processes(executor: Executor) -> None:
    """End the worker processes of ``executor`` now: the tasks not started are dropped, the running ones
    killed (Ctrl-C: nothing they would return is wanted), and each process waited for, so none outlives the
    command."""
    workers = list((getattr(executor, "_processes", None) or {}).values())  # ProcessPoolExecutor's, by pid
    executor.shutdown(wait=False, cancel_futures=True)
    for process in workers:
        with suppress(OSError):
            process.terminate()
    for process in workers:
        with suppress(OSError, ValueError):
            process.join(5)
    # the pool's manager thread notices the ended workers and closes its wake-up pipe; wait for it, else
    # concurrent.futures' exit hook may write to that pipe as it closes (an OSError traceback at exit)
    manager = getattr(executor, "_executor_manager_thread", None)
    if manager is not None and manager is not threading.current_thread():
        manager.join(5)


def _start_processes(count: int) -> Executor:
    """``count`` worker processes: forked from this process when :func:`_may_fork` (no second import of the
    readers, workers ready within milliseconds; the pool forks all of them before its own threads start),
    else from a fork server that imports the readers once (:data:`PRELOAD`), else spawned."""
    # only when processes are asked for: start-up time (docs/performance.md, "One plain file, no pool")
    import multiprocessing
    from concurrent.futures import ProcessPoolExecutor

    if _may_fork():
        executor = ProcessPoolExecutor(
            max_workers=count, mp_context=multiprocessing.get_context("fork"), initializer=_ignore_interrupt
        )
        with interrupt_blocked():  # the workers are born with SIGINT blocked: Ctrl-C is the command's
            executor.submit(os.getpid)  # forks every worker now, while this is still the only thread
        return executor
    if "forkserver" in multiprocessing.get_all_start_methods():
        context: Any = multiprocessing.get_context("forkserver")
        context.set_forkserver_preload(list(PRELOAD))
        _start_fork_server()  # when not started yet
    else:  # pragma: no cover - Windows, macOS without a fork server
        context = multiprocessing.get_context("spawn")
    return ProcessPoolExecutor(max_workers=count, mp_context=context, initializer=_ignore_interrupt)


class WorkerBudget:
    """A worker process's memory budget for one batch (the interface of :class:`MemoryBudget`): a
    member up to :data:`SPILL_SIZE` always fits (a worker reads one member at a time); a larger one fits
    when the command reserved memory for it (:meth:`Workers.reserve`, decided where every worker's share
    is known), else it goes to a temporary file. Never waits."""

    def __init__(self, large_in_memory: bool) -> None:
        self.large_in_memory = large_in_memory

    def acquire(self, n: int, *, wait: bool = True) -> bool:
        return n <= SPILL_SIZE or self.large_in_memory

    def release(self, n: int) -> None:
        pass


@dataclass(frozen=True)
class ArchiveRef:
    """How a worker process finds the wheel a command opened: its path and the identity of the file (device,
    inode, size, modification time), so a wheel replaced in between is refused rather than read."""

    path: str
    device: int
    inode: int
    size: int
    mtime_ns: int

    @classmethod
    def of(cls, path: str | os.PathLike[str], fileno: int) -> ArchiveRef:
        st = os.fstat(fileno)
        return cls(os.fspath(path), st.st_dev, st.st_ino, st.st_size, st.st_mtime_ns)


def _open_shared(ref: ArchiveRef) -> ZipFile:
    """Open the file ``ref`` names without parsing its directory again, refused unless it is the very file."""
    opened = ZipFile(ref.path, members=())
    try:
        st = os.fstat(opened.fileno())
    except OSError as e:
        opened.close()
        raise ArchiveError(f"cannot map: {e.strerror or e}") from None
    if (st.st_dev, st.st_ino, st.st_size, st.st_mtime_ns) != (ref.device, ref.inode, ref.size, ref.mtime_ns):
        opened.close()
        raise ArchiveError("the file changed while it was being read")
    return opened


#: Archives a worker process has open, most recently used last (at most :data:`_OPEN_PER_PROCESS`).
_open: dict[ArchiveRef, ZipFile] = {}
_open_lock = threading.Lock()
_OPEN_PER_PROCESS = 4


def shared_archive(ref: ArchiveRef) -> ZipArchive:
    """In a worker process: the archive ``ref`` names, opened once per process (a few kept open)."""
    with _open_lock:
        found = _open.pop(ref, None)
        if found is None:
            found = _open_shared(ref)
        _open[ref] = found
        while len(_open) > _OPEN_PER_PROCESS:
            _open.pop(next(iter(_open))).close()
        return found.archive


def close_shared_archives() -> None:
    """Close every archive :func:`shared_archive` keeps open in this process. A worker process ends with
    them open (its exit closes them); a caller that ran worker tasks in its own process closes them with
    this, or they stay open as long as the process."""
    with _open_lock:
        while _open:
            _open.popitem()[1].close()


def batches(members: list[ZipMember]) -> list[list[ZipMember]]:
    """``members`` (largest first) as tasks for worker processes: a member of :data:`BATCH_BYTES` or more
    alone, smaller ones together, up to :data:`BATCH_MEMBERS` members or :data:`BATCH_BYTES` compressed
    bytes a batch."""
    out: list[list[ZipMember]] = []
    current: list[ZipMember] = []
    held = 0
    for member in members:
        if member.compressed_size >= BATCH_BYTES:
            out.append([member])
            continue
        if current and (len(current) >= BATCH_MEMBERS or held + member.compressed_size > BATCH_BYTES):
            out.append(current)
            current, held = [], 0
        current.append(member)
        held += member.compressed_size
    if current:
        out.append(current)
    return out


def read_batch(
    read: MemberReader[_T],
    ref: ArchiveRef,
    members: list[ZipMember],
    args: list[tuple[Any, ...]],
    large_in_memory: bool = False,
) -> list[_T] | str:
    """In a worker process: ``read`` for each member of a batch, or the one-line reason the archive could
    not be opened; a member over :data:`SPILL_SIZE` is held in memory when the command reserved it
    (``large_in_memory``), else in a temporary file."""
    try:
        archive = shared_archive(ref)
    except ArchiveError as e:
        return e.message
    budget = WorkerBudget(large_in_memory)
    return [read(archive, member, budget, None, *a) for member, a in zip(members, args, strict=True)]


class _BatchItem(Generic[_T]):
    """One member's result, out of a batch read on a worker process (:meth:`Workers.dispatch`)."""

    def __init__(
        self,
        batch: Future[list[_T] | str],
        index: int,
        member: ZipMember,
        failed: Callable[[ZipMember, str], _T],
    ) -> None:
        self._batch = batch
        self._index = index
        self._member = member
        self._failed = failed

    def result(self) -> _T:
        from concurrent.futures import BrokenExecutor  # start-up time, as in Workers.dispatch

        try:
            out = wait_interruptibly(self._batch)
        except BrokenExecutor:
            return self._failed(self._member, WORKER_DIED)
        if isinstance(out, str):
            return self._failed(self._member, out)
        return out[self._index]


class _BatchDone(Generic[_T]):
    """When a batch is done on a worker process: ``on_done`` for each of its members, under the hooks lock
    (nothing when the worker died: the results then say so)."""

    def __init__(
        self,
        batch: list[ZipMember],
        failed: Callable[[ZipMember, str], _T],
        on_done: Callable[[ZipMember, _T, bool], None],
        lock: threading.Lock,
    ) -> None:
        self._batch = batch
        self._failed = failed
        self._on_done = on_done
        self._lock = lock

    def __call__(self, future: Future[list[_T] | str]) -> None:
        if future.cancelled() or future.exception() is not None:
            return
        out = future.result()
        with self._lock:
            for i, member in enumerate(self._batch):
                result = self._failed(member, out) if isinstance(out, str) else out[i]
                self._on_done(member, result, True)
