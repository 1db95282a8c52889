"""The records of a wheel's ``.dist-info`` (METADATA, WHEEL, RECORD, ``variant.json``) and of what its Python
code loads itself.

Parsing lives in :mod:`cudaship.wheel.metadata`, :mod:`cudaship.wheel.variant` and
:mod:`cudaship.wheel.pyloads`; checks and renderers read these records and never the parsers.
"""

from __future__ import annotations

import posixpath
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
class InstallLink:
    """A symbolic link a wheel has made at install time (wheel-axle-runtime's ``.dist-info/symlinks.txt``):
    ``path`` as the wheel names it (relative to site-packages, or ``<name>.data/<scheme>/...``), ``target``
    as ``os.symlink`` receives it (relative to the link's directory), ``directory`` for a link to a
    directory."""

    path: str
    target: str
    directory: bool = False

    def place(self, dist_info: str) -> tuple[str, str] | None:
        """Where the link lands and what it points to, both relative to site-packages and normalised
        (``pkg/lib/libfoo.so.1``, ``pkg/lib/libfoo.so.1.2.3``), as wheel-axle-runtime places it
        (``SymlinksInstaller._install_symlinks``): a ``<name>.data/purelib|platlib/x`` path lands at ``x``.
        None for a link of another ``.data`` scheme (installed outside site-packages), an absolute target, or
        a link or target that leaves site-packages. ``dist_info``: the ``.dist-info`` directory's name."""
        where = self.path
        data = dist_info.removesuffix(".dist-info") + ".data/"
        if where.startswith(data):
            scheme, _, where = where[len(data) :].partition("/")
            if scheme not in ("purelib", "platlib"):
                return None
        where = posixpath.normpath(where)
        if (
            posixpath.isabs(self.target)
            or posixpath.isabs(where)
            or where in (".", "..")
            or where.startswith("../")
        ):
            return None
        target = posixpath.normpath(posixpath.join(posixpath.dirname(where), self.target))
        if target == ".." or target.startswith("../"):
            return None
        return where, target


@dataclass(frozen=True)
class DistInfo:
    """The three files of a wheel's ``.dist-info`` directory, parsed (and the links it makes at install time,
    when it ships wheel-axle-runtime's ``symlinks.txt``)."""

    directory: str  #: ``name-1.0.dist-info``
    metadata: Metadata
    wheel: WheelFile
    record: tuple[RecordEntry, ...]
    record_path: str
    #: a variant wheel's label (from its file name) and ``variant.json``; None for a non-variant wheel
    variant: WheelVariant | None = None
    links: tuple[InstallLink, ...] = ()


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
    #: a ``directory`` call's nearby string literals: those of its arguments and of the lines just before it
    #: (where ``os.path.join(..., "cccl")`` builds the directory it adds), bounded
    near: tuple[str, ...] = ()


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


# --- wheel variants (PEP 825; docs/formats.md section 8) ----------------------------------------------------


@dataclass(frozen=True, order=True)
class VariantProperty:
    """``namespace :: feature :: value``."""

    namespace: str
    feature: str
    value: str

    @property
    def text(self) -> str:
        return f"{self.namespace} :: {self.feature} :: {self.value}"


@dataclass(frozen=True)
class VariantDescription:
    """One variant: its label and its properties (sorted; none for the null variant)."""

    label: str
    properties: tuple[VariantProperty, ...]

    @property
    def is_null(self) -> bool:
        return not self.properties

    def values(self, namespace: str, feature: str) -> tuple[str, ...]:
        """The values given for ``namespace :: feature``, in file order."""
        return tuple(p.value for p in self.properties if (p.namespace, p.feature) == (namespace, feature))

    def namespaces(self) -> tuple[str, ...]:
        return tuple(dict.fromkeys(p.namespace for p in self.properties))


@dataclass(frozen=True)
class VariantProvider:
    """One ``providers`` entry: the plugin that says which values a machine supports."""

    namespace: str
    requires: tuple[str, ...] = ()
    enable_if: str | None = None
    plugin_api: str | None = None
    optional: bool = False
    install_time: bool = True


@dataclass(frozen=True)
class VariantPriorities:
    """``default-priorities``: namespaces, then features per namespace, then values per feature; best
    first."""

    namespaces: tuple[str, ...]
    features: tuple[tuple[str, tuple[str, ...]], ...] = ()  #: (namespace, features)
    values: tuple[tuple[str, str, tuple[str, ...]], ...] = ()  #: (namespace, feature, values)

    def features_of(self, namespace: str) -> tuple[str, ...]:
        return next((f for ns, f in self.features if ns == namespace), ())

    def values_of(self, namespace: str, feature: str) -> tuple[str, ...]:
        return next((v for ns, f, v in self.values if (ns, f) == (namespace, feature)), ())


@dataclass(frozen=True)
class VariantMetadata:
    """A ``variant.json`` (one variant) or an index's ``{name}-{version}-variants.json`` (all of a
    release)."""

    source: str  #: the file, as messages name it
    schema: str | None
    priorities: VariantPriorities
    providers: tuple[VariantProvider, ...]
    variants: tuple[VariantDescription, ...]

    def variant(self, label: str) -> VariantDescription | None:
        return next((v for v in self.variants if v.label == label), None)


@dataclass(frozen=True)
class WheelVariant:
    """What makes a wheel a variant wheel: the label in its file name and its ``variant.json``."""

    label: str
    metadata: VariantMetadata

    @property
    def description(self) -> VariantDescription:
        found = self.metadata.variant(self.label)
        assert found is not None  # the reader refuses a variant.json without the file name's label
        return found
