"""Wheels as zip archives (read through the archive layer, fuzzed on its own by the ``archive`` target):
``wheel/archive.py`` (WheelArchive: members, stored windows, unpacked members, info) through inspect's wheel
walk (``inspection/walk.py`` inspect_paths), and the audit's single pass (``inspection/scan.py`` scan:
dist-info, RECORD hashes, native members), and the toolkit's RECORD check of a downloaded wheel
(``toolkit/pypi.py`` verify_record).

inspect_paths never raises; a member report whose error starts "cannot read (" is a reader exception that
the dispatch hid, and counts as a crash here."""

from __future__ import annotations

from contextlib import suppress

from cudaship.errors import CudashipError
from cudaship.inspection.scan import scan as scan_wheel
from cudaship.inspection.walk import inspect_paths
from cudaship.toolkit.pypi import verify_record
from fuzz._harness import MemoryCeiling, Target
from fuzz.targets._scratch import scratch


class HiddenReaderBug(Exception):
    """A wheel member's report carries an exception the dispatch caught."""


def run(data: bytes) -> object:
    path = scratch() / "pkg-1.0-py3-none-manylinux_2_17_x86_64.whl"
    path.write_bytes(data)
    report = inspect_paths([path], details=True)
    for file in report.files:
        if file.error is not None and file.error.startswith("cannot read ("):
            raise HiddenReaderBug(f"{file.path}: {file.error}")
    with suppress(CudashipError):
        verify_record(path)  # what the toolkit checks of a wheel it downloads from PyPI
    return report, scan_wheel(path, workers=1)


TARGET = Target(
    name="wheel",
    summary="inspect_paths + scan on the cached PyPI wheels and small nvcc-built wheels",
    run=run,
    seed_kinds=("wheel",),
    modules=(
        "wheel/archive.py",
        "wheel/metadata.py",
        "inspection/walk.py",
        "inspection/wheel.py",
        "inspection/scan.py",
        "toolkit/pypi.py",
    ),
    # members are decompressed to temp files, not memory; --details decompresses fatbin entries (256x)
    memory=MemoryCeiling(factor=256, constant=32 << 20),
    max_seed_size=4 << 20,
)
