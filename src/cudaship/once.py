"""``once``: a thread-safe replacement for :func:`functools.cache` for lazily loaded shared state.

``functools.cache`` keeps its dictionary consistent across threads, but two threads asking for a value not
yet cached both run the function, and each gets its own result: two copies of a knowledge table, or, for
anything with side effects (loading a library, setting ctypes ``argtypes``), a race. ``once`` runs the
function at most once per argument tuple; a concurrent caller waits for the first. A call that raises caches
nothing, so the next caller tries again (and gets the same error).
"""

from __future__ import annotations

import functools
import threading
from collections.abc import Callable, Hashable
from typing import Any, Generic, ParamSpec, TypeVar

P = ParamSpec("P")
R = TypeVar("R")


class _Once(Generic[P, R]):
    def __init__(self, fn: Callable[P, R]) -> None:
        self._fn = fn
        self._values: dict[Hashable, R] = {}
        self._lock = threading.RLock()  # re-entrant: a loader may call other ``once`` functions, or itself
        functools.update_wrapper(self, fn)

    def __call__(self, *args: P.args, **kwargs: P.kwargs) -> R:
        key: Hashable = (args, tuple(sorted(kwargs.items()))) if kwargs else args
        try:
            return self._values[key]
        except KeyError:
            pass
        with self._lock:
            if key not in self._values:
                self._values[key] = self._fn(*args, **kwargs)
            return self._values[key]

    def cache_clear(self) -> None:
        with self._lock:
            self._values.clear()

    def __repr__(self) -> str:
        return f"once({self._fn!r})"


def once(fn: Callable[P, R]) -> Callable[P, R]:
    """Decorate a pure loader so that it runs once per arguments, also under concurrent first calls."""
    wrapper: Any = _Once(fn)
    return wrapper  # type: ignore[no-any-return]
