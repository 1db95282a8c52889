"""Run probes in fresh child processes of a target interpreter and record what the real loader mapped.

:func:`observe` starts one child per probe (``python -c <child source>``, cwd an empty directory so nothing of
cudaship or of the caller's directory is importable), a few at a time, each in its own session so a timeout
kills the child and anything it started. The children run the packages' code: they run inside a
:class:`~cudaship.containment.Containment` (the allow-listed environment, a fresh ``$HOME`` and ``TMPDIR``
under the run's own directory, a memory limit, the run's deadline; every descendant killed when
:func:`observe` returns). Each timeout waits on the child's pid, never on a pipe: its stderr goes to a file.
More than :data:`BATCH_ABOVE` top-level imports (probes ``import M`` with nothing before) are imported in at
most :data:`MAX_IMPORT_INTERPRETERS` interpreters, one module after another in each, each import on its own
(a failure, an exception or the per-module timeout is that module's result). A child killed by a signal or
the timeout is a result. Then, in this process, each
loaded object's SONAME and DT_NEEDED are read with cudaship's ELF reader (once per file) and
each DT_NEEDED is matched to the loaded object that satisfied it, as glibc does: a loaded object whose SONAME,
or a name it was loaded by, equals the entry is reused (``_dl_map_object``, elf/dl-load.c).

No GPU is needed: when the target interpreter cannot load ``libcuda.so.1``, the toolkit's stub
(``$CUDA_HOME/lib64/stubs/libcuda.so``) is linked as ``libcuda.so.1`` in a directory put first on the
children's LD_LIBRARY_PATH, and the observation says so (:attr:`Observation.stub_libcuda`).
"""

from __future__ import annotations

import glob
import json
import mmap
import os
import posixpath
import shutil
import signal
import subprocess
import sys
import tempfile
import threading
import time
from collections.abc import Callable, Mapping, Sequence
from concurrent.futures import ThreadPoolExecutor
from dataclasses import replace
from functools import cache
from pathlib import Path
from typing import Any

from cudaship import words
from cudaship.binary.elf import read_elf
from cudaship.binary.magic import binary_format
from cudaship.containment import DEFAULT_MEMORY, Containment, DeadlinePassed
from cudaship.errors import CudashipError, OracleError
from cudaship.oracle.records import (
    LoadedObject,
    Needed,
    Observation,
    Probe,
    ProbeResult,
    Step,
    StepKind,
    StepResult,
)
from cudaship.records.binary import FileFormat, ImportKind
from cudaship.safe_read import open_regular

#: Seconds one child may take (importing a large package from a cold disk cache takes a while).
DEFAULT_TIMEOUT = 120.0
#: Children run at once (each is one interpreter; more than the CPUs only queues them).
DEFAULT_JOBS = 4
#: Top-level imports above this many are batched: at most :data:`MAX_IMPORT_INTERPRETERS` interpreters.
BATCH_ABOVE = 32
MAX_IMPORT_INTERPRETERS = 8
METHODS = {"phdr": "dl_iterate_phdr", "maps": "/proc/self/maps"}
_STUB_GLOBS = ("lib64/stubs/libcuda.so", "lib/stubs/libcuda.so", "targets/*/lib/stubs/libcuda.so")
_TAIL_LINES = 12


@cache
def child_source() -> str:
    """The child script's text (run with ``-c``: the script's directory never lands on ``sys.path``)."""
    return (Path(__file__).with_name("child.py")).read_text(encoding="utf-8")


def find_stub(environ: Mapping[str, str] | None = None) -> str | None:
    """The toolkit's stub ``libcuda.so``: under ``$CUDA_HOME``, ``$CUDA_PATH``, then /usr/local/cuda."""
    env = os.environ if environ is None else environ
    roots = [env.get("CUDA_HOME"), env.get("CUDA_PATH"), "/usr/local/cuda"]
    for root in roots:
        if not root:
            continue
        for pattern in _STUB_GLOBS:
            for hit in sorted(glob.glob(os.path.join(glob.escape(root), pattern))):
                if os.path.isfile(hit):
                    return hit
    return None


