"""PTX text: ``binary/ptx.py`` looks_like_ptx / read_ptx."""

from __future__ import annotations

from cudaship.binary.ptx import looks_like_ptx, read_ptx
from fuzz._harness import Target


def run(data: bytes) -> object:
    looks_like_ptx(data)
    return read_ptx(data)


TARGET = Target(
    name="ptx",
    summary="read_ptx on nvcc -ptx output",
    run=run,
    seed_kinds=("ptx",),
    modules=("binary/ptx.py",),
)
