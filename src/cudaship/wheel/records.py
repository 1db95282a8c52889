"""The records of a wheel's ``.dist-info`` (METADATA, WHEEL, RECORD) and of what its Python code loads itself.

Parsing lives in :mod:`cudaship.wheel.metadata` and :mod:`cudaship.wheel.pyloads`; checks and renderers read
these records and never the parsers.
"""

from __future__ import annotations

from dataclasses import dataclass


@dataclass(frozen=True)
class Metadata:
    """The fields of METADATA an audit needs."""

    name: str
    version: str  #: as written, e.g. ``1.6.0+cu132``
    local: str | None  #: the local tag without ``+`` (``cu132``), None when there is none
    requires_dist: tuple[str, ...]  #: Requires-Dist lines as written
    requires_python: str | None = None
    provides_extra: tuple[str, ...] = ()  #: Provides-Extra names as written


@dataclass(frozen=True)
class WheelFile:
    """The WHEEL file: tags and where the root installs."""

    wheel_version: str | None
    root_is_purelib: bool
    tags: tuple[str, ...]


@dataclass(frozen=True)
class RecordEntry:
    path: str
    algorithm: str | None  #: ``sha256``; None when RECORD gives no hash (RECORD itself, signatures)
    digest: str | None  #: urlsafe base64 without padding, as RECORD writes it
    size: int | None


@dataclass(frozen=True)
class RecordProblem:
    """One way the wheel's files disagree with its RECORD."""

    #: "hash", "size", "missing", "unlisted", "unhashed", "duplicate", "name" (not a valid wheel path:
    #: :mod:`cudaship.wheel.names`)
    kind: str
    path: str
    message: str


@dataclass(frozen=True)
class DistInfo:
    """The three files of a wheel's ``.dist-info`` directory, parsed."""

    directory: str  #: ``name-1.0.dist-info``
    metadata: Metadata
    wheel: WheelFile
    record: tuple[RecordEntry, ...]
    record_path: str


@dataclass(frozen=True)
class DeclaredRequirement:
    """A Requires-Dist entry that applies to a target platform: ``text`` as written, ``requirement``
    parsed."""

    text: str
    name: str  #: canonical name
    specifier: str  #: normalized specifier set (``<14,>=13``)

    @property
    def key(self) -> str:
        return f"{self.name}{self.specifier}"


@dataclass(frozen=True)
class LoadCall:
    line: int
    #: ``dlopen`` (loads a file), ``directory`` (adds a DLL directory), ``helper`` (a package's loader),
    #: ``computed`` (sets an environment variable from importlib.metadata: a path built at run time)
    kind: str
    mechanism: str  #: as written: ``ctypes.CDLL(..., RTLD_GLOBAL)``, ``nvidia.cublas.load_library()``
    scope: tuple[str, ...] = ()  #: the dotted module a helper belongs to (``nvidia``, ``cublas``)


@dataclass(frozen=True)
class PythonLoads:
    """One ``.py`` member that loads native libraries itself."""

    file: str  #: member path in the wheel
    calls: tuple[LoadCall, ...]
    strings: tuple[str, ...]  #: string literals of the file (names, path parts, globs), bounded
    dotted: tuple[str, ...]  #: components of dotted names it uses (``nvidia.cublas.__file__``), bounded


@dataclass(frozen=True)
class LibraryList:
    """A shipped data file (``.json`` / ``.txt``) that lists library names."""

    file: str
    names: tuple[str, ...]
