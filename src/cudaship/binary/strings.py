"""Finding library names and runtime marker strings stored in a binary's read-only data.

A library that loads another one at run time (``dlopen("libcuda.so.1")``, ``LoadLibraryW(L"nvcuda.dll")``)
keeps the name as a NUL-terminated string in read-only data: ``.rodata`` (ELF), ``.rdata`` (PE),
``__TEXT,__cstring`` / ``__const`` (Mach-O). Windows code often uses the wide API, so PE data is also searched
for UTF-16LE names.

The scan is anchored on the extension (``.so``, ``.dll``, ``.dylib`` followed by a NUL), which Python's regex
engine finds with a fast literal search; only around each hit is the string walked back to its start. Only the
byte ranges given (the read-only data sections) are scanned, in place, so a 500 MB library with 50 MB of
``.rodata`` costs tens of milliseconds (numbers in docs/formats-host.md).
"""

from __future__ import annotations

import re
from collections.abc import Iterable

from cudaship.binary._search import Finder, open_finder
from cudaship.records.buffer import Buffer

#: The longest library name (or path) kept; longer strings are not library names a loader is given.
MAX_LIBRARY_NAME = 255

_ASCII_ANCHOR = re.compile(rb"\.(?:so(?:\.[0-9]{1,9}){0,4}|[dD][lL][lL]|dylib)\x00")
_WIDE_ANCHOR = re.compile(rb"\.\x00(?:[dD]\x00[lL]\x00[lL]\x00|s\x00o\x00|d\x00y\x00l\x00i\x00b\x00)\x00\x00")
#: A library file name, optionally behind a directory path; no spaces, no format characters.
_LIBRARY_NAME = re.compile(
    r"(?:[A-Za-z]:)?(?:[A-Za-z0-9_.+\-]*[/\\])*"
    r"[A-Za-z0-9_+\-][A-Za-z0-9_.+\-]*\.(?:so(?:\.[0-9]+)*|[dD][lL][lL]|dylib)"
)
_NAME_BYTES = frozenset(b"ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789_.+-/\\:")

#: Strings that only the CUDA runtime itself stores (names it resolves or registers through): present in the
#: read-only data of a library that links the runtime statically, absent from one importing libcudart.
#: Verified on nvcc 13.0 ``-cudart static`` vs ``-cudart shared`` builds (docs/formats-host.md).
CUDART_MARKERS: tuple[str, ...] = ("cudaGetExportTable", "__cudaRegisterFatBinary")


def library_names(
    buf: Buffer,
    ranges: Iterable[tuple[int, int]],
    *,
    wide: bool = False,
    skip: Iterable[int] = (),
) -> tuple[str, ...]:
    """Sorted unique library names stored as NUL-terminated strings in ``buf[start:end]`` for each range.

    With ``wide`` also UTF-16LE strings (PE). ``skip`` holds file offsets of strings that are not data but
    tables (a PE's import directory DLL names live in ``.rdata`` too). Ranges are clipped to the buffer.
    """
    skipped = frozenset(skip)
    size = len(buf)
    found: set[str] = set()
    for start, end in ranges:
        start, end = max(0, start), min(size, end)
        if start >= end:
            continue
        for match in _ASCII_ANCHOR.finditer(buf, start, end):
            name = _ascii_back(buf, start, match.end() - 1, skipped)
            if name is not None:
                found.add(name)
        if wide:
            for match in _WIDE_ANCHOR.finditer(buf, start, end):
                name = _wide_back(buf, start, match.end() - 2)
                if name is not None:
                    found.add(name)
    return tuple(sorted(found))


def runtime_markers(
    buf: Buffer, ranges: Iterable[tuple[int, int]], *, skip: Iterable[int] = ()
) -> tuple[str, ...]:
    """Which of :data:`CUDART_MARKERS` are stored as whole NUL-terminated strings in the ranges (not at the
    offsets in ``skip``: import hint/name entries).

    Each marker with its NUL is searched as one literal (``memmem`` where available, see
    :mod:`cudaship.binary._search`): a long literal is skipped through several times faster than any regex
    runs, and the search stops at the first occurrence that counts.
    """
    skipped = frozenset(skip)
    size = len(buf)
    spans = [(max(0, start), min(size, end)) for start, end in ranges]
    found: list[str] = []
    for marker in CUDART_MARKERS:
        needle = marker.encode("ascii") + b"\0"
        with open_finder(buf, needle) as finder:
            if _first_whole_string(buf, finder, needle, spans, skipped):
                found.append(marker)
    return tuple(sorted(found))


