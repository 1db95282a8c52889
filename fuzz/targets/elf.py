"""ELF host binaries: ``binary/elf.py`` read_elf (headers, sections, dynamic table, symbols)."""

from __future__ import annotations

from cudaship.binary.elf import read_elf
from fuzz._harness import Target


def run(data: bytes) -> object:
    return read_elf(data)


TARGET = Target(
    name="elf",
    summary="read_elf on nvcc-built .so files and cubins",
    run=run,
    seed_kinds=("elf",),
    modules=("binary/elf.py", "binary/_bounded.py"),
)
