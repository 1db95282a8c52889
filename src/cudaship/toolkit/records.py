"""Records of the toolkit layer: platforms, sources, artifacts, the installed-toolkit manifest, progress.

Library code reports progress through an :class:`Observer` (does nothing by default); the CLI attaches a rich
progress bar. Nothing in :mod:`cudaship.toolkit` prints.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from enum import Enum
from pathlib import Path
from typing import Any

from cudaship.errors import UsageError
from cudaship.knowledge.platforms import CudaPlatform, marker_values, redist_platform

#: Name of the file every assembled toolkit carries at its root.
TOOLKIT_MANIFEST = "cudaship-toolkit.json"
#: Schema version of that file.
TOOLKIT_SCHEMA = 1


class Platform(str, Enum):
    """A target platform, spelled as NVIDIA's redist manifests spell it (the ``redist`` keys of
    knowledge/data/platforms.toml; tests/toolkit keep the two equal)."""

    LINUX_X86_64 = "linux-x86_64"
    LINUX_SBSA = "linux-sbsa"
    WINDOWS_X86_64 = "windows-x86_64"

    @classmethod
    def parse(cls, text: str) -> Platform:
        try:
            return cls(text.strip().lower())
        except ValueError:
            raise UsageError(
                f"unknown platform {text!r}; platforms: {', '.join(p.value for p in cls)}"
            ) from None

    @property
    def cuda_platform(self) -> CudaPlatform:
        """The knowledge table's row of this platform (its OS, machine, wheel tags)."""
        return redist_platform(self.value)

    @property
    def is_windows(self) -> bool:
        return self.cuda_platform.os == "windows"

    @property
    def pypi_platform_tags(self) -> tuple[str, ...]:
        """Wheel platform tags pip may pick for this platform (``--platform``, newest first)."""
        return self.cuda_platform.pip_tags

    @property
    def marker_environment(self) -> dict[str, str]:
        """PEP 508 marker values of this platform (for the cuda-toolkit metapackage's requirements)."""
        return marker_values(self.cuda_platform.os, self.cuda_platform.machine)


class Source(str, Enum):
    REDIST = "redist"  #: NVIDIA's redistrib_<release>.json and per-component archives
    PYPI = "pypi"  #: NVIDIA's wheels, through pip's configured index


@dataclass(frozen=True)
class Artifact:
    """One file to fetch and unpack: a redist archive or a wheel, with the checksum it must have."""

    component: str  #: friendly component name
    name: str  #: the source's name (redist key or PyPI project)
    version: str
    filename: str
    url: str  #: http(s)/file URL, or a local path (a directory mirror / pip's download)
    sha256: str
    size: int | None = None


@dataclass(frozen=True)
class InstalledComponent:
    component: str
    name: str
    version: str
    source: Source
    filename: str
    sha256: str
    url: str


@dataclass(frozen=True)
class ToolkitInfo:
    """What ``cudaship-toolkit.json`` records about an assembled toolkit."""

    release: str
    platform: Platform
    source: Source
    components: tuple[InstalledComponent, ...]
    files: dict[str, str] = field(
        default_factory=dict
    )  #: relative path (/) -> sha256 ("link:" + target for links)
    created: str = ""
    cudaship_version: str = ""

    def to_json(self) -> dict[str, Any]:
        return {
            "schema": TOOLKIT_SCHEMA,
            "release": self.release,
            "platform": self.platform.value,
            "source": self.source.value,
            "created": self.created,
            "cudaship_version": self.cudaship_version,
            "components": [
                {
                    "component": c.component,
                    "name": c.name,
                    "version": c.version,
                    "source": c.source.value,
                    "filename": c.filename,
                    "sha256": c.sha256,
                    "url": c.url,
                }
                for c in self.components
            ],
            "files": dict(sorted(self.files.items())),
        }

    @classmethod
    def from_json(cls, data: Any) -> ToolkitInfo:
        """Parse a ``cudaship-toolkit.json`` document; raises KeyError/TypeError/ValueError on a bad one."""
        if not isinstance(data, dict) or data.get("schema") != TOOLKIT_SCHEMA:
            raise ValueError(f"not a schema {TOOLKIT_SCHEMA} toolkit manifest")
        components = tuple(
            InstalledComponent(
                component=str(c["component"]),
                name=str(c["name"]),
                version=str(c["version"]),
                source=Source(c["source"]),
                filename=str(c["filename"]),
                sha256=str(c["sha256"]),
                url=str(c["url"]),
            )
            for c in data["components"]
        )
        files = data["files"]
        if not isinstance(files, dict):
            raise TypeError("files must be an object")
        return cls(
            release=str(data["release"]),
            platform=Platform(data["platform"]),
            source=Source(data["source"]),
            components=components,
            files={str(k): str(v) for k, v in files.items()},
            created=str(data.get("created", "")),
            cudaship_version=str(data.get("cudaship_version", "")),
        )


@dataclass(frozen=True)
class VerifyProblem:
    path: str
    problem: str  #: "missing", "modified", "unexpected", "link changed"


@dataclass(frozen=True)
class ToolkitView:
    """A toolkit on disk as ``toolkit install|list DIR|verify`` report it."""

    info: ToolkitInfo
    root: Path  #: absolute
    #: ``verify``: the problems found (empty: every file as recorded); None when not verified
    problems: tuple[VerifyProblem, ...] | None = None
    installed: bool = False  #: just assembled by ``toolkit install``
    removed: bool = False  #: just deleted by ``toolkit remove``


@dataclass(frozen=True)
class ToolkitCatalog:
    """What ``toolkit list`` offers: trains (train -> default release), releases, components and sets."""

    trains: dict[str, str]
    releases: tuple[str, ...]
    components: dict[str, str]  #: name -> description
    sets: dict[str, tuple[str, ...]]


@dataclass(frozen=True)
class ToolkitEnv:
    """``toolkit env``: the variables of a toolkit and the directories to put first on PATH."""

    variables: dict[str, str]
    bins: tuple[str, ...]


class Observer:
    """Progress hooks. The default does nothing; the CLI subclasses it to draw progress."""

    def stage(self, message: str) -> None:
        """A step begins (resolving, downloading X, extracting X, moving into place)."""

    def download_started(self, filename: str, total: int | None, already: int) -> None:
        """A download starts (``already`` bytes resumed from a partial file)."""

    def download_progress(self, filename: str, done: int) -> None:
        """``done`` more bytes of ``filename`` arrived."""

    def download_finished(self, filename: str) -> None:
        """A download completed (or came from the cache)."""

    def warning(self, message: str) -> None:
        """Something worth telling the user that does not stop the run."""
