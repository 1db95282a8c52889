"""Seeds for the fuzz smoke tests, from the session's own nvcc and mingw-w64 builds and the cached wheels."""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path

import pytest
from fuzz.seeds import Sources, gather

from tests.fixtures.wheels import WHEELS, find_cached

#: Real wheels small enough to seed the wheel and metadata targets (used only when already cached).
SEED_WHEELS = ("bitsandbytes_macos_wheel", "cudart_linux_wheel", "cudart_windows_wheel")


def _optional(request: pytest.FixtureRequest, name: str) -> dict[str, Path]:
    """A build fixture's files, or none when its toolchain is missing (the seeds of that kind shrink)."""
    try:
        value: dict[str, Path] = request.getfixturevalue(name)
    except pytest.skip.Exception:
        return {}
    return value


@pytest.fixture(scope="session")
def fuzz_sources(request: pytest.FixtureRequest, tmp_path_factory: pytest.TempPathFactory) -> Sources:
    wheels = tuple(p for key in SEED_WHEELS if (p := find_cached(WHEELS[key])) is not None)
    return Sources(
        work=tmp_path_factory.mktemp("fuzz-seeds"),
        nvcc=_optional(request, "nvcc_builds"),
        mingw=_optional(request, "mingw_builds"),
        wheels=wheels,
    )


@pytest.fixture(scope="session")
def fuzz_seeds(fuzz_sources: Sources) -> Callable[[tuple[str, ...]], list[bytes]]:
    cache: dict[str, list[bytes]] = {}

    def seeds(kinds: tuple[str, ...]) -> list[bytes]:
        out: list[bytes] = []
        for kind in kinds:
            if kind not in cache:
                cache[kind] = gather(kind, fuzz_sources)
            out.extend(cache[kind])
        return out

    return seeds