def driver_loadable(python: str, env: Mapping[str, str], run: Containment | None = None) -> bool:
    """Whether a child of ``python`` can dlopen ``libcuda.so.1`` (the NVIDIA driver's library)."""
    code = "import ctypes,sys\ntry:\n ctypes.CDLL('libcuda.so.1')\nexcept OSError:\n sys.exit(3)\n"
    if run is None:
        with Containment() as own:
            return driver_loadable(python, env, own)
    try:
        done = run.run_text([python, "-c", code], env=env, timeout=60)
    except (OSError, subprocess.TimeoutExpired, DeadlinePassed):
        return False
    return done.returncode == 0


def _tail(text: str) -> str | None:
    lines = text.strip().splitlines()[-_TAIL_LINES:]
    return "\n".join(lines) or None


def _signal_name(code: int) -> str:
    try:
        return signal.Signals(-code).name
    except ValueError:
        return f"signal {-code}"


def _read_events(path: Path) -> list[dict[str, Any]]:
    events: list[dict[str, Any]] = []
    try:
        text = path.read_text(encoding="utf-8", errors="surrogateescape")
    except OSError:
        return events
    for line in text.splitlines():
        try:
            event = json.loads(line)
        except ValueError:
            continue  # the last line of a child killed while writing
        if isinstance(event, dict):
            events.append(event)
    return events


class _ElfCache:
    """SONAME and DT_NEEDED of each loaded file, read once per real path (threads share it)."""

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._known: dict[str, tuple[str | None, tuple[str, ...], str | None]] = {}

    def get(self, path: str) -> tuple[str | None, tuple[str, ...], str | None]:
        with self._lock:
            hit = self._known.get(path)
        if hit is not None:
            return hit
        value = _read_dynamic(path)
        with self._lock:
            self._known[path] = value
        return value


def _read_dynamic(path: str) -> tuple[str | None, tuple[str, ...], str | None]:

    try:
        with open_regular(path) as f, mmap.mmap(f.fileno(), 0, access=mmap.ACCESS_READ) as buf:
            if binary_format(bytes(buf[:64])) is not FileFormat.ELF:
                return None, (), "not an ELF file"
            host = read_elf(buf, full=False)
    except (CudashipError, OSError, ValueError) as e:
        return None, (), str(e)
    needed = tuple(i.library for i in host.imports if i.kind is ImportKind.NEEDED)
    return host.soname, needed, None


def match_needed(name: str, loaded: Sequence[tuple[str, str, str | None]]) -> tuple[str | None, str | None]:
    """The loaded object (real path) glibc reuses for DT_NEEDED ``name``, and what matched.

    ``loaded`` is (loader's name, real path, SONAME) in load order. A name with a slash is a path: the object
    loaded from that path. Otherwise the first object whose SONAME equals it, else whose loaded name's last
    component does (what ``_dl_name_match_p`` compares: the names an object was loaded by)."""
    if "/" in name:
        real = os.path.realpath(name)
        for _n, path, _s in loaded:
            if path == real:
                return path, "name"
        return None, None
    for _n, path, soname in loaded:
        if soname == name:
            return path, "soname"
    for loader_name, path, _s in loaded:
        if posixpath.basename(loader_name) == name:
            return path, "name"
    return None, None


def _objects(pairs: Sequence[Sequence[str]], elf: _ElfCache) -> tuple[LoadedObject, ...]:
    rows: list[tuple[str, str, str | None, tuple[str, ...], str | None]] = []
    seen: set[str] = set()
    for pair in pairs:
        name, path = str(pair[0]), str(pair[1])
        if path in seen:
            continue
        seen.add(path)
        soname, needed, problem = elf.get(path) if sys.platform.startswith("linux") else (None, (), None)
        rows.append((name, path, soname, needed, problem))
    index = [(name, path, soname) for name, path, soname, _n, _p in rows]
    out = []
    for name, path, soname, needed, problem in rows:
        matched = []
        for entry in needed:
            target, how = match_needed(entry, index)
            matched.append(Needed(entry, target, how))
        out.append(LoadedObject(name, path, soname, tuple(matched), problem))
    return tuple(out)


