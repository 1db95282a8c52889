"""GPU architecture names and the records both arch lists and the release table are built from.

An :class:`Arch` is one compute capability with its variant (``""``, ``"a"`` arch-specific, ``"f"`` family);
a :class:`Target` says whether a build carries real code (SASS, ``sm_XY``) and/or virtual code (PTX,
``compute_XY``) for one arch; an :class:`ArchList` is a set of targets. :func:`parse_arch` reads one name
(``sm_90a``, ``9.0a``, ``90a``, ...), with the rules of ``data/arch_names.toml``.

This module sits below :mod:`cudaship.knowledge.archs` (arch lists in every syntax, which expand ``all`` from
a release) and :mod:`cudaship.knowledge.releases` (a release's arch table): both build on these records.
Every problem is a :class:`~cudaship.errors.KnowledgeError` naming the offending token.
"""

from __future__ import annotations

import re
from collections.abc import Iterable, Iterator
from dataclasses import dataclass, field

from cudaship.errors import KnowledgeError
from cudaship.knowledge import _data
from cudaship.once import once

VARIANTS: tuple[str, ...] = ("", "a", "f")


@dataclass(frozen=True, order=True)
class Arch:
    """One compute capability with its variant: ``Arch(9, 0, "a")`` is sm_90a / compute_90a / ``9.0a``.

    Ordering is numeric, then by variant: ``sm_89 < sm_90 < sm_90a < sm_100 < sm_100a < sm_100f < sm_120``.
    """

    major: int
    minor: int
    variant: str = ""

    def __post_init__(self) -> None:
        if self.variant not in VARIANTS:
            raise KnowledgeError(f"invalid architecture variant {self.variant!r} (expected '', 'a' or 'f')")
        if self.major < 1 or not 0 <= self.minor <= 9:
            raise KnowledgeError(f"invalid compute capability {self.major}.{self.minor}")

    @classmethod
    def from_sm(cls, sm: int, variant: str = "") -> Arch:
        """``Arch.from_sm(90, "a")`` is sm_90a (the SM number is ``major * 10 + minor``)."""
        return cls(sm // 10, sm % 10, variant)

    @property
    def sm(self) -> int:
        """The SM number without variant: 90 for sm_90a, 121 for sm_121."""
        return self.major * 10 + self.minor

    @property
    def capability(self) -> str:
        """The compute capability as a device reports it, without variant: ``"9.0"``."""
        return f"{self.major}.{self.minor}"

    @property
    def sass_name(self) -> str:
        """``sm_90a``."""
        return f"sm_{self.sm}{self.variant}"

    @property
    def ptx_name(self) -> str:
        """``compute_90a``."""
        return f"compute_{self.sm}{self.variant}"

    @property
    def dotted(self) -> str:
        """``9.0a``: the form TORCH_CUDA_ARCH_LIST uses."""
        return f"{self.capability}{self.variant}"

    @property
    def base(self) -> Arch:
        """The same capability without variant."""
        return Arch(self.major, self.minor)

    @property
    def generation(self) -> str | None:
        """NVIDIA's architecture name (``Hopper``), when the data knows this capability."""
        return _capabilities().get(self.capability)

    def __str__(self) -> str:
        return self.sass_name


@once
def _capabilities() -> dict[str, str]:
    return {str(k): str(v) for k, v in _data.table("arch_names.toml", "capabilities").items()}


@once
def _variant_floors() -> dict[str, int]:
    floors = _data.section("arch_names.toml", "variants")
    return {k: floors.number(k) for k in floors}


def known_archs() -> tuple[Arch, ...]:
    """Every compute capability the knowledge base knows (no variants), oldest first."""
    return tuple(sorted(parse_arch(c) for c in _capabilities()))


_ARCH_RE = re.compile(r"^(?:(sm|compute|lto)_)?(\d+)(?:\.(\d+))?([af]?)$", re.IGNORECASE)
_EXPECTED = "expected sm_XY, compute_XY, X.Y or XY, with an optional 'a' or 'f' suffix"


def split_arch_name(token: str, *, known_only: bool = False) -> tuple[str | None, Arch]:
    """Split ``sm_90a`` into ``("sm", Arch(9, 0, "a"))``; the prefix is None for ``9.0a`` / ``90a``.

    The prefix is lower-cased: ``"sm"``, ``"compute"`` or ``"lto"``. See :func:`parse_arch` for the rules.
    """
    text = token.strip()
    match = _ARCH_RE.match(text)
    if not match:
        raise KnowledgeError(f"invalid architecture {token!r}: {_EXPECTED}")
    prefix, number, minor_text, variant = match.groups()
    variant = variant.lower()
    if minor_text is not None:
        if prefix is not None:
            raise KnowledgeError(f"invalid architecture {token!r}: write {prefix.lower()}_XY, not X.Y")
        if len(minor_text) != 1 or len(number) > 2:
            raise KnowledgeError(f"invalid architecture {token!r}: {_EXPECTED}")
        major, minor = int(number), int(minor_text)
    else:
        if len(number) < 2 or len(number) > 3 or number.startswith("0"):
            raise KnowledgeError(f"invalid architecture {token!r}: {_EXPECTED}")
        major, minor = divmod(int(number), 10)
    if major < 1:
        raise KnowledgeError(f"invalid architecture {token!r}: {_EXPECTED}")
    arch = Arch(major, minor, variant)
    floor = _variant_floors().get(variant) if variant else None
    if floor is not None and arch.sm < floor:
        first = Arch.from_sm(floor, variant).sass_name
        raise KnowledgeError(f"invalid architecture {token!r}: '{variant}' targets start at {first}")
    if known_only and arch.capability not in _capabilities():
        known = " ".join(a.capability for a in known_archs())
        raise KnowledgeError(f"unknown compute capability {arch.capability} in {token!r} (known: {known})")
    return (prefix.lower() if prefix else None), arch


def parse_arch(token: str, *, known_only: bool = False) -> Arch:
    """Parse one architecture: sm_90a, compute_120, 9.0, 90, 9.0a, 90a, sm_100f, 12.0f.

    The ``sm_`` / ``compute_`` / ``lto_`` prefix is accepted and dropped (:func:`split_arch_name` keeps it).
    Numbers without a dot are SM numbers (``90`` is 9.0, ``121`` is 12.1). 'a' exists from sm_90a and 'f'
    from sm_100f (data: arch_names.toml). With ``known_only`` the capability must be one the data knows.
    Invalid input raises KnowledgeError naming the token.
    """
    return split_arch_name(token, known_only=known_only)[1]


def _sort_key(name: str) -> tuple[int, int, int, int, int, str]:
    try:
        prefix, arch = split_arch_name(name)
    except KnowledgeError:
        return (1, 0, 0, 0, 0, name)
    prefix_rank = {"sm": 0, None: 0, "compute": 1, "lto": 2}[prefix]
    return (0, arch.major, arch.minor, VARIANTS.index(arch.variant), prefix_rank, name)


def sort_arch_names(names: Iterable[str]) -> tuple[str, ...]:
    """Unique names in numeric order: ``sm_75 < sm_80 < sm_90 < sm_90a < sm_100 < sm_100f < compute_120 ...``.

    For one arch, ``sm_`` sorts before ``compute_`` before ``lto_``. Strings that are not arch names sort
    last, alphabetically. Duplicates are dropped.
    """
    return tuple(sorted(set(names), key=_sort_key))


@dataclass(frozen=True)
class Target:
    """What a build carries for one arch: real code (``sass``: sm_XY) and/or virtual (``ptx``: compute_XY)."""

    arch: Arch
    sass: bool
    ptx: bool

    def __post_init__(self) -> None:
        if not (self.sass or self.ptx):
            raise KnowledgeError(f"target {self.arch} carries neither SASS nor PTX")


def _normalize(targets: Iterable[Target]) -> tuple[Target, ...]:
    merged: dict[Arch, tuple[bool, bool]] = {}
    for target in targets:
        sass, ptx = merged.get(target.arch, (False, False))
        merged[target.arch] = (sass or target.sass, ptx or target.ptx)
    return tuple(Target(arch, sass, ptx) for arch, (sass, ptx) in sorted(merged.items()))


@dataclass(frozen=True)
class ArchList:
    """A set of targets, one per arch, sorted oldest first (targets for one arch given twice are merged)."""

    targets: tuple[Target, ...] = field(default=())

    def __post_init__(self) -> None:
        object.__setattr__(self, "targets", _normalize(self.targets))

    @classmethod
    def of(cls, archs: Iterable[Arch | str], *, sass: bool = True, ptx: bool = False) -> ArchList:
        """An ArchList of ``archs`` (Arch or any name :func:`parse_arch` reads) with the same flags each."""
        return cls(tuple(Target(a if isinstance(a, Arch) else parse_arch(a), sass, ptx) for a in archs))

    def __iter__(self) -> Iterator[Target]:
        return iter(self.targets)

    def __len__(self) -> int:
        return len(self.targets)

    def archs(self) -> tuple[Arch, ...]:
        """Every arch with SASS or PTX, oldest first."""
        return tuple(t.arch for t in self.targets)

    def sass_archs(self) -> tuple[Arch, ...]:
        return tuple(t.arch for t in self.targets if t.sass)

    def ptx_archs(self) -> tuple[Arch, ...]:
        return tuple(t.arch for t in self.targets if t.ptx)

    def sass_names(self) -> tuple[str, ...]:
        """``('sm_80', 'sm_90a')``: the SASS names, in order."""
        return tuple(a.sass_name for a in self.sass_archs())

    def ptx_names(self) -> tuple[str, ...]:
        """``('compute_120',)``: the PTX names, in order."""
        return tuple(a.ptx_name for a in self.ptx_archs())

    def newest(self) -> Arch | None:
        """The newest arch in the list (None when empty)."""
        return self.targets[-1].arch if self.targets else None

    def with_newest_ptx(self) -> ArchList:
        """Every arch as SASS only, and the newest also as PTX: how a release arch table is built."""
        newest = self.newest()
        return ArchList(tuple(Target(a, True, a == newest) for a in self.archs()))
