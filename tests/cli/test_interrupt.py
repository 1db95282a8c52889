"""Ctrl-C during ``audit`` of a large wheel read on worker processes (issue 35): one line ``cudaship:
aborted``, exit 130, no traceback (a worker that took the SIGINT printed a 22-line ``ForkServerProcess``
traceback), and no process of the command left behind.

The command runs as the console script does, in a session of its own, and the SIGINT goes to its whole
process group, as a terminal sends it: to the command, its fork server and every worker. Waits are bounded by
counting polls, never by a clock.

The SIGINT is sent only once the audit cannot finish without it: a ``sitecustomize`` on the command's
``PYTHONPATH`` (a hook of the test, nothing of cudaship's) makes each worker starting a batch of members say
so in a file and then wait for ever, so the command waits on its workers until Ctrl-C ends them. Before, the
test sent it when the workers were merely there, and under load the whole audit could finish first (exit 0).
"""

from __future__ import annotations

import contextlib
import os
import signal
import subprocess
import sys
import threading
import time
from pathlib import Path

import pytest

from tests.cli.test_exit import REPO

pytestmark = [pytest.mark.slow, pytest.mark.skipif(not sys.platform.startswith("linux"), reason="/proc")]

POLL = 0.05

#: The test's hook, imported by every Python process of the command at start-up (the command, the fork server;
#: forked workers inherit it): a worker process that starts a batch notes it and never finishes it.
HOOK = """
import multiprocessing, os, pathlib, time
from cudaship.archive import pool

_read_batch = pool.read_batch


def read_batch(*args, **kwargs):
    if multiprocessing.parent_process() is None:  # the command itself: as it is
        return _read_batch(*args, **kwargs)
    pathlib.Path(os.environ["TEST_GATE"], f"worker-{os.getpid()}").write_text("reading a batch")
    while True:  # until the command ends this worker
        time.sleep(1)


read_batch.__module__, read_batch.__qualname__ = _read_batch.__module__, _read_batch.__qualname__
pool.read_batch = read_batch
"""
#: polls before giving up: the workers start within a second or two on a loaded machine
POLLS = 1200


def _group(pgid: int) -> list[int]:
    """Processes of process group ``pgid`` still there (zombies included until reaped)."""
    found = []
    for entry in os.listdir("/proc"):
        if not entry.isdigit():
            continue
        try:
            stat = Path(f"/proc/{entry}/stat").read_text()
        except OSError:
            continue
        fields = stat[stat.rindex(")") + 2 :].split()
        if int(fields[2]) == pgid and fields[0] != "Z":
            found.append(int(entry))
    return found


@pytest.mark.parametrize(
    "progress",
    [
        pytest.param("--progress", id="fork-server"),  # a progress thread: workers come from the fork server
        pytest.param("--no-progress", id="forked"),  # no other thread: workers forked from the command
    ],
)
def test_ctrl_c_during_audit_is_one_line_and_exit_130(
    progress: str, bitsandbytes_linux_wheel: Path, tmp_path: Path
) -> None:
    hook, gate = tmp_path / "hook", tmp_path / "gate"
    hook.mkdir()
    gate.mkdir()
    (hook / "sitecustomize.py").write_text(HOOK)
    env = {
        **os.environ,
        "PYTHONPATH": os.pathsep.join([str(hook), str(REPO / "src")]),
        "CUDASHIP_PROCESSES": "always",
        "TEST_GATE": str(gate),
    }
    env.pop("CUDASHIP_TRAIN", None)
    command = [sys.executable, "-c", "from cudaship.cli.main import entry; entry()"]
    child = subprocess.Popen(
        [*command, "audit", progress, "--offline", str(bitsandbytes_linux_wheel)],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
        env=env,
        start_new_session=True,
    )
    try:
        for _ in range(POLLS):  # working, and it cannot finish: a worker holds a batch it will never return
            if any(gate.iterdir()) or child.poll() is not None:
                break
            time.sleep(POLL)
        assert child.poll() is None, f"the audit ended before a worker read: {child.communicate()}"
        assert any(gate.iterdir()), "no worker process started reading"
        assert len(_group(child.pid)) >= 3
        info = []  # for a failure: which process printed what
        for pid in _group(child.pid):
            with contextlib.suppress(OSError):
                info.append((pid, Path(f"/proc/{pid}/cmdline").read_text().replace("\0", " ")[:70]))
        os.killpg(child.pid, signal.SIGINT)
        out, err = child.communicate(timeout=120)
    finally:
        if child.poll() is None:
            os.killpg(child.pid, signal.SIGKILL)
            child.communicate()
    assert child.returncode == 130, err
    assert out == ""
    assert "Traceback" not in err and "Error" not in err, (info, err)
    lines = err.splitlines()
    assert lines[-1] == "cudaship: aborted"
    assert all(line.startswith("cudaship: auditing") for line in lines[:-1]), lines  # progress only before
    if progress == "--no-progress":
        assert err == "cudaship: aborted\n"
    left = _group(child.pid)
    for _ in range(POLLS):  # the fork server and resource tracker end when they see the command gone
        if not left:
            break
        time.sleep(POLL)
        left = _group(child.pid)
    assert left == []


@pytest.mark.skipif(not hasattr(signal, "pthread_kill"), reason="POSIX threads")
def test_ctrl_c_taken_by_another_thread_still_ends_the_wait_on_a_worker() -> None:
    """The kernel gives a process's SIGINT to any thread that does not block it (an audit's requirements
    thread): Python's flag is set, but the main thread waiting on a worker's batch was not woken, and Ctrl-C
    waited for the batch to end (found by the test above once its worker never ended: it hung under load).
    Here the signal goes to a helper thread while the main thread waits on a future nobody completes; it must
    raise KeyboardInterrupt before the helper gives up and completes it."""
    from concurrent.futures import Future

    from cudaship.waits import wait_interruptibly

    future: Future[int] = Future()
    released = threading.Event()
    main = threading.main_thread().ident
    assert main == threading.get_ident()

    calling = threading.Event()  # set just before the main thread calls the wait

    def waiting() -> bool:  # the main thread is in that call, inside Condition.wait, blocked on its lock
        frame = sys._current_frames().get(main) if calling.is_set() else None  # type: ignore[arg-type]
        code = frame.f_code if frame is not None else None
        return code is not None and code.co_name == "wait" and "threading" in code.co_filename

    def helper() -> None:
        for _ in range(POLLS):
            if waiting():
                break
            time.sleep(POLL)
        signal.pthread_kill(threading.get_ident(), signal.SIGINT)  # taken by this thread, not the main one
        for _ in range(100):  # a few seconds for the main thread to answer, counted in polls
            if not waiting():
                return
            time.sleep(POLL)
        released.set()
        future.set_result(0)  # the old wait ends only now

    previous = signal.signal(signal.SIGINT, signal.default_int_handler)
    thread = threading.Thread(target=helper)
    try:
        thread.start()
        with pytest.raises(KeyboardInterrupt):
            calling.set()
            wait_interruptibly(future)
        assert not released.is_set(), "Ctrl-C was seen only once the batch ended"
    finally:
        if not future.done():
            future.set_result(0)
        thread.join()
        signal.signal(signal.SIGINT, previous)