def _result(
    probe: Probe,
    events: list[dict[str, Any]],
    elf: _ElfCache,
    *,
    code: int | None,
    timed_out: bool,
    stderr: str,
    seconds: float,
    timeout: float,
) -> ProbeResult:
    steps = [*probe.before, probe.step]
    loaded_before: dict[int, tuple[str, ...]] = {}
    done: list[StepResult] = []
    stage: int | None = None
    objects: tuple[LoadedObject, ...] = ()
    listing_us: int | None = None
    last_loaded: list[Any] = []
    for event in events:
        kind = event.get("event")
        i = event.get("step")
        if kind == "start" and isinstance(i, int) and 0 <= i < len(steps):
            stage = i
            last_loaded = list(event.get("loaded") or ())
            loaded_before[i] = tuple(str(p) for p in last_loaded)
        elif kind == "done" and isinstance(i, int) and 0 <= i < len(steps):
            stage = None
            done.append(
                StepResult(
                    steps[i],
                    bool(event.get("ok")),
                    event.get("message"),
                    loaded_before.get(i, ()),
                    event.get("seconds"),
                )
            )
        elif kind == "end":
            objects = _objects(event.get("objects") or (), elf)
            listing_us = event.get("listing_us")
        elif kind == "exit":  # a forked child: how it ended, as its forking parent saw it
            code = -int(event["signal"]) if "signal" in event else int(event.get("status") or 0)
        elif kind == "killed":
            timed_out = True
    if not objects and last_loaded:
        objects = _objects([(p, p) for p in last_loaded], elf)  # a crash: what was mapped before the step
    at = steps[stage].label if stage is not None else None
    tail = _tail(stderr)
    signal_name = _signal_name(code) if code is not None and code < 0 and not timed_out else None
    own = next((s for s in done if s.step == probe.step), None)
    message: str | None
    if timed_out:
        message = f"did not finish within {timeout:g} s" + (f" (at {at})" if at else "")
        ok = False
    elif signal_name is not None:
        message = f"killed by {signal_name}" + (f" (at {at})" if at else "")
        ok = False
    elif own is None:
        where = steps[stage] if stage is not None else None
        if where is not None and where.kind is StepKind.DLOPEN:
            message = f"the library's initializer exited the process with status {code} (at {at})"
        elif where is not None:
            message = f"{where.label} exited the process with status {code}"
        else:
            message = f"the child exited with status {code} before finishing"
        ok = False
    else:
        ok = own.ok
        message = own.message
    return ProbeResult(
        probe=probe,
        ok=ok,
        message=message,
        steps=tuple(done),
        objects=objects,
        timed_out=timed_out,
        signal=signal_name,
        exit_code=code,
        stage=at,
        stderr_tail=tail if not ok else None,
        seconds=round(seconds, 3),
        listing_us=listing_us,
    )


def _forkable(probes: Sequence[Probe]) -> dict[tuple[Step, ...], list[int]]:
    """Probes that share their ``before`` steps (imports, loader calls), by those steps (groups of 2+)."""
    groups: dict[tuple[Step, ...], list[int]] = {}
    for n, probe in enumerate(probes):
        if probe.before and all(s.kind.value in ("import", "call") for s in probe.before):
            groups.setdefault(probe.before, []).append(n)
    return {k: v for k, v in groups.items() if len(v) >= 2}


