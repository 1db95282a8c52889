"""Cubins (device ELF): ``binary/cubin.py`` read_cubin (SM, variant, kernels, toolkit notes)."""

from __future__ import annotations

from cudaship.binary.cubin import read_cubin
from fuzz._harness import Target


def run(data: bytes) -> object:
    return read_cubin(data)


TARGET = Target(
    name="cubin",
    summary="read_cubin on nvcc -cubin output (sm_90a, sm_100f, -rdc)",
    run=run,
    seed_kinds=("cubin",),
    modules=("binary/cubin.py",),
)
