"""Variants: libraries that are alternatives, one of which is loaded at run time.

bitsandbytes ships ``libbitsandbytes_cuda118.so`` ... ``libbitsandbytes_cuda132.so`` (and ``_cpu``,
``_rocm64``, ``_xpu2025``) and loads the one that matches the CUDA (or ROCm, XPU) build of the torch it runs
with. Such a library is judged against its own train, and a GPU is served by the wheel when any variant of a
group serves it, not only when all do.

Recognised by name: files in one directory with one stem and one extension whose stems end in a backend
suffix (``_cuda118``, ``_cu128``, ``_cpu``, ``_rocm64``, ``_xpu2025``, ``_mps``) form a group when there are
at least two of them and at least one is a CUDA variant. ``cuda118`` / ``cu118`` name CUDA 11.8 (the last
digit is the minor, as in PyTorch's ``+cu118`` tags). The audit policy can declare more groups
(``[audit.variants.groups]``) and switch recognition by name off.
"""

from __future__ import annotations

import posixpath
import re
from collections.abc import Iterable
from dataclasses import dataclass

from cudaship.errors import KnowledgeError
from cudaship.knowledge.trains import Train, parse_train

_SUFFIX = re.compile(
    r"^(?P<stem>.+?)[_-](?P<backend>cuda|cu|rocm|xpu|cpu|mps)(?P<version>\d{0,4})(?P<ext>(?:\.[A-Za-z0-9]+)+)$",
    re.IGNORECASE,
)


@dataclass(frozen=True)
class Variant:
    """One library of a group of alternatives."""

    path: str
    group: str  #: ``bitsandbytes/libbitsandbytes_*.so``: the group's name
    backend: str  #: ``cuda``, ``rocm``, ``xpu``, ``cpu``, ``mps``
    train: Train | None  #: the CUDA train of a CUDA variant (None for other backends, or unknown)
    label: str  #: ``cuda118``, ``rocm64``, ``cpu``

    @property
    def is_cuda(self) -> bool:
        return self.backend == "cuda"


def _parse(path: str) -> tuple[str, Variant] | None:
    directory, base = posixpath.split(path)
    m = _SUFFIX.match(base)
    if m is None:
        return None
    backend = m.group("backend").lower()
    version = m.group("version")
    if backend == "cu":
        backend = "cuda"
    if backend == "cuda" and not version:
        return None  # "_cuda.so" names no version: not an alternative per CUDA version
    if backend in ("cpu", "mps") and version:
        return None
    train: Train | None = None
    if backend == "cuda":
        try:
            train = parse_train(f"cu{version}")
        except KnowledgeError:
            return None
    group = posixpath.join(directory, f"{m.group('stem')}_*{m.group('ext')}")
    return group, Variant(path, group, backend, train, f"{backend}{version}")


def recognise(paths: Iterable[str]) -> dict[str, Variant]:
    """The variants among ``paths`` (installed paths, ``/``-separated), by path."""
    groups: dict[str, list[Variant]] = {}
    for path in paths:
        parsed = _parse(path)
        if parsed is not None:
            groups.setdefault(parsed[0], []).append(parsed[1])
    out: dict[str, Variant] = {}
    for members in groups.values():
        if len(members) >= 2 and any(v.is_cuda for v in members):
            out.update((v.path, v) for v in members)
    return out


def declared(group: str, path: str, train: str | None) -> Variant:
    """A variant the policy declares (``train`` as written there, else from the name when it has one)."""
    parsed = _parse(path)
    found = parse_train(train) if train else (parsed[1].train if parsed else None)
    label = parsed[1].label if parsed else (f"cu{found.major}{found.minor}" if found else "variant")
    return Variant(
        path, group, "cuda" if found is not None else (parsed[1].backend if parsed else "cuda"), found, label
    )


#: ``libtorchcodec_core7.so``: a stem ending in a number right before the extension (no backend name)
_NUMBERED = re.compile(
    r"^(?P<stem>.*?[A-Za-z_])(?P<number>\d{1,3})(?P<ext>\.(?:so|dylib|dll|pyd))$", re.IGNORECASE
)


def numbered_siblings(paths: Iterable[str]) -> dict[str, tuple[str, int]]:
    """Libraries that differ only by a number before the extension, in one directory (torchcodec's
    ``libtorchcodec_core4.so`` ... ``libtorchcodec_core9.so``, one per FFmpeg major): path -> (the group,
    ``torchcodec/libtorchcodec_core*.so``, the number). A group needs at least two members; whether they are
    alternatives is decided by what they import (a library family of several releases, see
    :func:`cudaship.knowledge.system_libraries.family_member`), not by the names alone."""
    groups: dict[str, list[tuple[str, int]]] = {}
    for path in paths:
        directory, base = posixpath.split(path)
        m = _NUMBERED.match(base)
        if m is None:
            continue
        group = posixpath.join(directory, f"{m.group('stem')}*{m.group('ext')}")
        groups.setdefault(group, []).append((path, int(m.group("number"))))
    return {
        path: (group, number)
        for group, members in groups.items()
        if len({n for _p, n in members}) >= 2
        for path, number in members
    }
