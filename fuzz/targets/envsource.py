"""An installed environment as a provider source: ``providers/sources.py`` EnvSource over one ``.dist-info``
whose METADATA and RECORD are the input (split at the first ``\\0\\0RECORD\\0\\0``; without it, the input is
both). The source must read it or leave it out with one line naming the file; nothing else."""

from __future__ import annotations

import shutil

from cudaship.providers.sources import EnvSource
from fuzz._harness import Target
from fuzz.targets._scratch import scratch

SPLIT = b"\0\0RECORD\0\0"


def run(data: bytes) -> object:
    site = scratch() / "site-packages"
    shutil.rmtree(site, ignore_errors=True)
    info = site / "fuzzed-1.0.dist-info"
    info.mkdir(parents=True)
    metadata, sep, record = data.partition(SPLIT)
    (info / "METADATA").write_bytes(metadata)
    (info / "RECORD").write_bytes(record if sep else data)
    source = EnvSource(str(site))
    found = source.distributions()
    if len(found) + len(source.problems) != 1:
        raise AssertionError(
            f"one dist-info gave {len(found)} distributions and {len(source.problems)} problems"
        )
    if any("\n" in p for p in source.problems):
        raise AssertionError("a problem line spans several lines")
    return found


TARGET = Target(
    name="envsource",
    summary="EnvSource over a .dist-info whose METADATA and RECORD are the input (real dist-info seeds)",
    run=run,
    seed_kinds=("metadata",),
    modules=("providers/sources.py", "providers/distinfo.py"),
)
