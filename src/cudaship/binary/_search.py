"""Fast search for a short byte string in a large buffer, for the device-code scanner.

Python's ``bytes.find`` / ``mmap.find`` hold the GIL and run a Horspool-style loop at about 1 GB/s.
Where the C library has ``memmem`` (glibc, musl, macOS, the BSDs) it is called through :mod:`ctypes` on the
buffer's own memory (its address taken with ``PyObject_GetBuffer``, so nothing is copied and the buffer cannot
be closed or resized while the export is held). That is about 1.6x faster per byte on a 546 MB library, and
``ctypes`` releases the GIL during the call, so several threads search disjoint parts of one buffer at once.

Elsewhere (Windows, PyPy, a buffer that is not one contiguous run of bytes) the buffer's own ``find``, or a
compiled regex for objects without one, is used: same results, only slower and without parallelism.

Use :func:`open_finder` as a context manager; the finder it yields raises once the context has ended, so a
released buffer is never read.

Thread safety: the native functions are loaded once, under a lock (scan workers call :func:`open_finder` at
the same time on first use), and they are private function pointers (``CDLL(...)["name"]`` makes a new one)
whose ``argtypes`` no other code shares: setting ``argtypes`` on the cached ``ctypes.pythonapi`` attributes
would let one thread's ``Py_buffer`` class replace another's mid-call (``ArgumentError: expected LP_PyBuffer
instance``).
"""

from __future__ import annotations

import ctypes
import re
import sys
import threading
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from typing import Any

from cudaship import envvars
from cudaship.records.buffer import Buffer

#: Set to 1 to never use the C library's ``memmem`` (for comparing both paths).
DISABLE_ENV = "CUDASHIP_NO_MEMMEM"


class _Native:
    """``memmem`` and the buffer-protocol calls, loaded once; None fields when unavailable."""

    def __init__(self) -> None:
        self.memmem: Callable[..., Any] | None = None
        #: the same function called without releasing the GIL (``ctypes.PyDLL``), for short searches
        self.memmem_held: Callable[..., Any] | None = None
        self.get_buffer: Callable[..., int] | None = None
        self.release_buffer: Callable[..., None] | None = None
        self.buffer_type: Any = None
        self.byref: Callable[..., Any] | None = None
        try:
            self._load()
        except (ImportError, OSError, AttributeError, TypeError):  # pragma: no cover - platform dependent
            self.memmem = None

    def _load(self) -> None:
        if sys.platform == "win32" or sys.implementation.name != "cpython":
            return  # pragma: no cover - the Windows C runtime has no memmem; PyPy has no pythonapi

        class PyBuffer(ctypes.Structure):
            # CPython's Py_buffer (Include/pybuffer.h), stable since 3.3.
            _fields_ = [
                ("buf", ctypes.c_void_p),
                ("obj", ctypes.c_void_p),
                ("len", ctypes.c_ssize_t),
                ("itemsize", ctypes.c_ssize_t),
                ("readonly", ctypes.c_int),
                ("ndim", ctypes.c_int),
                ("format", ctypes.c_char_p),
                ("shape", ctypes.c_void_p),
                ("strides", ctypes.c_void_p),
                ("suboffsets", ctypes.c_void_p),
                ("internal", ctypes.c_void_p),
            ]

        # Indexing (not attribute access) gives function pointers of our own: attributes of a CDLL are cached
        # and shared with any other code that uses them, including their argtypes.
        memmem = ctypes.CDLL(None)["memmem"]
        memmem_held = ctypes.PyDLL(None)["memmem"]
        for function in (memmem, memmem_held):
            function.restype = ctypes.c_void_p
            function.argtypes = [ctypes.c_void_p, ctypes.c_size_t, ctypes.c_char_p, ctypes.c_size_t]
        get_buffer = ctypes.pythonapi["PyObject_GetBuffer"]
        get_buffer.restype = ctypes.c_int
        get_buffer.argtypes = [ctypes.py_object, ctypes.POINTER(PyBuffer), ctypes.c_int]
        release_buffer = ctypes.pythonapi["PyBuffer_Release"]
        release_buffer.restype = None
        release_buffer.argtypes = [ctypes.POINTER(PyBuffer)]
        # A self-test on a known buffer: a libc whose memmem misbehaves is not used.
        probe = b"\x00abc\x50\xed\x55\xba\x50\xed"
        view = PyBuffer()
        if get_buffer(probe, ctypes.byref(view), 0) != 0:  # pragma: no cover - bytes always export
            return
        try:
            at = memmem(view.buf + 1, len(probe) - 1, b"\x50\xed\x55\xba", 4)
            ok = (
                at is not None
                and at - view.buf == 4
                and memmem(view.buf + 5, 5, b"\x50\xed\x55\xba", 4) is None
                and memmem_held(view.buf, len(probe), b"\x50\xed\x55\xba", 4) == at
            )
        finally:
            release_buffer(ctypes.byref(view))
        if not ok:  # pragma: no cover - defensive
            return
        self.memmem, self.memmem_held = memmem, memmem_held
        self.get_buffer, self.release_buffer = get_buffer, release_buffer
        self.buffer_type, self.byref = PyBuffer, ctypes.byref


