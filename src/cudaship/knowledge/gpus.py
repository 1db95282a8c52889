"""GPU names ↔ compute capability (data/gpus.toml), and the capability rows ``cudaship gpus`` shows."""

from __future__ import annotations

import re
from dataclasses import dataclass

from cudaship.errors import KnowledgeError
from cudaship.knowledge import _data
from cudaship.knowledge.archs import Arch, parse_arch
from cudaship.once import once

DATA_FILE = "gpus.toml"


@dataclass(frozen=True)
class GpuGroup:
    """One compute capability with its generation name and well-known GPUs."""

    arch: Arch  #: no variant
    generation: str | None  #: "Hopper"
    names: tuple[str, ...]  #: ("H100", "H200", ...)
    shown: bool  #: part of the default ``gpus`` table

    @property
    def capability(self) -> str:
        return self.arch.capability

    @property
    def label(self) -> str:
        """``9.0 Hopper (H100, H200, GH200)``: at most two names."""
        names = ", ".join(self.names[:2])
        head = f"{self.capability} {self.generation}" if self.generation else self.capability
        return f"{head} ({names})" if names else head


@once
def gpu_groups() -> tuple[GpuGroup, ...]:
    """Every capability in gpus.toml, oldest first."""
    groups = []
    for key, raw in _data.table(DATA_FILE, "capabilities").items():
        if not isinstance(raw, dict) or not isinstance(raw.get("names", []), list):
            raise KnowledgeError(f'{DATA_FILE} [capabilities."{key}"] must be a table with a names list')
        arch = parse_arch(str(key), known_only=True)
        if arch.variant:
            raise KnowledgeError(f"{DATA_FILE}: capability {key!r} must not have a variant")
        groups.append(
            GpuGroup(
                arch=arch,
                generation=arch.generation,
                names=tuple(str(n) for n in raw.get("names", [])),
                shown=bool(raw.get("shown", True)),
            )
        )
    return tuple(sorted(groups, key=lambda g: g.arch))


def shown_capabilities() -> tuple[Arch, ...]:
    """The capabilities of the default ``gpus`` table (7.5 to 12.1), oldest first."""
    return tuple(g.arch for g in gpu_groups() if g.shown)


def group_for(capability: Arch | str) -> GpuGroup | None:
    """The group of a capability (``"8.6"`` or an Arch; the variant is ignored), None when not in the data."""
    arch = capability if isinstance(capability, Arch) else parse_arch(capability)
    for group in gpu_groups():
        if group.arch == arch.base:
            return group
    return None


def _norm(name: str) -> str:
    text = name.lower().replace("nvidia", " ").replace("geforce", " ").replace("tesla", " ")
    return re.sub(r"[^a-z0-9]+", " ", text).strip()


def capability_of(name: str) -> Arch:
    """The compute capability of a GPU named ``name`` (``"H100"``, ``"NVIDIA H200"``, ``"GeForce RTX 4090"``).

    Device names as drivers report them (``NVIDIA H100 80GB HBM3``) match by their leading words. A compute
    capability (``"8.6"``) is returned as is. Unknown names raise KnowledgeError.
    """
    try:
        return parse_arch(name, known_only=True).base
    except KnowledgeError:
        pass
    wanted = _norm(name)
    best: tuple[int, Arch] | None = None
    for group in gpu_groups():
        for known in group.names:
            key = _norm(known)
            matches = wanted == key or wanted.startswith(key + " ")
            if matches and (best is None or len(key) > best[0]):
                best = (len(key), group.arch)
    if best is None:
        raise KnowledgeError(
            f"unknown GPU {name!r}: not in {DATA_FILE} (give its compute capability, e.g. 8.6)"
        )
    return best[1]
