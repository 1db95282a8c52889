"""Mach-O host binaries, thin and universal: ``binary/macho.py`` read_macho_slices."""

from __future__ import annotations

from cudaship.binary.macho import read_macho_slices
from fuzz._harness import Target


def run(data: bytes) -> object:
    return read_macho_slices(data)


TARGET = Target(
    name="macho",
    summary="read_macho_slices on clang/ld64.lld dylibs (arm64, x86_64, fat) and a macOS wheel's",
    run=run,
    seed_kinds=("macho",),
    modules=("binary/macho.py", "binary/_bounded.py"),
)
