"""GPU architectures and the arch lists users write, in every syntax, parsed and printed.

An :class:`Arch` is one compute capability with its variant (``""``, ``"a"`` arch-specific, ``"f"`` family).
An :class:`ArchList` says, per arch, whether a build carries real code (SASS, ``sm_XY``) and/or virtual code
(PTX, ``compute_XY``). :func:`parse_arch_list` reads the syntaxes below and :func:`format_arch_list`
writes them, so that ``parse_arch_list(format_arch_list(x, s), s) == x`` for every list the syntax can
express.

=========  ==================================================================================================
syntax     example
=========  ==================================================================================================
torch      ``TORCH_CUDA_ARCH_LIST``: ``8.0;8.6;9.0+PTX``, ``9.0a``, names such as ``Ampere``, ``Hopper``
           (``;``, ``,`` or spaces between). Each X.Y is SASS; ``+PTX`` adds the PTX of the same arch.
cmake      ``CMAKE_CUDA_ARCHITECTURES``: ``80;86`` (each SASS + PTX), ``80-real`` (SASS),
           ``90-virtual`` (PTX), ``120a-real``, ``all``, ``all-major`` (need a CUDA train). ``native`` is an
           error: it needs a GPU.
gencode    nvcc flags: ``-gencode arch=compute_90a,code=[sm_90a,compute_90a]``, ``-arch=sm_80`` (SASS + PTX),
           ``-arch=compute_80`` (PTX), ``-arch=X -code=Y,Z``, ``--generate-code=...``, ``-arch=all``.
list       cuobjdump / ``torch.cuda.get_arch_list()`` names: ``sm_90a compute_120`` (also ``['sm_80', ...]``).
plain      ``9.0 8.6`` or ``90 86``: SASS only.
auto       guess from the text (the rules are in :func:`detect_syntax`).
=========  ==================================================================================================

Every problem is a :class:`~cudaship.errors.KnowledgeError` naming the offending token.
"""

from __future__ import annotations

import re
from collections.abc import Iterable, Iterator
from dataclasses import dataclass, field
from typing import TYPE_CHECKING

from cudaship.errors import KnowledgeError
from cudaship.knowledge import _data
from cudaship.once import once
from cudaship.records.binary import DeviceCode, DeviceCodeKind

if TYPE_CHECKING:
    from cudaship.knowledge.trains import Train

VARIANTS: tuple[str, ...] = ("", "a", "f")

#: Syntaxes :func:`parse_arch_list` reads ("auto" guesses) and :func:`format_arch_list` writes.
SYNTAXES: tuple[str, ...] = ("torch", "cmake", "gencode", "list", "plain")


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


@once
def _torch_names() -> dict[str, str]:
    return {str(k).lower(): str(v) for k, v in _data.table("arch_names.toml", "torch_names").items()}


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


# --------------------------------------------------------------------------------------------------- parsing

_SPLIT = re.compile(r"[;,\s]+")


def _tokens(text: str) -> list[str]:
    return [t for t in _SPLIT.split(text.strip()) if t]


def detect_syntax(text: str) -> str:
    """Guess the syntax of an arch list.

    nvcc flags (a token starting with ``-``, or ``arch=`` / ``code=``) → gencode; any ``sm_`` / ``compute_`` /
    ``lto_`` name → list; ``all``, ``all-major``, ``native``, ``OFF`` or a ``-real`` / ``-virtual`` suffix →
    cmake; a dotted number, ``+PTX`` or a name such as ``Hopper`` → torch; bare numbers (``80;86``) → cmake
    when separated by ``;`` (CMake's list separator), else plain.
    """
    stripped = text.strip()
    if re.search(r"(^|\s)-|arch=|code=", stripped):
        return "gencode"
    tokens = _tokens(stripped.strip("[]").replace("'", " ").replace('"', " "))
    lowered = [t.lower() for t in tokens]
    if any(t.startswith(("sm_", "compute_", "lto_")) for t in lowered):
        return "list"
    if any(t in ("all", "all-major", "native", "off") or t.endswith(("-real", "-virtual")) for t in lowered):
        return "cmake"
    if any("." in t or t.endswith("+ptx") or t in _torch_names() for t in lowered):
        return "torch"
    if tokens and all(re.fullmatch(r"\d+[af]?", t) for t in lowered):
        return "cmake" if ";" in stripped else "plain"
    return "torch"


