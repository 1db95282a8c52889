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
from collections.abc import Iterable

from cudaship.errors import KnowledgeError
from cudaship.knowledge import _data
from cudaship.knowledge.arch_names import (
    VARIANTS,
    Arch,
    ArchList,
    Target,
    known_archs,
    parse_arch,
    sort_arch_names,
    split_arch_name,
)
from cudaship.knowledge.releases import release_for
from cudaship.knowledge.trains import Train
from cudaship.once import once
from cudaship.records.binary import DeviceCode, DeviceCodeKind

# The records and single-name parsing live in arch_names (below this module and releases); they stay
# importable from here, where callers have always found them.
__all__ = [
    "SYNTAXES",
    "VARIANTS",
    "Arch",
    "ArchList",
    "Target",
    "detect_syntax",
    "format_arch_list",
    "known_archs",
    "parse_arch",
    "parse_arch_list",
    "ptx_of",
    "sass_of",
    "sort_arch_names",
    "split_arch_name",
]

#: Syntaxes :func:`parse_arch_list` reads ("auto" guesses) and :func:`format_arch_list` writes.
SYNTAXES: tuple[str, ...] = ("torch", "cmake", "gencode", "list", "plain")


@once
def _torch_names() -> dict[str, str]:
    return {str(k).lower(): str(v) for k, v in _data.table("arch_names.toml", "torch_names").items()}


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
