"""Bounds-checked reads from a buffer, shared by the host-binary readers (ELF, PE, Mach-O, COFF import
libraries).

Every offset and length a reader takes from a file goes through :class:`Bounded`, which raises a one-line
:class:`~cudaship.errors.BinaryFormatError` naming the structure when it would run past the end of the file.
The buffer is never copied: ``struct.unpack_from`` reads in place and only the bytes asked for are sliced out,
so an ``mmap`` of a 500 MB library stays untouched except for the headers and tables actually read.
"""

from __future__ import annotations

import re
import struct

from cudaship.errors import BinaryFormatError
from cudaship.records.buffer import Buffer

_NUL = re.compile(b"\x00")

#: Longest name any reader accepts (symbol names, library names, section names). C++ symbol names of heavily
#: templated code reach a few KiB; 64 KiB bounds the work on a string table with no NUL in it.
MAX_NAME = 65536
#: Bytes of names a reader may produce and of table entries it may visit, per byte of input, plus
#: :data:`WORK_FLOOR`. Real binaries stay far below (every name and entry is read about once: at most about
#: 1x the file); entries that share one name or one table (a thousand import descriptors pointing at one
#: lookup table, a million symbols naming one 64 KiB string) would otherwise cost quadratic time and memory.
WORK_FACTOR = 4
WORK_FLOOR = 1 << 20


def work_budget(size: int) -> int:
    """The most bytes a reader may produce or visit for an input of ``size`` bytes."""
    return WORK_FACTOR * size + WORK_FLOOR


class Bounded:
    """A read-only view of ``buf`` that checks every read against its length.

    ``what`` names the format in error messages ("ELF", "PE", ...). Works on ``bytes``, ``bytearray``,
    ``memoryview`` and ``mmap`` alike (``memoryview`` has no ``find``, so NULs are found with a regex).
    """

    __slots__ = ("budget", "buf", "size", "spent", "what")

    def __init__(self, buf: Buffer, what: str) -> None:
        self.buf = buf
        self.size = len(buf)
        self.what = what
        self.spent = 0  #: bytes of names produced and table entries visited so far
        self.budget = work_budget(self.size)

    def spend(self, n: int, field: str) -> None:
        """Count ``n`` more bytes produced or visited; past the budget, raise (shared references)."""
        self.spent += n
        if self.spent > self.budget:
            raise self.fail(
                f"{field}: names and table entries read add up to more than {self.budget} bytes for a "
                f"{self.size} byte file (entries sharing one name or table?)"
            )

    def fail(self, message: str) -> BinaryFormatError:
        return BinaryFormatError(f"{self.what}: {one_line(message)}")

    def check(self, offset: int, length: int, field: str) -> None:
        """Raise unless ``length`` bytes at ``offset`` lie inside the buffer."""
        if offset < 0 or length < 0 or offset + length > self.size:
            raise self.fail(
                f"{field} at offset {offset:#x} ({length} bytes) runs past the end of the file "
                f"({self.size} bytes): truncated or corrupt"
            )

    def unpack(self, st: struct.Struct, offset: int, field: str) -> tuple[int, ...]:
        self.check(offset, st.size, field)
        values: tuple[int, ...] = st.unpack_from(self.buf, offset)
        return values

    def read(self, offset: int, length: int, field: str) -> bytes:
        self.check(offset, length, field)
        return bytes(self.buf[offset : offset + length])

    def cstring(self, offset: int, end: int, field: str) -> str:
        """The NUL-terminated string at ``offset``, which must end before ``end`` (a table's end)."""
        end = min(end, self.size, offset + MAX_NAME)
        if offset < 0 or offset >= end:
            raise self.fail(f"{field}: string offset {offset:#x} lies outside its table")
        found = _NUL.search(self.buf, offset, end)
        if found is None:
            raise self.fail(f"{field}: string at offset {offset:#x} is not NUL-terminated")
        self.spend(found.start() - offset + 1, field)
        return decode(bytes(self.buf[offset : found.start()]))


#: Characters a terminal may break a line at (names read from a file can hold any of them).
_LINE_BREAKING = re.compile("[\x00-\x1f\x7f\x85\u2028\u2029]")


def one_line(text: str) -> str:
    """``text`` with control and line-breaking characters shown as escapes, so an error stays one line."""
    return _LINE_BREAKING.sub(lambda m: ascii(m.group())[1:-1], text)


def decode(raw: bytes) -> str:
    """Names in binaries are bytes; UTF-8 covers every real one, anything else is shown replaced."""
    return raw.decode("utf-8", errors="replace")
