"""COFF import libraries and static archives: ``binary/coff_importlib.py`` read_import_library."""

from __future__ import annotations

from cudaship.binary.coff_importlib import read_import_library
from fuzz._harness import Target


def run(data: bytes) -> object:
    return read_import_library(data)


TARGET = Target(
    name="coff",
    summary="read_import_library on dlltool/llvm-dlltool .lib files and nvcc -lib archives",
    run=run,
    seed_kinds=("coff",),
    modules=("binary/coff_importlib.py", "binary/_bounded.py"),
)