def _expand_all(keyword: str, train: Train | str | None, token: str) -> ArchList:
    if train is None:
        raise KnowledgeError(f"{token!r} depends on the CUDA release; give a train (e.g. cu132) to expand it")
    from cudaship.knowledge.releases import release_for

    release = release_for(train)
    return release.all_major if keyword == "all-major" else release.all


def _parse_torch(text: str) -> list[Target]:
    targets: list[Target] = []
    for token in _tokens(text):
        named = _torch_names().get(token.lower())
        if named is not None:
            targets.extend(_parse_torch(named))
            continue
        body, ptx = token, False
        if body.lower().endswith("+ptx"):
            body, ptx = body[:-4], True
        if "." not in body:
            raise KnowledgeError(
                f"invalid TORCH_CUDA_ARCH_LIST entry {token!r}: expected X.Y, X.Ya, X.Y+PTX or a name"
            )
        targets.append(Target(parse_arch(body, known_only=True), True, ptx))
    return targets


def _parse_cmake(text: str, train: Train | str | None) -> list[Target]:
    tokens = _tokens(text)
    targets: list[Target] = []
    for token in tokens:
        lowered = token.lower()
        if lowered == "native":
            raise KnowledgeError(
                "'native' means the GPUs of the machine that builds: it needs a GPU; write the capabilities "
                "instead (cudaship doctor shows this machine's)"
            )
        if lowered == "off":
            raise KnowledgeError("'OFF' leaves the architectures to nvcc's default: there is no list to read")
        if lowered in ("all", "all-major"):
            if len(tokens) != 1:
                raise KnowledgeError(f"{token!r} must be the only entry of CMAKE_CUDA_ARCHITECTURES")
            return list(_expand_all(lowered, train, token).targets)
        match = re.fullmatch(r"(\d+[af]?)(-real|-virtual)?", lowered)
        if not match:
            raise KnowledgeError(
                f"invalid CMAKE_CUDA_ARCHITECTURES entry {token!r}: expected XY, XY-real, XY-virtual, "
                "XYa-real, all or all-major"
            )
        arch = parse_arch(match.group(1), known_only=True)
        suffix = match.group(2)
        targets.append(Target(arch, suffix != "-virtual", suffix != "-real"))
    return targets


_GENCODE_OPTIONS = ("-gencode", "--generate-code")
_ARCH_OPTIONS = ("-arch", "--gpu-architecture")
_CODE_OPTIONS = ("-code", "--gpu-code")


def _option_values(text: str) -> list[tuple[str, str]]:
    """Pair each recognized nvcc option with its value (``-opt=v``, ``-opt v``); anything else is an error."""
    words = text.replace('"', "").replace("'", "").split()
    pairs: list[tuple[str, str]] = []
    i = 0
    known = _GENCODE_OPTIONS + _ARCH_OPTIONS + _CODE_OPTIONS
    while i < len(words):
        word = words[i]
        name, sep, value = word.partition("=")
        if name in known and sep and name != word:
            pairs.append((name, value))
            i += 1
        elif word in known:
            if i + 1 >= len(words):
                raise KnowledgeError(f"nvcc option {word!r} has no value")
            pairs.append((word, words[i + 1]))
            i += 2
        else:
            raise KnowledgeError(
                f"unexpected {word!r} in nvcc flags: expected -gencode arch=compute_XY,code=..., -arch=... "
                "or -code=..."
            )
    return pairs


def _code_names(value: str) -> list[str]:
    return [c for c in re.split(r"[\[\],\s]+", value) if c]


