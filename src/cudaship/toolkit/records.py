"""Records of the toolkit layer: platforms, sources, artifacts, the installed-toolkit manifest, progress.

Library code reports progress through an :class:`Observer` (does nothing by default); the CLI attaches a rich
progress bar. Nothing in :mod:`cudaship.toolkit` prints.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from enum import Enum
from pathlib import Path
from typing import Any

from cudaship.errors import ToolkitError, UsageError
from cudaship.knowledge.platforms import CudaPlatform, marker_values, redist_platform
from cudaship.schema import Table

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
        """Read a ``cudaship-toolkit.json`` document; a bad one is a ToolkitError naming the key path
        (``components[0].source: must be one of redist, pypi, not 'x'``)."""
        doc = Table.of(data, "", None, ToolkitError, "a JSON object")
        if doc.get("schema") != TOOLKIT_SCHEMA:
            raise doc.wrong("schema", str(TOOLKIT_SCHEMA), doc.get("schema"), show=True)
        components = tuple(
            InstalledComponent(
                component=_required(c, "component"),
                name=_required(c, "name"),
                version=_required(c, "version"),
                source=Source(_required(c, "source", Source)),
                filename=_required(c, "filename"),
                sha256=_required(c, "sha256"),
                url=_required(c, "url"),
            )
            for c in doc.rows("components", required=True, what="a list of objects")
        )
        files = doc.table("files", "a JSON object")
        return cls(
            release=_required(doc, "release"),
            platform=Platform(_required(doc, "platform", Platform)),
            source=Source(_required(doc, "source", Source)),
            components=components,
            files={name: _required(files, name) for name in files},
            created=doc.string("created") or "",
            cudaship_version=doc.string("cudaship_version") or "",
        )


def _required(table: Table, name: str, choices: type[Enum] | None = None) -> str:
    """The string ``name`` of ``table`` (empty allowed; ``choices``: one of that enum's values)."""
    table.require(name, "a string")
    value = table.string(name, choices=[c.value for c in choices] if choices else ())
    assert value is not None
    return value


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
    #: the PATH the directories go before, in the forms that write it out whole (dotenv); the caller reads it
    path: str = ""
    #: what was left out and why (a ``bin`` that does not exist, ``CUDACXX`` without an nvcc): comment lines
    notes: tuple[str, ...] = ()


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
