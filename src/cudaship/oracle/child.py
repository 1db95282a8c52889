"""The loader oracle's child: run one probe in this fresh interpreter and report what the loader mapped.

Run by the TARGET interpreter (``python -c <this source> PROBE OUT``), which does not have cudaship installed,
so this module uses the standard library only and imports nothing of cudaship. ``PROBE`` is JSON:
``{"steps": [["import", "pkg"], ["dlopen", "/abs/lib.so"]], "method": "phdr", "dll_dirs": []}``. Each step
runs in order (``importlib.import_module`` so a package's own preloading in its ``__init__`` runs;
``ctypes.CDLL`` for a library, which dlopens with RTLD_NOW). A failing step is recorded with the loader's own
message and the child goes on to the next.

``OUT`` receives JSON lines, each written and flushed at once, so a crash (SIGSEGV in a constructor) or a
hang that the parent kills still leaves the steps done and the step being run:
``{"event": "start", "step": i, "loaded": [...]}`` before step ``i``, ``{"event": "done", "step": i, "ok":
..., "message": ..., "seconds": ...}`` after it, ``{"event": "end", "objects": [[name, path], ...],
"listing_us": N}`` last. ``loaded`` and ``objects`` list every object mapped, in the loader's order.

With ``{"before": [...], "probes": [{"steps": [...], "out": PATH}, ...], "timeout": T, "jobs": N}`` (POSIX),
the shared ``before`` steps (importing the packages) run once and each probe runs in a child forked from that
state: the same process image a fresh interpreter would have after those imports, for the cost of a fork
(:func:`run_forked`).

With ``{"batch": [{"steps": [["import", "m"]], "out": PATH}, ...], "timeout": T}`` (a wheel with more
top-level modules than the parent starts interpreters for), each entry's steps run one after another in this
interpreter, each stopped by a timer after ``T`` seconds (``{"event": "killed"}``), each writing its own
``out`` file (:func:`run_batch`).

Listing (``method``): ``phdr`` (default) walks the loader's own list with ``dl_iterate_phdr`` through ctypes
(Linux; ``_dyld_get_image_name`` on macOS, ``EnumProcessModules`` on Windows); ``maps`` reads
``/proc/self/maps`` (executable file mappings, in address order). docs/load.md has the measurements behind
the default.
"""

from __future__ import annotations

import ctypes
import importlib
import json
import os
import signal
import sys
import time
from typing import Any


def _phdr_linux() -> list[tuple[str, str]]:
    class Info(ctypes.Structure):
        _fields_ = [("addr", ctypes.c_void_p), ("name", ctypes.c_char_p)]

    names: list[str] = []
    callback_type = ctypes.CFUNCTYPE(ctypes.c_int, ctypes.POINTER(Info), ctypes.c_size_t, ctypes.c_void_p)

    def each(info: Any, _size: int, _data: Any) -> int:
        raw = info.contents.name
        names.append(raw.decode("utf-8", "surrogateescape") if raw else "")
        return 0

    libc = ctypes.CDLL(None)
    libc.dl_iterate_phdr.argtypes = [callback_type, ctypes.c_void_p]
    libc.dl_iterate_phdr(callback_type(each), None)
    out: list[tuple[str, str]] = []
    for name in names:
        if not name:  # the main program
            out.append((sys.executable, os.path.realpath("/proc/self/exe")))
        elif os.path.exists(name):  # linux-vdso.so.1 has no file
            out.append((name, os.path.realpath(name)))
    return out


def _dyld() -> list[tuple[str, str]]:
    libc = ctypes.CDLL(None)
    libc._dyld_image_count.restype = ctypes.c_uint32
    libc._dyld_get_image_name.restype = ctypes.c_char_p
    libc._dyld_get_image_name.argtypes = [ctypes.c_uint32]
    out = []
    for i in range(libc._dyld_image_count()):
        raw = libc._dyld_get_image_name(i)
        if raw:
            name = raw.decode("utf-8", "surrogateescape")
            out.append((name, os.path.realpath(name)))
    return out


