"""What every reader takes: a buffer of bytes, never a path and never a copy of a whole file."""

from __future__ import annotations

import mmap

#: bytes in memory, a slice of them, or a mapped file (a stored wheel member, a spilled inflated one)
Buffer = bytes | bytearray | memoryview | mmap.mmap
