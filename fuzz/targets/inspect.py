"""The inspect dispatch: ``inspection/dispatch.py`` inspect_buffer with --details, on a memoryview (as a
stored wheel member is read). inspect_buffer never raises: it turns a reader's unexpected exception into a
report error starting "cannot read (" so one bad file cannot hide the others. Such a report is a bug hidden,
so this harness treats it as a crash."""

from __future__ import annotations

from cudaship.inspection.dispatch import inspect_buffer
from fuzz._harness import MemoryCeiling, Target


class HiddenReaderBug(Exception):
    """inspect_buffer caught a non-cudaship exception from a reader."""


def run(data: bytes) -> object:
    report = inspect_buffer(memoryview(data), "fuzz-input", details=True)
    if report.error is not None and report.error.startswith("cannot read ("):
        raise HiddenReaderBug(report.error)
    return report


TARGET = Target(
    name="inspect",
    summary="inspect_buffer(details=True) on every binary seed (ELF, PE, Mach-O, fatbin, cubin, PTX, .lib)",
    run=run,
    seed_kinds=("elf", "pe", "macho", "fatbin", "cubin", "ptx", "coff"),
    modules=(
        "inspection/dispatch.py",
        "analysis/linkage.py",
        "binary/strings.py",
        "binary/elf.py",
        "binary/pe.py",
        "binary/macho.py",
        "binary/coff_importlib.py",
        "binary/devicescan.py",
        "binary/fatbin.py",
        "binary/cubin.py",
        "binary/ptx.py",
        "binary/decompress.py",
    ),
    memory=MemoryCeiling(factor=256, constant=16 << 20),  # --details decompresses entries (see fatbin)
    max_seed_size=2 << 20,
)
