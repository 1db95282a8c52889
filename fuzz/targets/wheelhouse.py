"""A wheelhouse as a provider source: ``providers/sources.py`` WheelhouseSource finding the input, saved as
the one wheel of a directory. It must give the distribution or raise one line naming the file
(UnreadableDistribution): the archive layer's refusals (bombs, encryption, overlaps) hold for dependency
wheels too."""

from __future__ import annotations

import shutil

from packaging.specifiers import SpecifierSet

from cudaship.providers.records import Target as Platform
from cudaship.providers.sources import WheelhouseSource
from fuzz._harness import Target
from fuzz.targets._scratch import scratch

LINUX = Platform("linux", "x86_64", "3.12")


def run(data: bytes) -> object:
    house = scratch() / "wheelhouse"
    shutil.rmtree(house, ignore_errors=True)
    house.mkdir()
    (house / "fuzzed-1.0-py3-none-any.whl").write_bytes(data)
    return WheelhouseSource(str(house)).find("fuzzed", SpecifierSet(), LINUX)


TARGET = Target(
    name="wheelhouse",
    summary="WheelhouseSource.find on the input as the directory's one wheel (real and small wheels)",
    run=run,
    seed_kinds=("wheel",),
    modules=("providers/sources.py", "providers/distinfo.py", "wheel/archive.py"),
)
