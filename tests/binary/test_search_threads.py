"""The native search is loaded once even when scan threads ask for it at the same time, and it does not share
ctypes function objects (and their ``argtypes``) with any other code."""

from __future__ import annotations

import ctypes
import threading

import pytest

from cudaship.binary import _search
from cudaship.binary._search import native_available, open_finder

THREADS = 8


def test_concurrent_first_use_loads_once(monkeypatch: pytest.MonkeyPatch) -> None:
    """Every thread calls ``_load_native`` while the first load is still running: one load, one object."""
    monkeypatch.setattr(_search, "_native", None)
    real = _search._Native
    entered = []
    all_entered = threading.Event()
    entered_lock = threading.Lock()

    class Counting(real):  # type: ignore[misc, valid-type]
        def __init__(self) -> None:
            with entered_lock:
                entered.append(threading.get_ident())
                if len(entered) == THREADS:
                    all_entered.set()
            # without the lock every thread gets here; with it, the others wait for this one
            all_entered.wait(0.5)
            super().__init__()

    monkeypatch.setattr(_search, "_Native", Counting)
    start = threading.Barrier(THREADS)
    results: list[object] = []

    def work() -> None:
        start.wait()
        results.append(_search._load_native())

    threads = [threading.Thread(target=work) for _ in range(THREADS)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert len(entered) == 1
    assert len(results) == THREADS
    assert all(r is results[0] for r in results)


@pytest.mark.skipif(not native_available(), reason="no usable memmem in this C library")
def test_foreign_argtypes_on_pythonapi_do_not_break_the_finder(monkeypatch: pytest.MonkeyPatch) -> None:
    """Another module (or thread) giving ``ctypes.pythonapi.PyObject_GetBuffer`` its own ``argtypes`` must not
    change ours (the race of issue 12: ``expected LP_PyBuffer instance instead of pointer to PyBuffer``)."""
    monkeypatch.setattr(_search, "_native", None)

    class OtherBuffer(ctypes.Structure):
        _fields_ = [("buf", ctypes.c_void_p)]

    shared = ctypes.pythonapi.PyObject_GetBuffer
    monkeypatch.setattr(shared, "argtypes", [ctypes.py_object, ctypes.POINTER(OtherBuffer), ctypes.c_int])
    data = b"x" * 1000 + b"needle" + b"y" * 10
    with open_finder(data, b"needle", native=True) as finder:
        assert finder.releases_gil
        assert finder.find(0, len(data)) == 1000
    # and the other code's setting is still its own
    assert shared.argtypes[1] is ctypes.POINTER(OtherBuffer)
