"""Fatbin containers anywhere in a file: ``binary/devicescan.py`` find_containers / read_device_file, and
``fatbin.entry_payload`` (bounded LZ4/ZSTD decompression) on every entry found."""

from __future__ import annotations

import contextlib

from cudaship.binary.devicescan import detect_device_format, read_device_file, scan_containers
from cudaship.binary.fatbin import entry_payload
from cudaship.errors import CudashipError
from fuzz._harness import MemoryCeiling, Target


def run(data: bytes) -> object:
    scan = scan_containers(data)
    entries = [e for c in scan.containers for e in c.entries]
    if detect_device_format(data) is not None:
        with contextlib.suppress(CudashipError):
            entries.extend(read_device_file(data).entries)
    for entry in entries[:64]:
        with contextlib.suppress(CudashipError):
            entry_payload(data, entry)
    return scan


TARGET = Target(
    name="fatbin",
    summary="scan_containers, read_device_file and entry_payload on nvcc fatbins, .so and .a files",
    run=run,
    seed_kinds=("fatbin",),
    modules=("binary/devicescan.py", "binary/fatbin.py", "binary/decompress.py"),
    # a compressed entry may inflate up to 256x its stored bytes + 1 MiB (binary/decompress.py MAX_RATIO)
    memory=MemoryCeiling(factor=256, constant=16 << 20),
)