def _code_target(code: str, option: str) -> Target:
    prefix, arch = split_arch_name(code, known_only=True)
    if prefix == "sm":
        return Target(arch, True, False)
    if prefix == "compute":
        return Target(arch, False, True)
    if prefix == "lto":
        raise KnowledgeError(f"{code!r} in {option!r}: LTO-IR is not run-time code and has no arch-list form")
    raise KnowledgeError(f"invalid code {code!r} in {option!r}: expected sm_XY or compute_XY")


def _parse_gencode(text: str, train: Train | str | None) -> list[Target]:
    targets: list[Target] = []
    arch_value: str | None = None
    code_value: str | None = None
    for option, value in _option_values(text):
        if option in _GENCODE_OPTIONS:
            match = re.fullmatch(r"arch=([^,]+),code=(.+)", value)
            if not match:
                raise KnowledgeError(f"invalid {option} value {value!r}: expected arch=compute_XY,code=sm_XY")
            split_arch_name(match.group(1), known_only=True)  # validates the virtual arch
            targets.extend(_code_target(c, value) for c in _code_names(match.group(2)))
        elif option in _ARCH_OPTIONS:
            if arch_value is not None:
                raise KnowledgeError(f"{option} given twice ({arch_value!r} and {value!r})")
            arch_value = value
        else:
            if code_value is not None:
                raise KnowledgeError(f"{option} given twice ({code_value!r} and {value!r})")
            code_value = value
    if arch_value is not None:
        lowered = arch_value.lower()
        if lowered == "native":
            raise KnowledgeError("'-arch=native' means the GPUs of the machine that builds: it needs a GPU")
        if lowered in ("all", "all-major"):
            if code_value is not None:
                raise KnowledgeError(f"-arch={arch_value} takes no -code")
            targets.extend(_expand_all(lowered, train, arch_value).targets)
        elif code_value is not None:
            split_arch_name(arch_value, known_only=True)
            targets.extend(_code_target(c, "-code") for c in _code_names(code_value))
        else:
            prefix, arch = split_arch_name(arch_value, known_only=True)
            if prefix not in ("sm", "compute"):
                raise KnowledgeError(
                    f"invalid -arch value {arch_value!r}: expected sm_XY, compute_XY, all or all-major"
                )
            targets.append(Target(arch, prefix == "sm", True))
    elif code_value is not None:
        raise KnowledgeError("-code needs -arch (nvcc: --gpu-code without --gpu-architecture)")
    return targets


def _parse_list(text: str) -> list[Target]:
    targets: list[Target] = []
    for token in _tokens(text.strip().strip("[]").replace("'", " ").replace('"', " ")):
        prefix, arch = split_arch_name(token, known_only=True)
        if prefix == "lto":
            raise KnowledgeError(f"{token!r}: LTO-IR is not run-time code and has no arch-list form")
        if prefix is None:
            raise KnowledgeError(f"invalid entry {token!r} in a name list: expected sm_XY or compute_XY")
        targets.append(Target(arch, prefix == "sm", prefix == "compute"))
    return targets


def _parse_plain(text: str) -> list[Target]:
    targets: list[Target] = []
    for token in _tokens(text):
        prefix, arch = split_arch_name(token, known_only=True)
        if prefix is not None:
            raise KnowledgeError(f"invalid entry {token!r} in a plain list: expected X.Y or XY")
        targets.append(Target(arch, True, False))
    return targets


