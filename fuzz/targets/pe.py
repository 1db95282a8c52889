"""PE/COFF host binaries: ``binary/pe.py`` read_pe (imports, delay imports, exports)."""

from __future__ import annotations

from cudaship.binary.pe import read_pe
from fuzz._harness import Target


def run(data: bytes) -> object:
    return read_pe(data)


TARGET = Target(
    name="pe",
    summary="read_pe on mingw-w64 / clang+lld-link DLLs (x86_64, x86, arm64)",
    run=run,
    seed_kinds=("pe",),
    modules=("binary/pe.py", "binary/_bounded.py"),
)
