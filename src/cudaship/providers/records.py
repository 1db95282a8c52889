"""Records of provider resolution: frozen dataclasses, no I/O."""

from __future__ import annotations

from dataclasses import dataclass, field

from packaging.requirements import InvalidRequirement, Requirement
from packaging.utils import canonicalize_name


@dataclass(frozen=True)
class Distribution:
    """One version of a project as a source describes it: what it requires and which files it installs."""

    name: str  #: canonical project name
    version: str
    requires_dist: tuple[str, ...]
    files: tuple[str, ...]  #: installed paths relative to site-packages, ``/``-separated
    source: str  #: where it was read: ``env /path``, ``wheelhouse /dir/x.whl``, ``index URL``, ``knowledge``
    provides_extra: tuple[str, ...] = ()


@dataclass(frozen=True)
class Target:
    """The platform requirements are evaluated for: the audited wheel's own, never this machine's."""

    os: str  #: linux, windows, macos
    machine: str | None  #: x86_64, aarch64
    python: str = "3.12"  #: ``3.11`` from a ``cp311`` tag


@dataclass(frozen=True)
class Reached:
    """A distribution in the installed closure and how the audited wheel reaches it."""

    dist: Distribution
    chain: tuple[str, ...]  #: requirement texts from the audited wheel down, first is the wheel's own
    extra: str | None = None  #: the audited wheel's extra this comes under; None: always installed

    @property
    def via(self) -> str:
        """``cuda-toolkit[cublas]==13.0.3``: the audited wheel's own requirement that brings it in."""
        return self.chain[0] if self.chain else self.dist.name

    def label(self) -> str:
        """``nvidia-cublas 13.1.1.3 via cuda-toolkit[cublas]==13.0.3``."""
        head = f"{self.dist.name} {self.dist.version}"
        if not self.chain or (len(self.chain) == 1 and _names(self.chain[0]) == self.dist.name):
            return head + (f" (extra {self.extra})" if self.extra else "")
        return f"{head} via {self.via}" + (f" (extra {self.extra})" if self.extra else "")


def _names(text: str) -> str:
    try:
        return canonicalize_name(Requirement(text).name)
    except InvalidRequirement:
        return text


@dataclass(frozen=True)
class Provided:
    """One installed file of the closure: ``path`` (site-packages relative) from ``reached``."""

    path: str
    reached: Reached


@dataclass(frozen=True)
class Unresolved:
    """A requirement no source could satisfy, with the reason (one line)."""

    requirement: str
    chain: tuple[str, ...]
    reason: str
    extra: str | None = None


@dataclass(frozen=True)
class Pin:
    """One project a closure resolved for one target: what a later run pins to give the same verdict."""

    name: str
    version: str
    source: str  #: where it was read, as a kind: ``index``, ``wheelhouse``, ``env``, ``knowledge``
    target: Target


@dataclass(frozen=True)
class ResolvedProject:
    """One project a run resolved, at one version, and the targets it resolved to that version for."""

    name: str
    version: str
    source: str  #: ``index``, ``wheelhouse``, ``env`` or ``knowledge``
    targets: tuple[str, ...]  #: ``linux x86_64 3.12``
    #: None when the project resolved to this one version for every target; else the marker of its targets
    marker: str | None = None

    @property
    def constraint(self) -> str:
        """The line a constraints file pins it with: ``name==version`` (``; marker`` where needed)."""
        return f"{self.name}=={self.version}" + (f"; {self.marker}" if self.marker else "")


@dataclass
class Fetched:
    """What the index cost: requests and bytes over the network, answers from the on-disk cache."""

    requests: int = 0
    bytes: int = 0  #: everything received
    page_bytes: int = 0  #: of which project pages (PEP 691 JSON); the rest is wheel ranges and metadata
    cache_hits: int = 0


@dataclass(frozen=True)
class Closure:
    """The installed closure of a wheel's requirements for its target platform."""

    target: Target
    reached: tuple[Reached, ...]
    unresolved: tuple[Unresolved, ...] = ()
    notes: tuple[str, ...] = ()
    sources: tuple[str, ...] = field(default=())  #: the sources consulted, in order
    #: a source's file that could not be read (a dist-info, a wheel, a URL refused), one line each naming it:
    #: that distribution is left out, the rest of the closure stands
    unreadable: tuple[str, ...] = ()
    #: projects the index gave no upload time for while ``--exclude-newer`` was set: their files were taken
    #: whatever their date (said in :attr:`notes` too)
    undated: tuple[str, ...] = ()

    def pins(self) -> tuple[Pin, ...]:
        """Every distribution reached, as the version it resolved to, sorted by name."""
        return tuple(
            sorted(
                (
                    Pin(r.dist.name, r.dist.version, r.dist.source.split(" ", 1)[0], self.target)
                    for r in self.reached
                ),
                key=lambda p: p.name,
            )
        )

    def files(self) -> dict[str, list[Provided]]:
        out: dict[str, list[Provided]] = {}
        for r in self.reached:
            for f in r.dist.files:
                out.setdefault(f, []).append(Provided(f, r))
        return out

    def by_name(self) -> dict[str, list[Provided]]:
        """Lower-cased base name -> every installed file with that name."""
        out: dict[str, list[Provided]] = {}
        for r in self.reached:
            for f in r.dist.files:
                out.setdefault(f.rsplit("/", 1)[-1].lower(), []).append(Provided(f, r))
        return out

    def get(self, name: str) -> Reached | None:
        for r in self.reached:
            if r.dist.name == name:
                return r
        return None
