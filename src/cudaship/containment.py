"""Running other people's code (``audit --load``, ``doctor --env --confirm``): every process such a run starts
gets the allow-listed environment of :mod:`cudaship.childenv`, a fresh ``$HOME``, ``TMPDIR`` and working
directory under the run's own directory, a memory limit, and a deadline; and every one of them, grandchildren
that left the session included, is gone when the run ends.

:class:`Containment` is one run: it creates its directory exclusively (``mkdtemp``: a new name, mode 0700) and
removes it at the end (unless kept). How the process tree is ended, per platform (docs/reliability.md):

- Linux: this process becomes a *child subreaper* (``prctl(PR_SET_CHILD_SUBREAPER)``, Linux 3.4+, no
  privilege) for the length of the run, so a descendant whose parent exits (a daemon's double fork, a
  ``setsid`` grandchild) is re-parented to this process instead of init and stays visible. At the end every
  descendant started since the run began is killed (``SIGKILL``, repeated until none is left) and reaped.
  Each child also runs in its own session, killed as a group on its timeout.
- macOS and other POSIX systems: each child in its own session, its process group killed on the timeout and
  at the end; a grandchild that calls ``setsid`` itself can outlive the run.
- Windows: the child is killed (``TerminateProcess``); its own children are not (no job object yet).

The memory limit is ``RLIMIT_DATA`` (Linux; ``RLIMIT_AS`` elsewhere): the private writable memory of each
child (heap, anonymous maps). Not ``RLIMIT_AS``: a package's libraries map gigabytes of files and CUDA
reserves large address ranges without using them (docs/reliability.md has the measurement), so an address
space limit that lets ``import torch`` through limits nothing useful.

The timeout waits on the process (``waitpid``), never on its pipes: output goes to files in the run's
directory, so a grandchild holding stderr open cannot keep a child's wait from returning.
"""

from __future__ import annotations

import contextlib
import ctypes
import os
import shutil
import signal
import subprocess
import sys
import tempfile
import threading
import time
from collections.abc import Callable, Mapping, Sequence
from pathlib import Path
from typing import IO, Any

from cudaship.childenv import contained_environment

#: The children's memory limit by default, bytes (``--load-memory``): private writable memory, 8 GiB.
DEFAULT_MEMORY = 8 << 30
#: Rounds of "find what is left, kill it" at the end of a run (a process forking as fast as it can).
_KILL_ROUNDS = 50
_PR_SET_CHILD_SUBREAPER = 36
_PR_GET_CHILD_SUBREAPER = 37

_reaper_lock = threading.Lock()
_reaper_users = 0
_reaper_previous = 0


def parse_memory(text: str) -> int:
    """``8G``, ``512M``, ``1.5GiB``, ``0`` (no limit) or a number of bytes -> bytes; ValueError otherwise."""
    value = text.strip().lower().removesuffix("ib").removesuffix("b")
    scale = 1
    for suffix, factor in (("k", 1 << 10), ("m", 1 << 20), ("g", 1 << 30), ("t", 1 << 40)):
        if value.endswith(suffix):
            value, scale = value[:-1], factor
            break
    number = float(value)
    if number < 0 or number != number:
        raise ValueError(text)
    return int(number * scale)


def _prctl() -> Any:
    if not sys.platform.startswith("linux"):
        return None
    try:
        libc = ctypes.CDLL(None, use_errno=True)
        return libc.prctl
    except (OSError, AttributeError):
        return None


def _subreaper_on() -> bool:
    """Make this process a child subreaper (counted: nested runs share it); whether it is one now."""
    global _reaper_users, _reaper_previous
    prctl = _prctl()
    if prctl is None:
        return False
    with _reaper_lock:
        if _reaper_users == 0:
            current = ctypes.c_int(0)
            prctl(_PR_GET_CHILD_SUBREAPER, ctypes.byref(current), 0, 0, 0)
            _reaper_previous = current.value
            if prctl(_PR_SET_CHILD_SUBREAPER, 1, 0, 0, 0) != 0:
                return False
        _reaper_users += 1
    return True


def _subreaper_off() -> None:
    global _reaper_users
    prctl = _prctl()
    if prctl is None:
        return
    with _reaper_lock:
        _reaper_users = max(0, _reaper_users - 1)
        if _reaper_users == 0 and not _reaper_previous:
            prctl(_PR_SET_CHILD_SUBREAPER, 0, 0, 0, 0)


def _proc_table() -> dict[int, tuple[int, str, str]]:
    """pid -> (parent pid, state, start time) of every process /proc shows (Linux)."""
    out: dict[int, tuple[int, str, str]] = {}
    try:
        names = os.listdir("/proc")
    except OSError:
        return out
    for name in names:
        if not name.isdigit():
            continue
        try:
            with open(f"/proc/{name}/stat", "rb") as f:
                raw = f.read().decode("ascii", "replace")
        except OSError:
            continue
        rest = raw[raw.rfind(")") + 2 :].split()
        if len(rest) > 19:
            out[int(name)] = (int(rest[1]), rest[0], rest[19])
    return out