def _first_whole_string(
    buf: Buffer, finder: Finder, needle: bytes, spans: list[tuple[int, int]], skip: frozenset[int]
) -> bool:
    """Whether ``needle`` occurs inside a span as a whole string: at the span's start or after a NUL."""
    for start, end in spans:
        pos, stop = start, end - len(needle) + 1
        while pos < stop:
            at = finder.find(pos, stop)
            if at < 0:
                break
            if (at == start or buf[at - 1] == 0) and at not in skip:
                return True
            pos = at + 1
    return False


def _ascii_back(buf: Buffer, lower: int, nul: int, skip: frozenset[int]) -> str | None:
    """The library name ending at the NUL at ``nul``, or None when what ends there is not one.

    The walk goes back over name characters; what stops it says what the string is:

    - a NUL or the start of the range: a whole C string. It counts when it is a plausible name
      (:func:`_plausible`); one that is not, but is a ``lib`` name behind one or two stray characters, is that
      name glued to the end of a constant (``4Blibmlx5.so`` after NULs in libnccl.so.2: ``libmlx5.so``);
    - another byte that is not printable text (the end of a binary constant; strings in ``.rdata`` may follow
      constants directly): the name from there, or from its ``lib`` behind one stray character;
    - a printable character that is no name character (a space, ``%``, a quote): the tail of a text, not a
      name stored on its own (``%s-%s.so`` in libnccl.so.2 is no library ``s.so``). Only a ``lib`` name
      there is one, at most one character in: the linker merges a string into the tail of a longer one that
      ends the same way (libtorch_cuda.so's ``... skipping registration olibcuda.so.1``).
    """
    begin = max(lower, nul - MAX_LIBRARY_NAME - 1)
    chunk = bytes(buf[begin:nul])
    at = len(chunk)
    while at > 0 and chunk[at - 1] in _NAME_BYTES:
        at -= 1
    if at == 0 and begin != lower:
        return None  # longer than any library name
    if begin + at in skip:
        return None
    text = chunk[at:].decode("ascii")
    if not _LIBRARY_NAME.fullmatch(text):
        return None
    before = chunk[at - 1] if at > 0 else 0
    if before == 0:
        return text if _plausible(text) else _after_stray(text, 2)
    if before < 0x20 or before >= 0x7F:
        return _after_stray(text, 1) or (text if _plausible(text) else None)
    if text.startswith("lib") and _plausible(text):
        return text
    return _after_stray(text, 1)


def _plausible(text: str) -> bool:
    """A name a loader could be given: its file name's stem (before ``.so``/``.dll``/``.dylib``) has two
    characters or more and starts with a letter or ``_`` (``s.so``, ``4Blibmlx5.so`` and ``-x.so`` do not)."""
    base = re.split(r"[/\\]", text)[-1]
    stem = re.sub(r"\.(?:so(?:\.[0-9]+)*|[dD][lL][lL]|dylib)$", "", base)
    return len(stem) >= 2 and (stem[0].isalpha() or stem[0] == "_")


def _after_stray(text: str, most: int) -> str | None:
    """The ``lib`` name behind at most ``most`` stray characters of ``text`` (a bare name: a Unix library a
    program loads by name starts with ``lib``, so that is where it starts), else None. ``lib`` must be
    followed by a letter: ``xlib.so`` and ``mylibrary.so`` are names of their own, never cut."""
    if "/" in text or "\\" in text:
        return None
    for cut in range(1, most + 1):
        rest = text[cut:]
        if rest.startswith("lib") and len(rest) > 3 and rest[3].isalpha() and _plausible(rest):
            return rest
    return None


def _wide_back(buf: Buffer, lower: int, terminator: int) -> str | None:
    """The UTF-16LE name ending at ``terminator`` (its ``00 00``): walk back one code unit at a time."""
    begin = max(lower, terminator - 2 * (MAX_LIBRARY_NAME + 1))
    chunk = bytes(buf[begin:terminator])
    chars: list[str] = []
    at = len(chunk) - 2
    while at >= 0 and chunk[at + 1] == 0 and chunk[at] in _NAME_BYTES:
        chars.append(chr(chunk[at]))
        at -= 2
    if at < 0 and begin != lower:
        return None  # longer than any library name
    text = "".join(reversed(chars))
    return text if _LIBRARY_NAME.fullmatch(text) and _plausible(text) else None