def parse_arch_list(text: str, syntax: str = "auto", *, train: Train | str | None = None) -> ArchList:
    """Parse an arch list written in ``syntax`` (module docstring; ``auto`` uses :func:`detect_syntax`).

    ``train`` (a :class:`~cudaship.knowledge.trains.Train` or ``"cu132"``) expands ``all`` / ``all-major`` to
    the SMs that release supports (releases.toml). Unknown capabilities, bad tokens, ``native`` and an
    empty list raise KnowledgeError naming the token.
    """
    if syntax not in ("auto", *SYNTAXES):
        raise KnowledgeError(f"unknown arch-list syntax {syntax!r} (expected auto, {', '.join(SYNTAXES)})")
    if not text.strip():
        raise KnowledgeError("empty architecture list")
    chosen = detect_syntax(text) if syntax == "auto" else syntax
    if chosen == "torch":
        targets = _parse_torch(text)
    elif chosen == "cmake":
        targets = _parse_cmake(text, train)
    elif chosen == "gencode":
        targets = _parse_gencode(text, train)
    elif chosen == "list":
        targets = _parse_list(text)
    else:
        targets = _parse_plain(text)
    if not targets:
        raise KnowledgeError(f"no architectures in {text.strip()!r}")
    return ArchList(tuple(targets))


# -------------------------------------------------------------------------------------------------- printing


def _format_torch(archs: ArchList) -> str:
    parts = []
    for t in archs:
        if not t.sass:
            raise KnowledgeError(f"TORCH_CUDA_ARCH_LIST cannot say PTX without SASS ({t.arch.ptx_name})")
        parts.append(t.arch.dotted + ("+PTX" if t.ptx else ""))
    return ";".join(parts)


def _format_cmake(archs: ArchList) -> str:
    parts = []
    for t in archs:
        number = f"{t.arch.sm}{t.arch.variant}"
        parts.append(number if t.sass and t.ptx else number + ("-real" if t.sass else "-virtual"))
    return ";".join(parts)


def _format_gencode(archs: ArchList) -> str:
    parts = []
    for t in archs:
        codes = [c for c, on in ((t.arch.sass_name, t.sass), (t.arch.ptx_name, t.ptx)) if on]
        code = codes[0] if len(codes) == 1 else "[" + ",".join(codes) + "]"
        parts.append(f"-gencode arch={t.arch.ptx_name},code={code}")
    return " ".join(parts)


def _format_list(archs: ArchList) -> str:
    names = []
    for t in archs:
        if t.sass:
            names.append(t.arch.sass_name)
        if t.ptx:
            names.append(t.arch.ptx_name)
    return " ".join(names)


def _format_plain(archs: ArchList) -> str:
    for t in archs:
        if t.ptx:
            raise KnowledgeError(f"a plain list cannot say PTX ({t.arch.ptx_name}); use list or cmake")
    return " ".join(t.arch.dotted for t in archs)


def format_arch_list(archs: ArchList, syntax: str) -> str:
    """Write ``archs`` in ``syntax`` (torch, cmake, gencode, list, plain): the inverse of parse_arch_list.

    torch: ``8.0;8.6;9.0+PTX``; cmake: ``80-real;86-real;90``; gencode: one ``-gencode arch=...,code=...``
    per arch; list: ``sm_80 sm_86 sm_90 compute_90``; plain: ``8.0 8.6 9.0``. A list the syntax cannot
    express (PTX without SASS for torch, any PTX for plain) raises KnowledgeError.
    """
    if syntax == "torch":
        return _format_torch(archs)
    if syntax == "cmake":
        return _format_cmake(archs)
    if syntax == "gencode":
        return _format_gencode(archs)
    if syntax == "list":
        return _format_list(archs)
    if syntax == "plain":
        return _format_plain(archs)
    raise KnowledgeError(f"unknown arch-list syntax {syntax!r} (expected {', '.join(SYNTAXES)})")


def sass_of(codes: Iterable[DeviceCode]) -> tuple[str, ...]:
    """Sorted unique SASS arch names over some device code (``sm_90a``, ``sm_100f``)."""
    return sort_arch_names({d.arch for d in codes if d.kind is DeviceCodeKind.SASS})


def ptx_of(codes: Iterable[DeviceCode]) -> tuple[str, ...]:
    """Sorted unique PTX arch names over some device code (``compute_120``)."""
    return sort_arch_names({d.arch for d in codes if d.kind is DeviceCodeKind.PTX})