def _run_forked(
    python: str,
    before: tuple[Step, ...],
    members: list[tuple[int, Probe]],
    env: Mapping[str, str],
    workdir: Path,
    timeout: float,
    jobs: int,
    method: str,
    dll_dirs: Sequence[str],
    elf: _ElfCache,
    run: Containment,
) -> dict[int, ProbeResult]:
    """Run ``members`` in children forked after one interpreter ran ``before``; the results of those that
    finished (a timeout or a signal is left out: the caller runs it again in a fresh process, so a fork
    artefact can never pass for the loader's verdict)."""
    key = f"fork-{members[0][0]}"
    outs = {n: workdir / f"{key}-probe-{n}.jsonl" for n, _p in members}
    payload = {
        "before": [[s.kind.value, s.target] for s in before],
        "probes": [{"steps": [[p.step.kind.value, p.step.target]], "out": str(outs[n])} for n, p in members],
        "timeout": timeout,
        "jobs": jobs,
        "method": method,
        "dll_dirs": list(dll_dirs),
    }
    cwd = workdir / f"cwd-{key}"
    cwd.mkdir()
    # the imports once, then every member at most ``timeout`` each, ``jobs`` at a time
    try:
        overall = run.bounded(timeout * (1 + -(-len(members) // jobs)))
    except DeadlinePassed:
        return {}
    try:
        process = run.popen(
            [python, "-c", child_source(), json.dumps(payload), str(workdir / f"{key}.jsonl")],
            env=env,
            cwd=cwd,
        )
    except OSError as e:
        raise OracleError(f"cannot start {python}: {e.strerror or e}") from None
    run.wait(process, overall)
    done: dict[int, ProbeResult] = {}
    for n, probe in members:
        events = _read_events(outs[n])
        if not any(e.get("event") == "exit" for e in events):
            continue  # never forked or never reaped: run it fresh
        result = _result(
            probe, events, elf, code=None, timed_out=False, stderr="", seconds=0.0, timeout=timeout
        )
        if not (result.timed_out or result.signal):
            own = result.result
            done[n] = replace(result, seconds=own.seconds if own is not None else None, forked=True)
    return done


def _run_one(
    python: str,
    probe: Probe,
    env: Mapping[str, str],
    workdir: Path,
    number: int,
    timeout: float,
    method: str,
    dll_dirs: Sequence[str],
    elf: _ElfCache,
    run: Containment,
) -> ProbeResult:
    out = workdir / f"probe-{number}.jsonl"
    try:
        limit = run.bounded(timeout)
    except DeadlinePassed as e:
        return not_run(probe, f"not run: {e} (--load-deadline)")
    payload = {
        "steps": [[s.kind.value, s.target] for s in (*probe.before, probe.step)],
        "method": method,
        "dll_dirs": list(dll_dirs),
    }
    cwd = workdir / f"cwd-{number}"
    cwd.mkdir()
    command = [python, "-c", child_source(), json.dumps(payload), str(out)]
    started = time.perf_counter()
    # stderr into a file, never a pipe: a grandchild holding it open cannot keep the wait from returning
    with open(workdir / f"stderr-{number}", "w+b") as err:
        try:
            process = run.popen(command, env=env, cwd=cwd, stderr=err)
        except OSError as e:
            raise OracleError(f"cannot start {python}: {e.strerror or e}") from None
        timed_out = run.wait(process, limit)
        err.seek(0)
        stderr = err.read(1 << 20).decode("utf-8", "replace")
    seconds = time.perf_counter() - started
    return _result(
        probe,
        _read_events(out),
        elf,
        code=process.returncode,
        timed_out=timed_out,
        stderr=stderr,
        seconds=seconds,
        timeout=limit,
    )


def not_run(probe: Probe, why: str) -> ProbeResult:
    """The result of a probe whose child was never started (the run's deadline passed)."""
    return ProbeResult(probe=probe, ok=False, message=why, timed_out=True)


def _run_batch(
    python: str,
    members: list[tuple[int, Probe]],
    env: Mapping[str, str],
    workdir: Path,
    timeout: float,
    method: str,
    dll_dirs: Sequence[str],
    elf: _ElfCache,
    run: Containment,
) -> dict[int, ProbeResult]:
    """Import ``members`` (``import M`` probes) one after another in one interpreter, each on its own (the
    child's per-module timer stops a module that runs past ``timeout``); a module the interpreter never
    reached (it crashed, exited or was killed) says so."""
    key = f"batch-{members[0][0]}"
    outs = {n: workdir / f"{key}-probe-{n}.jsonl" for n, _p in members}
    payload = {
        "batch": [{"steps": [[p.step.kind.value, p.step.target]], "out": str(outs[n])} for n, p in members],
        "timeout": timeout,
        "method": method,
        "dll_dirs": list(dll_dirs),
    }
    cwd = workdir / f"cwd-{key}"
    cwd.mkdir()
    try:
        overall = run.bounded(timeout * len(members) + timeout)
    except DeadlinePassed as e:
        return {n: not_run(p, f"not run: {e} (--load-deadline)") for n, p in members}
    started = time.perf_counter()
    with open(workdir / f"stderr-{key}", "w+b") as err:
        try:
            process = run.popen(
                [python, "-c", child_source(), json.dumps(payload), "-"], env=env, cwd=cwd, stderr=err
            )
        except OSError as e:
            raise OracleError(f"cannot start {python}: {e.strerror or e}") from None
        timed_out = run.wait(process, overall)
        err.seek(0)
        stderr = err.read(1 << 20).decode("utf-8", "replace")
    seconds = time.perf_counter() - started
    done: dict[int, ProbeResult] = {}
    stopped_at: str | None = None
    for n, probe in members:
        events = _read_events(outs[n])
        ended = any(e.get("event") in ("end", "killed") for e in events)
        if events and not ended:  # the module the interpreter stopped in
            stopped_at = probe.step.label
            code = None if timed_out else process.returncode
            done[n] = _result(
                probe,
                events,
                elf,
                code=code,
                timed_out=timed_out,
                stderr=stderr,
                seconds=seconds,
                timeout=timeout,
            )
        elif not events:
            why = "the run's deadline passed" if timed_out else f"it exited with status {process.returncode}"
            done[n] = ProbeResult(
                probe=probe,
                ok=False,
                message=f"not imported: the interpreter importing this batch of modules stopped before it"
                f" ({why}" + (f", at {stopped_at}" if stopped_at else "") + ")",
                timed_out=timed_out,
            )
        else:
            result = _result(
                probe, events, elf, code=0, timed_out=False, stderr="", seconds=0.0, timeout=timeout
            )
            own = result.result
            done[n] = replace(result, seconds=own.seconds if own is not None else None)
    return done


def child_environment(base: Mapping[str, str] | None = None) -> dict[str, str]:
    """``base`` (default this process's), unbuffered, without the variables that would change what a fresh
    interpreter imports (PYTHONPATH, PYTHONHOME, PYTHONSTARTUP). :func:`observe` keeps of it only what
    :mod:`cudaship.childenv` allows (and a PYTHONPATH set on it)."""
    env = dict(os.environ if base is None else base)
    for key in ("PYTHONPATH", "PYTHONHOME", "PYTHONSTARTUP", "PYTHONINSPECT", "LD_DEBUG"):
        env.pop(key, None)
    env["PYTHONUNBUFFERED"] = "1"
    env["PYTHONIOENCODING"] = "utf-8"
    env["PYTHONDONTWRITEBYTECODE"] = "1"
    return env


def observe(
    python: str,
    probes: Sequence[Probe],
    *,
    env: Mapping[str, str] | None = None,
    timeout: float = DEFAULT_TIMEOUT,
    jobs: int | None = None,
    method: str = "phdr",
    stub: bool | None = None,
    dll_dirs: Sequence[str] = (),
    on_result: Callable[[ProbeResult], None] | None = None,
    share_imports: bool = True,
    stub_path: str | None = None,
    run: Containment | None = None,
    memory: int | None = DEFAULT_MEMORY,
    deadline: float | None = None,
    on_start: Callable[[str], None] | None = None,
) -> Observation:
    """Run each probe in a fresh child of ``python`` and return what each saw, in the order of ``probes``.

    ``env``: the children's environment (default: this process's, see :func:`child_environment`; a given
    mapping is used as is). ``timeout``: seconds per child. ``stub``: None links the toolkit's stub
    ``libcuda.so.1`` only when the interpreter cannot load the driver's, False never, True always.
    ``on_result`` is called (from worker threads, one at a time) as each child finishes; ``on_start`` (the
    same way) with what starts: ``import torch, import xformers (then 38 probes)`` when the shared imports of
    forked probes begin, a probe's label when a fresh child starts it.

    ``share_imports`` (POSIX): probes with the same ``before`` steps, all imports, run in children forked from
    one interpreter that ran those imports (the same state a fresh child reaches, for the cost of a fork); a
    forked probe that times out or is killed by a signal is run again in a fresh interpreter, whose result is
    the one reported. False: one fresh interpreter per probe. ``stub_path``: the stub ``libcuda.so`` to use
    (default: :func:`find_stub`).

    ``run``: the containment the children run in (default: one of this call's own, with ``memory`` bytes
    for each child and ``deadline`` seconds for the whole call); every process started is gone when this
    returns (or, with ``run``, when ``run`` ends). A given ``env`` is filtered through the allow-list too."""
    if run is None:
        with Containment(memory=memory, deadline=deadline) as own:
            return observe(
                python,
                probes,
                env=env,
                timeout=timeout,
                jobs=jobs,
                method=method,
                stub=stub,
                dll_dirs=dll_dirs,
                on_result=on_result,
                share_imports=share_imports,
                stub_path=stub_path,
                run=own,
            )
    if method not in METHODS:
        raise OracleError(f"unknown listing method {method!r} (one of {', '.join(METHODS)})")
    if shutil.which(python) is None and not os.path.isfile(python):
        raise OracleError("no such interpreter", path=python)
    given = child_environment() if env is None else dict(env)
    children_env = run.environment(given)
    for key in ("PYTHONUNBUFFERED", "PYTHONIOENCODING", "PYTHONDONTWRITEBYTECODE", "PYTHONPATH"):
        if key in given:
            children_env[key] = given[key]
    notes: list[str] = []
    stub_used: str | None = None
    driver: str | None = None
    elf = _ElfCache()
    lock = threading.Lock()
    workdir = Path(tempfile.mkdtemp(prefix="observe-", dir=run.root))
    if True:  # the work directory is the run's: removed with it
        if sys.platform.startswith("linux"):
            present = driver_loadable(python, children_env, run) if stub is not True else False
            driver = "present" if present else "absent"
            if not present and stub is not False:
                stub_used = stub_path or find_stub(children_env)
                if stub_used is None:
                    notes.append(
                        "no NVIDIA driver (libcuda.so.1) and no toolkit stub found (CUDA_HOME, CUDA_PATH, "
                        "/usr/local/cuda; --libcuda-stub PATH): a library that needs libcuda.so.1 is not "
                        "judged here"
                    )
                else:
                    stub_dir = workdir / "stub"
                    stub_dir.mkdir()
                    (stub_dir / "libcuda.so.1").symlink_to(stub_used)
                    previous = children_env.get("LD_LIBRARY_PATH")
                    children_env["LD_LIBRARY_PATH"] = str(stub_dir) + (f":{previous}" if previous else "")
                    driver = "stub"
                    notes.append(f"no NVIDIA driver here: libcuda.so.1 is the toolkit's stub {stub_used}")

        def started(what: str) -> None:
            if on_start is not None:
                with lock:
                    on_start(what)

        def one(number: int, probe: Probe) -> ProbeResult:
            started(probe.label)
            result = _run_one(
                python, probe, children_env, workdir, number, timeout, method, dll_dirs, elf, run
            )
            if on_result is not None:
                with lock:
                    on_result(result)
            return result

        count = max(1, min(jobs or min(DEFAULT_JOBS, os.cpu_count() or 1), len(probes) or 1))
        known: dict[int, ProbeResult] = {}
        if share_imports and os.name == "posix":
            for before, numbers in _forkable(probes).items():
                members = [(n, probes[n]) for n in numbers]
                started(
                    f"{', '.join(step.label for step in before)} (then {words.count(len(members), 'probe')})"
                )
                forked = _run_forked(
                    python, before, members, children_env, workdir, timeout, count, method, dll_dirs, elf, run
                )
                for n, result in forked.items():
                    known[n] = result
                    if on_result is not None:
                        with lock:
                            on_result(result)
        bare_imports = [
            (n, p)
            for n, p in enumerate(probes)
            if not p.before and p.step.kind is StepKind.IMPORT and n not in known
        ]
        if len(bare_imports) > BATCH_ABOVE:
            batches = _batches(bare_imports, MAX_IMPORT_INTERPRETERS)
            notes.append(
                f"{words.count(len(bare_imports), 'top-level module')} imported in "
                f"{words.count(len(batches), 'interpreter')}, one module "
                f"after another in each (more than {BATCH_ABOVE}: one interpreter each is not started)"
            )

            def batch(members: list[tuple[int, Probe]]) -> dict[int, ProbeResult]:
                got = _run_batch(python, members, children_env, workdir, timeout, method, dll_dirs, elf, run)
                if on_result is not None:
                    with lock:
                        for result in got.values():
                            on_result(result)
                return got

            with ThreadPoolExecutor(count, thread_name_prefix="cudaship-load") as pool:
                for got in pool.map(batch, batches):
                    known.update(got)
        rest = [(n, p) for n, p in enumerate(probes) if n not in known]
        if count == 1 or len(rest) <= 1:
            known.update((n, one(n, p)) for n, p in rest)
        else:
            with ThreadPoolExecutor(count, thread_name_prefix="cudaship-load") as pool:
                futures = {n: pool.submit(one, n, p) for n, p in rest}
                known.update((n, f.result()) for n, f in futures.items())
        results = [known[n] for n in range(len(probes))]
    return Observation(
        python=python,
        results=tuple(results),
        stub_libcuda=stub_used,
        driver=driver,
        method=METHODS[method],
        notes=tuple(notes),
    )


def _batches(members: list[tuple[int, Probe]], most: int) -> list[list[tuple[int, Probe]]]:
    """``members`` in at most ``most`` consecutive groups of nearly equal size."""
    size = -(-len(members) // most)
    return [members[i : i + size] for i in range(0, len(members), size)]


__all__ = ["DEFAULT_TIMEOUT", "Observation", "Probe", "ProbeResult", "Step", "observe"]
