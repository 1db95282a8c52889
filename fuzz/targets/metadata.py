"""A wheel's dist-info files: ``wheel/metadata.py`` parse_metadata (METADATA), parse_wheel_file (WHEEL) and
parse_record (RECORD), each run on every input, and the Requires-Dist of a METADATA evaluated as the audit
does (markers for Linux and Windows)."""

from __future__ import annotations

import contextlib

from cudaship.errors import CudashipError
from cudaship.wheel.metadata import parse_metadata, parse_record, parse_wheel_file, requirements_for
from fuzz._harness import Target


def run(data: bytes) -> object:
    found: list[object] = []
    try:
        meta = parse_metadata(data)
        found.append(meta)
        for os_name, machine in (("linux", "x86_64"), ("windows", "AMD64")):
            found.append(requirements_for(meta.requires_dist, os_name, machine))
    except CudashipError:
        pass
    for parse in (parse_wheel_file, parse_record):
        with contextlib.suppress(CudashipError):
            found.append(parse(data))
    return found


TARGET = Target(
    name="metadata",
    summary="parse_metadata (+ requirements_for), parse_wheel_file, parse_record on real dist-info files",
    run=run,
    seed_kinds=("metadata",),
    modules=("wheel/metadata.py",),
)
