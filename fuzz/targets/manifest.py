"""NVIDIA redist manifests (``redistrib_<release>.json``): ``toolkit/install.py`` parse_redist_manifest."""

from __future__ import annotations

from cudaship.toolkit.install import parse_redist_manifest
from cudaship.toolkit.records import Platform
from fuzz._harness import Target

COMPONENTS = ("cudart", "nvcc", "crt", "cccl", "nvvm")


def run(data: bytes) -> object:
    results = []
    for platform in (Platform.LINUX_X86_64, Platform.WINDOWS_X86_64):
        for components in (COMPONENTS, ("cudart",)):
            results.append(
                parse_redist_manifest(
                    data, "13.0.2", platform, components, "https://mirror.invalid/redist", "redistrib.json"
                )
            )
    return results


TARGET = Target(
    name="manifest",
    summary="parse_redist_manifest for linux-x86_64 and windows-x86_64 on tests/toolkit's redist manifest",
    run=run,
    seed_kinds=("manifest",),
    modules=("toolkit/install.py",),
)
