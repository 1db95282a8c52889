"""Waiting on a future the way a command must: answering Ctrl-C at once.

The kernel gives a process's SIGINT to any thread that does not block it (an audit's requirements thread, a
wheel's thread): Python's flag is then set, but a wait on a lock in the main thread is not woken, and the
KeyboardInterrupt came only when the awaited work ended (a batch on a worker process can take minutes: a
500 MB library). :func:`wait_interruptibly` looks for it every :data:`INTERRUPT_POLL` seconds instead.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, TypeVar

if TYPE_CHECKING:
    from concurrent.futures import Future

_T = TypeVar("_T")

#: Seconds between two looks for Ctrl-C by a thread waiting on a future.
INTERRUPT_POLL = 0.25


def wait_interruptibly(future: Future[_T]) -> _T:
    """``future.result()``, looking for a pending Ctrl-C every :data:`INTERRUPT_POLL` seconds meanwhile (in
    the main thread a KeyboardInterrupt is raised at the next look, whichever thread took the signal)."""
    from concurrent.futures import wait  # start-up time: only where a pool runs (docs/performance.md)

    while not wait([future], timeout=INTERRUPT_POLL).done:
        pass
    return future.result()