_native: _Native | None = None
_native_lock = threading.Lock()


def _load_native() -> _Native:
    """The native functions, loaded by the first caller; concurrent first callers wait for that one."""
    global _native
    loaded = _native
    if loaded is not None:
        return loaded
    with _native_lock:
        if _native is None:
            _native = _Native()
        return _native


def native_available() -> bool:
    """Whether the C library's ``memmem`` can be used here (and is not disabled by ``CUDASHIP_NO_MEMMEM``)."""
    return envvars.get("CUDASHIP_NO_MEMMEM") in (None, "", "0") and _load_native().memmem is not None


class Finder:
    """``find(pos, stop)``: the first offset ``h`` with ``pos <= h < stop`` where ``needle`` starts in the
    buffer (the whole needle inside the buffer), or -1. ``releases_gil`` says whether concurrent calls from
    several threads really run at once."""

    releases_gil = False

    def __init__(self, buf: Buffer, needle: bytes) -> None:
        self.size = len(buf)
        self._needle = needle
        self._open = True

    def find(self, pos: int, stop: int) -> int:
        if not self._open:
            raise ValueError("finder used after its buffer was released")
        pos = max(pos, 0)
        end = min(self.size, stop + len(self._needle) - 1)
        if end - pos < len(self._needle):
            return -1
        return self._search(pos, end)

    def _search(self, pos: int, end: int) -> int:
        """The first start of the needle in ``[pos, end)``, or -1; ``end - pos`` is at least its length."""
        raise NotImplementedError

    def close(self) -> None:
        self._open = False


class _PortableFinder(Finder):
    """The buffer's own ``find`` (bytes, mmap), or a regex over any other buffer."""

    def __init__(self, buf: Buffer, needle: bytes) -> None:
        super().__init__(buf, needle)
        if isinstance(buf, memoryview) and not buf.c_contiguous:
            buf = buf.tobytes()  # strided views are rare; a regex cannot search one
        find = getattr(buf, "find", None)
        if find is not None:
            self._find: Callable[[bytes, int, int], int] = find
        else:
            pattern = re.compile(re.escape(needle))

            def search(_needle: bytes, pos: int, end: int) -> int:
                match = pattern.search(buf, pos, end)
                return -1 if match is None else int(match.start())

            self._find = search

    def _search(self, pos: int, end: int) -> int:
        return int(self._find(self._needle, pos, end))


class _MemmemFinder(Finder):
    """``memmem`` on the buffer's memory. The first ``HELD`` bytes of each search are searched holding the GIL
    and only the rest releases it: a scan of densely packed containers makes tens of thousands of searches
    that each end a few bytes on, and releasing the GIL for each would hand it to another scan thread every
    time (a context switch per container: 20% more CPU on 31,000 containers)."""

    releases_gil = True
    HELD = 64 << 10

    def __init__(self, buf: Buffer, needle: bytes, native: _Native, base: int) -> None:
        super().__init__(buf, needle)
        assert native.memmem is not None
        assert native.memmem_held is not None
        self._memmem = native.memmem
        self._memmem_held = native.memmem_held
        self._base = base

    def _search(self, pos: int, end: int) -> int:
        n = len(self._needle)
        if end - pos > self.HELD + n:
            # the first HELD start positions, holding the GIL; a needle starting inside counts whole
            at = self._memmem_held(self._base + pos, self.HELD + n - 1, self._needle, n)
            if at is not None:
                return int(at) - self._base
            pos += self.HELD
            at = self._memmem(self._base + pos, end - pos, self._needle, n)
        else:
            at = self._memmem_held(self._base + pos, end - pos, self._needle, n)
        return -1 if at is None else int(at) - self._base


@contextmanager
def open_finder(buf: Buffer, needle: bytes, *, native: bool | None = None) -> Iterator[Finder]:
    """A :class:`Finder` for ``needle`` in ``buf``, valid inside the ``with`` block.

    ``native``: None uses ``memmem`` where available, False never does (the portable path), True insists
    (raises ``RuntimeError`` where it cannot be used; for tests and benchmarks).
    """
    if not needle:
        raise ValueError("empty needle")
    lib = _load_native()
    use = native_available() if native is None else native
    if use and lib.memmem is not None:
        assert lib.get_buffer is not None and lib.release_buffer is not None and lib.byref is not None
        view = lib.buffer_type()
        exported = False
        try:
            exported = lib.get_buffer(buf, lib.byref(view), 0) == 0
        except (BufferError, TypeError, ValueError):
            exported = False  # not one contiguous run of bytes: the portable path below
        if exported and view.len != len(buf):
            lib.release_buffer(lib.byref(view))  # items larger than a byte: not ours to search
            exported = False
        if exported:
            finder: Finder = _MemmemFinder(buf, needle, lib, int(view.buf or 0))
            try:
                yield finder
            finally:
                finder.close()
                lib.release_buffer(lib.byref(view))
            return
    if native:
        raise RuntimeError("memmem cannot be used for this buffer here")
    finder = _PortableFinder(buf, needle)
    try:
        yield finder
    finally:
        finder.close()
