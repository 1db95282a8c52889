"""What a fuzz target is, and the contract every input is held to.

A target is one reader (or archive path) of cudaship. For each input it must either return its records or
raise :class:`cudaship.errors.CudashipError` with a one-line message; any other exception, a message over
several lines, a run past the time ceiling or an allocation past the memory ceiling is a *finding*.

Nothing in this module imports cudaship at import time, so the atheris engine can instrument cudaship's
modules when the target module imports them.
"""

from __future__ import annotations

import importlib
import signal
import time
import tracemalloc
from collections.abc import Callable, Iterable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from types import FrameType

#: Every target, in the order of the issue (binary readers, toolkit archives, policy, wheel/inspect, program).
TARGET_NAMES = (
    "elf",
    "pe",
    "macho",
    "fatbin",
    "cubin",
    "ptx",
    "coff",
    "extract",
    "manifest",
    "policy",
    "wheel",
    "metadata",
    "envsource",
    "wheelhouse",
    "index",
    "inspect",
    "program",
    "archive",
    "loaders",
    "writer",
    "render",
)

#: Per-input CPU-time ceiling (seconds) that every target must hold, for inputs up to 2 MiB; larger inputs
#: get one more second per MiB (the work is linear: a 16 MiB file of a million empty fatbin containers is a
#: million records).
TIME_CEILING = 2.0


def time_ceiling(size: int) -> float:
    """The CPU-time ceiling for an input of ``size`` bytes: 2 s, or 1 s per MiB past 2 MiB."""
    return max(TIME_CEILING, size / (1 << 20))


#: A run this long is a hang: the engine interrupts it and reports a finding.
HANG_LIMIT = 10.0
#: tracemalloc makes allocation-heavy inputs this many times slower; the hang limit stretches with it.
TRACEMALLOC_SLOWDOWN = 10
#: The mutation engine interrupts hangs with SIGALRM; under atheris, libFuzzer owns SIGALRM (-timeout).
USE_ALARM = True


@dataclass(frozen=True)
class MemoryCeiling:
    """Peak Python allocation allowed for an input of ``n`` bytes: ``factor * n + constant``."""

    factor: int = 10
    constant: int = 16 << 20

    def bound(self, size: int) -> int:
        return self.factor * size + self.constant

    def describe(self) -> str:
        return f"{self.factor}x size + {self.constant >> 20} MiB"


@dataclass(frozen=True)
class Target:
    """One fuzz target: how to run an input, where its seeds come from, which modules it covers."""

    name: str
    summary: str
    run: Callable[[bytes], object]
    seed_kinds: tuple[str, ...]
    modules: tuple[str, ...]  #: cudaship source files (relative to src/cudaship) whose coverage is reported
    memory: MemoryCeiling = MemoryCeiling()
    max_seed_size: int = 4 << 20


def load_target(name: str) -> Target:
    if name not in TARGET_NAMES:
        raise KeyError(f"unknown fuzz target {name!r}; known: {', '.join(TARGET_NAMES)}")
    module = importlib.import_module(f"fuzz.targets.{name}")
    target: Target = module.TARGET
    return target


class Hang(Exception):
    """An input ran past :data:`HANG_LIMIT`."""


class Finding(Exception):
    """An input broke the contract; ``kind`` is crash, hang, multiline, slow or memory."""

    def __init__(self, kind: str, detail: str) -> None:
        super().__init__(f"{kind}: {detail}")
        self.kind = kind
        self.detail = detail


@contextmanager
def time_limit(seconds: float) -> Iterator[None]:
    """Raise :class:`Hang` in the main thread after ``seconds`` (SIGALRM; no-op where unavailable)."""
    if not USE_ALARM or not hasattr(signal, "setitimer"):
        yield
        return

    def on_alarm(signum: int, frame: FrameType | None) -> None:
        raise Hang(f"still running after {seconds:g} s")

    previous = signal.signal(signal.SIGALRM, on_alarm)
    signal.setitimer(signal.ITIMER_REAL, seconds)
    try:
        yield
    finally:
        signal.setitimer(signal.ITIMER_REAL, 0)
        signal.signal(signal.SIGALRM, previous)


def outcome(target: Target, data: bytes, hang_limit: float = HANG_LIMIT) -> str:
    """Run one input; return ``"ok"`` or the error's message. Raise :class:`Finding` on a broken contract."""
    from cudaship.errors import CudashipError

    try:
        with time_limit(hang_limit):
            target.run(data)
    except CudashipError as e:
        text = str(e)
        if "\n" in text or not text.strip():
            raise Finding("multiline", f"{type(e).__name__} message is not one line: {text!r}") from e
        return text
    except Hang as e:
        raise Finding("hang", str(e)) from e
    except RecursionError as e:
        raise Finding("crash", f"RecursionError: {e}") from e
    except MemoryError as e:
        raise Finding("memory", "MemoryError") from e
    except Exception as e:
        raise Finding("crash", f"{type(e).__name__}: {e}") from e
    return "ok"


@dataclass
class Measurement:
    """Ceilings observed over a set of inputs."""

    inputs: int = 0
    max_seconds: float = 0.0
    slowest_size: int = 0
    max_peak: int = 0  #: largest tracemalloc peak (bytes)
    worst_excess: float = 0.0  #: largest peak / bound(size) seen (<= 1 holds the ceiling)
    worst_peak_size: int = 0
    over_time: int = 0
    over_memory: int = 0


def measure(target: Target, inputs: Iterable[bytes], *, memory: bool = True) -> Measurement:
    """Run every input twice: once timed (CPU time), once under tracemalloc for its peak allocation.

    Raises :class:`Finding` for the first input that breaks the contract (exception, hang).
    """
    m = Measurement()
    for data in inputs:
        m.inputs += 1
        start = time.process_time()  # CPU time: the ceiling is about our work, not the machine's load
        outcome(target, data)
        elapsed = time.process_time() - start
        if elapsed > m.max_seconds:
            m.max_seconds, m.slowest_size = elapsed, len(data)
        if elapsed > time_ceiling(len(data)):
            m.over_time += 1
        if memory:
            peak = peak_allocation(target, data)
            m.max_peak = max(m.max_peak, peak)
            excess = peak / target.memory.bound(len(data))
            if excess > m.worst_excess:
                m.worst_excess, m.worst_peak_size = excess, len(data)
            if excess > 1:
                m.over_memory += 1
    return m


def peak_allocation(target: Target, data: bytes) -> int:
    """Peak bytes Python allocated while running one input (the input itself not counted)."""
    tracemalloc.start()
    try:
        tracemalloc.reset_peak()
        base = tracemalloc.get_traced_memory()[0]
        outcome(target, data, HANG_LIMIT * TRACEMALLOC_SLOWDOWN)
        return max(0, tracemalloc.get_traced_memory()[1] - base)
    finally:
        tracemalloc.stop()