def descendants(pid: int | None = None) -> dict[int, tuple[str, str]]:
    """Every descendant of ``pid`` (default: this process) on Linux: pid -> (state, start time)."""
    root = os.getpid() if pid is None else pid
    table = _proc_table()
    children: dict[int, list[int]] = {}
    for p, (parent, _state, _start) in table.items():
        children.setdefault(parent, []).append(p)
    out: dict[int, tuple[str, str]] = {}
    todo = list(children.get(root, ()))
    while todo:
        p = todo.pop()
        if p in out or p not in table:
            continue
        out[p] = (table[p][1], table[p][2])
        todo.extend(children.get(p, ()))
    return out


def _limit_memory(limit: int) -> None:
    """In the child, before exec: its private writable memory at most ``limit`` bytes."""
    import resource  # POSIX only

    which = resource.RLIMIT_DATA if sys.platform.startswith("linux") else resource.RLIMIT_AS
    _soft, hard = resource.getrlimit(which)
    value = limit if hard == resource.RLIM_INFINITY else min(limit, hard)
    resource.setrlimit(which, (value, value))


class DeadlinePassed(Exception):
    """The run's deadline passed before a process could be started."""


class Containment:
    """One run that starts processes running a package's code. Use as a context manager: on exit every process
    it started and every descendant of theirs is killed and reaped, and its directory removed (``keep``:
    kept, its path in :attr:`root`)."""

    def __init__(
        self,
        *,
        memory: int | None = DEFAULT_MEMORY,
        deadline: float | None = None,
        keep: bool = False,
        prefix: str = "cudaship-run-",
        environ: Mapping[str, str] | None = None,
    ) -> None:
        self.root = Path(tempfile.mkdtemp(prefix=prefix))
        self.home = self.root / "home"
        self.tmp = self.root / "tmp"
        self.home.mkdir(mode=0o700)
        self.tmp.mkdir(mode=0o700)
        self.memory = memory or None
        self.keep = keep
        self.deadline_at = time.monotonic() + deadline if deadline else None
        self.deadline = deadline
        self._environ = dict(os.environ if environ is None else environ)
        self._lock = threading.Lock()
        self._started: list[subprocess.Popen[Any]] = []
        self._before = descendants() if sys.platform.startswith("linux") else {}
        self.reaper = _subreaper_on()
        self._closed = False

    # -- what a child gets ------------------------------------------------------------------------------
    def environment(self, base: Mapping[str, str] | None = None, *, pip: bool = False) -> dict[str, str]:
        """The allow-listed environment (:func:`cudaship.childenv.contained_environment`) of ``base``
        (default: the caller's), its home and temporary directory this run's."""
        return contained_environment(
            self._environ if base is None else base,
            home=str(self.home),
            tmp=str(self.tmp),
            pip=pip,
            sep=os.sep,
        )

    def directory(self, name: str) -> Path:
        """A new directory under the run's directory (created exclusively: an existing name is an error)."""
        path = self.root / name
        path.mkdir(mode=0o700)
        return path

    def remaining(self) -> float | None:
        """Seconds left before the run's deadline (never below 0), or None without one."""
        if self.deadline_at is None:
            return None
        return max(0.0, self.deadline_at - time.monotonic())

    def bounded(self, timeout: float) -> float:
        """``timeout``, cut to what is left of the run's deadline; DeadlinePassed when nothing is left."""
        left = self.remaining()
        if left is None:
            return timeout
        if left <= 0:
            raise DeadlinePassed(f"the run's deadline ({self.deadline:g} s) passed")
        return min(timeout, left)

    # -- starting and waiting ---------------------------------------------------------------------------
    def popen(
        self,
        args: Sequence[str],
        *,
        env: Mapping[str, str],
        cwd: Path,
        stdout: IO[Any] | int | None = subprocess.DEVNULL,
        stderr: IO[Any] | int | None = subprocess.DEVNULL,
    ) -> subprocess.Popen[bytes]:
        """Start ``args`` in its own session, with the memory limit; stdin is /dev/null."""
        if self._closed:
            raise RuntimeError("the run is over")
        preexec = None
        if os.name == "posix" and self.memory:
            limit = self.memory

            def preexec() -> None:
                _limit_memory(limit)

        process = subprocess.Popen(
            list(args),
            cwd=cwd,
            env=dict(env),
            stdin=subprocess.DEVNULL,
            stdout=stdout,
            stderr=stderr,
            start_new_session=os.name == "posix",
            preexec_fn=preexec,
        )
        with self._lock:
            self._started.append(process)
        return process

    def wait(self, process: subprocess.Popen[Any], timeout: float) -> bool:
        """Wait for ``process`` itself (not its pipes) at most ``timeout`` seconds; on the timeout kill its
        process group and reap it. Whether it timed out."""
        try:
            process.wait(timeout=timeout)
            return False
        except subprocess.TimeoutExpired:
            kill_group(process)
            process.wait()
            return True

    def run_text(
        self,
        args: Sequence[str],
        *,
        timeout: float,
        env: Mapping[str, str],
        cwd: Path | None = None,
        on_line: Callable[[str], None] | None = None,
    ) -> subprocess.CompletedProcess[str]:
        """Run ``args`` to the end (or ``timeout``, cut to the deadline), its stdout and stderr read from
        files afterwards as UTF-8 (undecodable bytes replaced). Raises ``subprocess.TimeoutExpired`` on the
        timeout (the process group killed), DeadlinePassed, or what starting it raises (``OSError``).
        ``on_line``: called with each whole line of stdout as the file grows (polled; never a pipe, so a child
        that leaves a grandchild holding its output still ends the wait)."""
        limit = self.bounded(timeout)
        out_fd, out_name = tempfile.mkstemp(prefix="out-", dir=self.root)
        err_fd, err_name = tempfile.mkstemp(prefix="err-", dir=self.root)
        try:
            with os.fdopen(out_fd, "w+b") as out, os.fdopen(err_fd, "w+b") as err:
                process = self.popen(args, env=env, cwd=cwd or self.tmp, stdout=out, stderr=err)
                if on_line is None:
                    timed_out = self.wait(process, limit)
                else:
                    timed_out = self._follow(process, limit, out_name, on_line)
                out.seek(0)
                err.seek(0)
                stdout = out.read().decode("utf-8", "replace")
                stderr = err.read().decode("utf-8", "replace")
        finally:
            for name in (out_name, err_name):
                with contextlib.suppress(OSError):
                    os.unlink(name)
        if timed_out:
            raise subprocess.TimeoutExpired(list(args), limit, stdout, stderr)
        return subprocess.CompletedProcess(list(args), process.returncode, stdout, stderr)

    def _follow(
        self, process: subprocess.Popen[Any], limit: float, name: str, on_line: Callable[[str], None]
    ) -> bool:
        """:meth:`wait`, passing each whole line written to the file ``name`` to ``on_line`` as it comes."""
        end = time.monotonic() + limit
        pending = b""
        with open(name, "rb") as reader:

            def feed(final: bool) -> None:
                nonlocal pending
                pending += reader.read()
                *lines, pending = pending.split(b"\n")
                if final and pending:
                    lines.append(pending)
                    pending = b""
                for raw in lines:
                    on_line(raw.decode("utf-8", "replace"))

            while True:
                left = end - time.monotonic()
                if left <= 0:
                    return self.wait(process, 0)
                try:
                    process.wait(timeout=min(0.25, left))
                except subprocess.TimeoutExpired:
                    feed(final=False)
                    continue
                feed(final=True)
                return False

    # -- the end ----------------------------------------------------------------------------------------
    def kill_all(self) -> int:
        """Kill every process this run started and every descendant of theirs; how many were killed beyond
        the processes started (grandchildren left running)."""
        with self._lock:
            started = list(self._started)
        for process in started:
            if process.poll() is None:
                kill_group(process)
        for process in started:
            with contextlib.suppress(subprocess.TimeoutExpired):
                process.wait(timeout=5)
        if not sys.platform.startswith("linux"):
            return 0
        mine = {p.pid for p in started}
        killed: set[int] = set()
        for _round in range(_KILL_ROUNDS):
            left = {
                pid: state
                for pid, (state, start) in descendants().items()
                if self._before.get(pid, (None, None))[1] != start
            }
            alive = [pid for pid, state in left.items() if state not in ("Z", "X")]
            for pid in alive:
                with contextlib.suppress(OSError):
                    os.kill(pid, signal.SIGKILL)
            killed.update(p for p in alive if p not in mine)
            # re-parented to this process (the subreaper): reap them, dead or killed
            for pid in left:
                with contextlib.suppress(ChildProcessError, OSError):
                    os.waitpid(pid, os.WNOHANG if pid not in alive else 0)
            if not left:
                break
        return len(killed)

    def close(self) -> None:
        if self._closed:
            return
        self._closed = True
        try:
            self.kill_all()
        finally:
            if self.reaper:
                _subreaper_off()
            if not self.keep:
                shutil.rmtree(self.root, ignore_errors=True)

    def __enter__(self) -> Containment:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()


def kill_group(process: subprocess.Popen[Any]) -> None:
    """Kill ``process`` and its process group (its session: it was started as a session leader)."""
    try:
        os.killpg(process.pid, signal.SIGKILL)
    except (OSError, AttributeError):
        with contextlib.suppress(OSError):
            process.kill()


__all__ = ["DEFAULT_MEMORY", "Containment", "DeadlinePassed", "descendants", "kill_group", "parse_memory"]