def _modules_windows() -> list[tuple[str, str]]:
    kernel32 = ctypes.WinDLL("kernel32")  # type: ignore[attr-defined]
    psapi = ctypes.WinDLL("psapi")  # type: ignore[attr-defined]
    process = kernel32.GetCurrentProcess()
    handles = (ctypes.c_void_p * 4096)()
    needed = ctypes.c_ulong(0)
    psapi.EnumProcessModules(process, handles, ctypes.sizeof(handles), ctypes.byref(needed))
    count = min(needed.value // ctypes.sizeof(ctypes.c_void_p), 4096)
    out = []
    buf = ctypes.create_unicode_buffer(32768)
    for i in range(count):
        if psapi.GetModuleFileNameExW(process, ctypes.c_void_p(handles[i]), buf, 32768):
            out.append((buf.value, os.path.realpath(buf.value)))
    return out


def _maps() -> list[tuple[str, str]]:
    seen: dict[str, None] = {}
    with open("/proc/self/maps", encoding="utf-8", errors="surrogateescape") as f:
        for line in f:
            parts = line.split(None, 5)
            if len(parts) == 6 and "x" in parts[1] and parts[5].startswith("/"):
                path = parts[5].rstrip("\n")
                if path.endswith(" (deleted)"):
                    continue
                seen.setdefault(path, None)
    return [(p, os.path.realpath(p)) for p in seen]


def mapped(method: str) -> list[tuple[str, str]]:
    """Every object mapped in this process: (the loader's name for it, its real path)."""
    if method == "maps":
        return _maps()
    if sys.platform == "darwin":
        return _dyld()
    if sys.platform == "win32":
        return _modules_windows()
    return _phdr_linux()


def _one_line(e: BaseException) -> str:
    text = str(e).strip().replace("\n", " ") or repr(e)
    return f"{type(e).__name__}: {text}"


class _Late(BaseException):
    """Raised by the per-module timer of :func:`run_batch`."""


def _steps(steps: Any, method: str, emit: Any, first: int = 0) -> None:
    for i, (kind, target) in enumerate(steps or (), start=first):
        emit({"event": "start", "step": i, "loaded": [p for _n, p in mapped(method)]})
        started = time.perf_counter()
        ok, message = True, None
        try:
            if kind == "import":
                importlib.import_module(target)
            elif kind == "dlopen":
                ctypes.CDLL(target)
            elif kind == "call":  # a package's documented loader function, "module:function"
                module_name, _, function = target.partition(":")
                found = getattr(importlib.import_module(module_name), function, None)
                if callable(found):
                    found()
                else:
                    message = f"{module_name}.{function} is not defined: nothing called"
            else:
                ok, message = False, f"unknown step {kind!r}"
        except (KeyboardInterrupt, _Late):
            raise
        except BaseException as e:  # SystemExit from a package's __init__ is a result too
            ok, message = False, _one_line(e)
        emit(
            {
                "event": "done",
                "step": i,
                "ok": ok,
                "message": message,
                "seconds": round(time.perf_counter() - started, 6),
            }
        )


def _end(method: str, emit: Any) -> None:
    started = time.perf_counter()
    objects = mapped(method)
    listing_us = int((time.perf_counter() - started) * 1e6)
    emit({"event": "end", "objects": objects, "listing_us": listing_us})


def _writer(out_path: str) -> tuple[int, Any]:
    fd = os.open(out_path, os.O_WRONLY | os.O_CREAT | os.O_APPEND, 0o600)

    def emit(record: dict[str, Any]) -> None:
        os.write(fd, (json.dumps(record) + "\n").encode("utf-8", "surrogateescape"))

    return fd, emit


def _setup(probe: dict[str, Any]) -> str:
    for directory in probe.get("dll_dirs") or ():
        if hasattr(os, "add_dll_directory"):
            os.add_dll_directory(directory)
    return str(probe.get("method") or "phdr")


def run(probe: dict[str, Any], out_path: str) -> int:
    method = _setup(probe)
    fd, emit = _writer(out_path)
    _steps(probe.get("steps"), method, emit)
    _end(method, emit)
    os.close(fd)
    return 0


def _threads() -> int:
    """Threads of this process, native ones included (``/proc/self/task``); Python's count elsewhere."""
    try:
        return len(os.listdir("/proc/self/task"))
    except OSError:
        import threading  # runs as a file in the target interpreter: imports only what it uses

        return threading.active_count()


def run_forked(probe: dict[str, Any]) -> int:
    """The shared steps once (``before``: importing the packages), then each probe's own steps in a child
    forked from that state, ``jobs`` at a time, each killed after ``timeout`` seconds. Each forked child
    writes the shared steps' events and its own to its ``out`` file; this process adds how each ended
    (``{"event": "exit", "status": N}`` or ``"signal"``, or ``{"event": "killed"}`` on the timeout)."""
    method = _setup(probe)
    shared: list[dict[str, Any]] = []
    _steps(probe.get("before"), method, shared.append)
    if _threads() > 1:
        # a lock another thread holds at the fork would stay held in the child: leave every probe to a
        # fresh interpreter (the parent runs those it has no result for)
        return 0
    todo = list(enumerate(probe.get("probes") or ()))
    timeout = float(probe.get("timeout") or 120)
    jobs = max(1, int(probe.get("jobs") or 1))
    running: dict[int, tuple[str, float]] = {}
    sys.stdout.flush()
    sys.stderr.flush()
    while todo or running:
        while todo and len(running) < jobs:
            _i, one = todo.pop(0)
            pid = os.fork()
            if pid == 0:
                try:
                    fd, emit = _writer(one["out"])
                    for event in shared:
                        emit(event)
                    _steps(one.get("steps"), method, emit, first=len(probe.get("before") or ()))
                    _end(method, emit)
                    os.close(fd)
                finally:
                    os._exit(0)
            running[pid] = (one["out"], time.monotonic() + timeout)
        pid, status = os.waitpid(-1, os.WNOHANG)
        if pid == 0:
            now = time.monotonic()
            for late, (out, deadline) in list(running.items()):
                if now > deadline:
                    os.kill(late, 9)
                    os.waitpid(late, 0)
                    del running[late]
                    fd, emit = _writer(out)
                    emit({"event": "killed"})
                    os.close(fd)
            time.sleep(0.005)
            continue
        if pid not in running:
            continue
        out, _deadline = running.pop(pid)
        fd, emit = _writer(out)
        if os.WIFSIGNALED(status):
            emit({"event": "exit", "signal": os.WTERMSIG(status)})
        else:
            emit({"event": "exit", "status": os.WEXITSTATUS(status)})
        os.close(fd)
    return 0


def run_batch(probe: dict[str, Any]) -> int:
    """Each entry of ``batch`` in turn, in this interpreter, each stopped after ``timeout`` seconds by a
    timer (an import stuck in C code that never returns to Python is left to the parent's timeout)."""
    method = _setup(probe)
    timeout = float(probe.get("timeout") or 120)
    timer = hasattr(signal, "setitimer")

    def late(_signum: int, _frame: Any) -> None:
        raise _Late()

    if timer:
        signal.signal(signal.SIGALRM, late)
    for one in probe.get("batch") or ():
        fd, emit = _writer(one["out"])
        try:
            if timer:
                signal.setitimer(signal.ITIMER_REAL, timeout)
            _steps(one.get("steps"), method, emit)
            if timer:
                signal.setitimer(signal.ITIMER_REAL, 0)
            _end(method, emit)
        except _Late:
            emit({"event": "killed"})
        finally:
            if timer:
                signal.setitimer(signal.ITIMER_REAL, 0)
            os.close(fd)
    return 0


def main(argv: list[str]) -> int:
    if len(argv) != 2:
        sys.stderr.write("usage: child PROBE_JSON OUT_PATH\n")
        return 2
    probe = json.loads(argv[0])
    if "probes" in probe:
        return run_forked(probe)
    if "batch" in probe:
        return run_batch(probe)
    return run(probe, argv[1])


if __name__ == "__main__":
    sys.stdout.flush()
    os._exit(main(sys.argv[1:]))
