"""NVIDIA driver versions and the newest CUDA each supports (from data/releases.toml).

A driver is known by its version (``595.45.04``), by the CUDA version it reports (``13.2``;
``cuDriverGetVersion`` gives ``13020``), or both. :func:`parse_driver` reads either.
"""

from __future__ import annotations

import re
from dataclasses import dataclass

from cudaship.errors import KnowledgeError
from cudaship.knowledge.platforms import cuda_os_names
from cudaship.knowledge.releases import Release, releases
from cudaship.knowledge.trains import Train


def version_tuple(version: str) -> tuple[int, ...]:
    """``"595.45.04"`` → ``(595, 45, 4)``; anything but dotted numbers is a KnowledgeError."""
    text = version.strip()
    if not re.fullmatch(r"\d+(\.\d+){0,3}", text):
        raise KnowledgeError(f"invalid driver version {version!r}: expected digits and dots (595.45.04)")
    return tuple(int(p) for p in text.split("."))


def driver_key(minimum: str | None) -> tuple[float, ...]:
    """Order minimum-driver texts: an exact version, ``r595 branch`` (as 595), anything else last."""
    if minimum is None:
        return (0.0,)
    match = re.fullmatch(r"r(\d+) branch", minimum)
    if match:
        return (float(match.group(1)),)
    try:
        return tuple(float(p) for p in version_tuple(minimum))
    except KnowledgeError:
        return (float("inf"),)


def release_floor(release: Release, platform: str = "linux") -> tuple[int, ...] | None:
    """The oldest driver the release runs on (exact, else its branch), None when the data lacks both."""
    exact = release.min_driver(platform) or (release.min_driver_linux if platform == "windows" else None)
    if exact:
        return version_tuple(exact)
    if release.driver_branch is not None:
        return (release.driver_branch,)
    return None


def cuda_for_driver(version: str, platform: str = "linux") -> Train | None:
    """The newest CUDA release a driver ``version`` supports (None when older than every release known).

    Releases whose minimum driver is not in the data are never chosen, so a driver newer than the newest
    known minimum maps to that release: the answer is a lower bound.
    """
    have = version_tuple(version)
    best: Train | None = None
    for release in releases():
        floor = release_floor(release, platform)
        if floor is not None and have >= floor:
            best = release.train
    return best


def newest_known_branch() -> int | None:
    """The newest driver branch the release data names (610 for CUDA 13.3), None when it names none."""
    branches = [r.driver_branch for r in releases() if r.driver_branch is not None]
    for release in releases():
        floor = release_floor(release)
        if floor is not None:
            branches.append(floor[0])
    return max(branches, default=None)


def is_future_driver(version: str) -> bool:
    """Whether a driver version belongs to a branch newer than every one the data knows (``999.1``): such a
    driver supports at least the newest CUDA known, but how much newer is unknown."""
    newest = newest_known_branch()
    return newest is not None and version_tuple(version)[0] > newest


@dataclass(frozen=True)
class Driver:
    """What is known of a driver: its version and/or the newest CUDA it supports."""

    version: str | None  #: "595.45.04", None when only the CUDA version is known
    #: newest CUDA it supports (13.2), None when the version predates the data; for a driver of a branch
    #: newer than the data knows (``future``), the newest CUDA known: a lower bound
    cuda: Train | None
    platform: str = "linux"
    future: bool = False  #: a branch newer than every one the data knows (``999.1``)

    def __post_init__(self) -> None:
        if self.version is None and self.cuda is None:
            raise KnowledgeError("a driver needs a version or a CUDA version")
        if self.platform not in cuda_os_names():
            raise KnowledgeError(
                f"unknown platform {self.platform!r} (expected {' or '.join(cuda_os_names())})"
            )

    def meets(self, minimum: str) -> bool:
        """Whether this driver is at least ``minimum`` (an exact driver version).

        With only the CUDA version known, the driver's version is at least that release's minimum.
        """
        need = version_tuple(minimum)
        if self.version is not None:
            return version_tuple(self.version) >= need
        if self.cuda is None:  # pragma: no cover - excluded by __post_init__
            return False
        # The newest known release at or below the CUDA version the driver reports bounds its version.
        floor: tuple[int, ...] | None = None
        for release in releases():
            if release.train <= self.cuda:
                floor = release_floor(release, self.platform) or floor
        return floor is not None and floor >= need

    def describe(self) -> str:
        """What the driver is, for a report's header: ``595.45.04 (CUDA 13.2)``, ``a driver for CUDA 13.2``,
        ``999.1 (a branch newer than cudaship knows: CUDA 13.3 or newer)``."""
        if self.version and self.cuda and self.future:
            return f"{self.version} (a branch newer than cudaship knows: CUDA {self.cuda.version} or newer)"
        if self.version and self.cuda:
            return f"{self.version} (CUDA {self.cuda.version})"
        if self.version:
            return f"{self.version} (older than every CUDA release known)"
        assert self.cuda is not None
        return f"a driver for CUDA {self.cuda.version}"

    @property
    def phrase(self) -> str:
        """The driver inside a sentence: ``driver 535.104.05 (CUDA 12.2)``, ``a driver for CUDA 12.2`` (never
        "driver a driver for ...")."""
        return f"driver {self.describe()}" if self.version else self.describe()

    def __str__(self) -> str:
        return self.describe()


def cuda_from_driver_api(value: int) -> Train:
    """``cuDriverGetVersion`` / ``nvmlSystemGetCudaDriverVersion`` integer → Train: 13020 → 13.2."""
    if value < 1000:
        raise KnowledgeError(f"invalid CUDA driver version number {value}")
    return Train(value // 1000, (value % 1000) // 10)


def parse_driver(text: str, platform: str = "linux") -> Driver:
    """Read ``595.45.04`` (a driver version), ``13.2`` / ``cuda13.2`` / ``cu132`` (the CUDA version a driver
    reports) or ``13020`` (the driver API's number). A version whose first part is 100 or more is a driver
    version. Bad input raises KnowledgeError naming it.
    """
    token = text.strip()
    lowered = token.lower()
    if re.fullmatch(r"\d{4,5}", lowered):
        return Driver(None, cuda_from_driver_api(int(lowered)), platform)
    if re.fullmatch(r"\d+(\.\d+){0,3}", lowered) and int(lowered.split(".")[0]) >= 100:
        return Driver(token, cuda_for_driver(token, platform), platform, future=is_future_driver(token))
    cuda_text = re.sub(r"^cuda[-_ ]?", "", lowered)
    match = re.fullmatch(r"(\d{1,2})\.(\d)", cuda_text) or re.fullmatch(r"cu(\d{1,2})(\d)", cuda_text)
    if match:
        return Driver(None, Train(int(match.group(1)), int(match.group(2))), platform)
    raise KnowledgeError(
        f"invalid driver {text!r}: expected a driver version (595.45.04) or the CUDA it reports (13.2)"
    )
