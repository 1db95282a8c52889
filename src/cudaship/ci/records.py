"""Records of the CI layer: the matrix configuration, matrix rows and the result of filtering them.

All frozen dataclasses; :mod:`cudaship.ci.matrix` builds them, :mod:`cudaship.cli.matrix_cmd` renders them.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from enum import Enum


class Event(str, Enum):
    """The GitHub event a matrix is generated for."""

    PULL_REQUEST = "pull_request"
    PUSH = "push"
    RELEASE = "release"
    SCHEDULE = "schedule"


class RowKind(str, Enum):
    BUILD = "build"  #: build (and unit-test) one wheel
    E2E = "e2e"  #: end-to-end test of a built wheel on a GPU runner


@dataclass(frozen=True)
class PlatformSpec:
    """One platform of ``[tool.cudaship.matrix]``: an operating system and a machine, with its runners."""

    name: str  #: ``linux-x86_64``, ``linux-aarch64``, ``windows-x86_64``
    os: str  #: ``linux`` or ``windows``
    machine: str  #: ``x86_64`` or ``aarch64``: the key of the arch table
    runner: str | None = None  #: ``runs-on`` of its build rows
    gpu_runner: str | None = None  #: ``runs-on`` of its end-to-end rows (a GPU machine)
    secrets: bool = False  #: its build rows need repository secrets (so a fork pull request cannot run them)


@dataclass(frozen=True)
class Exclusion:
    """Rows to leave out: every given field must match (an unset field matches anything)."""

    train: str | None = None
    python: str | None = None
    platform: str | None = None

    def matches(self, train: str, python: str, platform: str) -> bool:
        return (
            (self.train is None or self.train == train)
            and (self.python is None or self.python == python)
            and (self.platform is None or self.platform == platform)
        )

    def describe(self) -> str:
        parts = [
            f"{k}={v}"
            for k, v in (("train", self.train), ("python", self.python), ("platform", self.platform))
            if v is not None
        ]
        return "{" + ", ".join(parts) + "}"


@dataclass(frozen=True)
class MatrixConfig:
    """``[tool.cudaship.matrix]``, validated. Trains are tags (``cu132``), oldest first."""

    trains: tuple[str, ...]
    python: tuple[str, ...]  #: oldest first
    platforms: tuple[PlatformSpec, ...]
    default_train: str
    default_python: str
    default_platform: str
    all_label: str
    exclude: tuple[Exclusion, ...] = ()
    e2e_platforms: tuple[str, ...] = ()  #: platforms that get end-to-end rows
    source: str | None = None  #: the file it came from

    def platform(self, name: str) -> PlatformSpec:
        for spec in self.platforms:
            if spec.name == name:
                return spec
        raise KeyError(name)


@dataclass(frozen=True)
class ArchSyntaxes:
    """One arch list written in each syntax a build consumes."""

    torch: str  #: ``TORCH_CUDA_ARCH_LIST``: ``8.0;8.6;9.0+PTX``
    cmake: str  #: ``CMAKE_CUDA_ARCHITECTURES``: ``80-real;86-real;90``
    gencode: str  #: nvcc flags: ``-gencode arch=compute_80,code=sm_80 ...``
    list: str  #: plain: ``8.0 8.6 9.0``


@dataclass(frozen=True)
class MatrixRow:
    kind: RowKind
    train: str  #: ``cu132``
    cuda: str  #: ``13.2``
    python: str
    platform: str
    os: str
    machine: str
    runner: str | None
    archs: ArchSyntaxes | None  #: None when the arch table has no list for (train, machine)
    needs_gpu: bool = False
    needs_secrets: bool = False

    @property
    def name(self) -> str:
        prefix = "e2e-" if self.kind is RowKind.E2E else ""
        return f"{prefix}{self.train}-py{self.python}-{self.platform}"

    def to_github(self) -> dict[str, str]:
        """The row as a GitHub Actions ``include`` entry (string values, snake_case keys)."""
        row: dict[str, str] = {
            "name": self.name,
            "kind": self.kind.value,
            "train": self.train,
            "cuda": self.cuda,
            "python": self.python,
            "platform": self.platform,
            "os": self.os,
            "machine": self.machine,
        }
        if self.runner is not None:
            row["runner"] = self.runner
        if self.archs is not None:
            row["torch_cuda_arch_list"] = self.archs.torch
            row["cmake_cuda_architectures"] = self.archs.cmake
            row["gencode"] = self.archs.gencode
            row["arch_list"] = self.archs.list
        return row


@dataclass(frozen=True)
class Skipped:
    """A row that was considered and left out, with the reason."""

    train: str
    python: str
    platform: str
    reason: str
    kind: RowKind = RowKind.BUILD


@dataclass(frozen=True)
class MatrixResult:
    event: Event
    kind: RowKind
    rows: tuple[MatrixRow, ...]
    skipped: tuple[Skipped, ...] = ()
    notes: tuple[str, ...] = ()  #: why the rows are what they are, one line each
    problems: tuple[str, ...] = field(default=())  #: release-gate failures; non-empty means exit 1

    @property
    def ok(self) -> bool:
        return not self.problems

    def to_github(self) -> dict[str, list[dict[str, str]]]:
        return {"include": [row.to_github() for row in self.rows]}
