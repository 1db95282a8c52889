"""GPU names ↔ compute capability (data/gpus.toml), and the capability rows ``cudaship gpus`` shows."""

from __future__ import annotations

import difflib
import re
from collections.abc import Iterable
from dataclasses import dataclass

from cudaship.errors import KnowledgeError
from cudaship.knowledge import _data
from cudaship.knowledge.archs import Arch, parse_arch
from cudaship.knowledge.platforms import cuda_machines
from cudaship.knowledge.releases import release_for
from cudaship.knowledge.trains import Train, parse_train
from cudaship.once import once

DATA_FILE = "gpus.toml"

#: The machines ``machines`` may name: the ones NVIDIA ships a CUDA driver for that PyPI wheels target.


@dataclass(frozen=True)
class GpuGroup:
    """One compute capability with its generation name and well-known GPUs."""

    arch: Arch  #: no variant
    generation: str | None  #: "Hopper"
    names: tuple[str, ...]  #: ("H100", "H200", ...)
    shown: bool  #: part of the default ``gpus`` table
    machines: tuple[str, ...] = ()  #: machines whose wheels' CUDA stack serves it (``x86_64``, ``aarch64``)
    from_train: Train | None = None  #: the first train whose aarch64 stack serves it (Jetson Thor: 13.0)

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
    for key, raw in _data.section(DATA_FILE, "capabilities").tables():
        arch = parse_arch(key, known_only=True)
        if arch.variant:
            raise raw.fail(raw.key, "a capability must not have a variant")
        raw.require("machines", "a list of machines")
        machines = raw.strings("machines", single=False)
        for i, machine in enumerate(machines):
            if machine not in cuda_machines():
                raise raw.fail(
                    raw.dotted("machines") + f"[{i}]", f"must be one of {', '.join(cuda_machines())}"
                )
        from_train = raw.string("from_train")
        groups.append(
            GpuGroup(
                arch=arch,
                generation=arch.generation,
                names=raw.strings("names", single=False),
                shown=raw.boolean("shown", True),
                machines=machines,
                from_train=None if from_train is None else parse_train(from_train),
            )
        )
    return tuple(sorted(groups, key=lambda g: g.arch))


def shown_capabilities() -> tuple[Arch, ...]:
    """The capabilities of the default ``gpus`` table (7.0 to 12.1), oldest first."""
    return tuple(g.arch for g in gpu_groups() if g.shown)


def group_for(capability: Arch | str) -> GpuGroup | None:
    """The group of a capability (``"8.6"`` or an Arch; the variant is ignored), None when not in the data."""
    arch = capability if isinstance(capability, Arch) else parse_arch(capability)
    for group in gpu_groups():
        if group.arch == arch.base:
            return group
    return None


def machine_gpus(machine: str) -> tuple[GpuGroup, ...]:
    """The capability groups with a GPU that wheels of ``machine`` (``x86_64``, ``aarch64``) run on
    (``machines`` in gpus.toml), oldest first: the one rule of which GPUs a wheel is judged against, read by
    ``audit``'s coverage (:func:`train_gpus`) and by ``gpus``' default rows (:func:`default_capabilities`)."""
    return tuple(g for g in gpu_groups() if machine in g.machines)


def default_capabilities(machines: Iterable[str | None]) -> tuple[Arch, ...]:
    """The default rows of ``gpus`` for inputs built for ``machines``: each shown capability with a GPU on one
    of them (:func:`machine_gpus`), so an x86_64 or Windows wheel is never judged against an Arm-only GPU
    (Thor 11.0, GB10 12.1) nor a Tegra one (Jetson Orin 8.7, served by JetPack's own CUDA). Every shown
    capability (7.5 to 12.1) when no machine is known (a bare cubin, PTX or fatbin; a ``py3-none-any``
    wheel) or one is not a machine CUDA wheels target."""
    wanted = set(machines)
    if not wanted or any(m is None or m not in cuda_machines() for m in wanted):
        return shown_capabilities()
    on = {g.arch for m in wanted for g in machine_gpus(m or "")}
    return tuple(g.arch for g in gpu_groups() if g.shown and g.arch in on)


def train_gpus(train: Train, machine: str) -> tuple[GpuGroup, ...]:
    """The GPUs a build of ``train`` runs on for a wheel of ``machine`` (``x86_64``, ``aarch64``), as
    capability groups, oldest first: each capability with a GPU on that machine (:func:`machine_gpus`, from
    ``from_train`` on) whose SM the train's nvcc compiles for (releases.toml ``sms``). Empty for a machine
    no CUDA driver serves. UnknownTrainError when the data does not know the train."""

    sms = set(release_for(train).sms)
    line = train.line
    return tuple(
        g
        for g in machine_gpus(machine)
        if g.arch.sm in sms and (g.from_train is None or line >= g.from_train)
    )


#: Words that vendors and drivers put before a GPU's model name, ignored when matching: "NVIDIA GeForce RTX
#: 4090" is the "RTX 4090".
_VENDOR_WORDS = frozenset({"nvidia", "geforce", "tesla", "quadro"})


def _norm(name: str) -> str:
    """Lower case, punctuation as spaces, vendor words dropped: ``NVIDIA GeForce RTX-4090`` → ``rtx 4090``."""
    words = re.sub(r"[^a-z0-9]+", " ", name.lower()).split()
    return " ".join(w for w in words if w not in _VENDOR_WORDS)


def known_gpu_names() -> tuple[str, ...]:
    """Every GPU name the data knows, oldest capability first."""
    return tuple(n for g in gpu_groups() for n in g.names)


def close_gpu_names(name: str, limit: int = 3) -> tuple[str, ...]:
    """Known GPU names that look like ``name`` (for "did you mean"), best first."""
    by_key: dict[str, str] = {}
    for known in known_gpu_names():
        by_key.setdefault(_norm(known), known)
    wanted = _norm(name) or name.lower()
    # names holding the typed words ("6000" → RTX 6000 Ada, RTX PRO 6000 Blackwell), then look-alikes
    holding = [k for k in by_key if f" {wanted} " in f" {k} "]
    similar = difflib.get_close_matches(wanted, list(by_key), n=limit, cutoff=0.6)
    close = list(dict.fromkeys([*holding, *similar]))[:limit]
    return tuple(by_key[k] for k in close)


def capability_of(name: str) -> Arch:
    """The compute capability of a GPU named ``name`` (``"H100"``, ``"NVIDIA H200"``, ``"GeForce RTX 4090"``,
    ``"rtx 6000 ada"``).

    Matching ignores case, punctuation and vendor words (NVIDIA, GeForce, Tesla, Quadro). Device names as
    drivers report them (``NVIDIA H100 80GB HBM3``) match by their leading words. A compute capability
    (``"8.6"``) is returned as is. Unknown names raise KnowledgeError suggesting close known names; the
    message never names cudaship's data files.
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
    if best is not None:
        return best[1]
    # a part of one name only ("4090", "6000 Ada"): taken when every name holding it has one capability
    padded = f" {wanted} "
    holding = {g.arch for g in gpu_groups() for known in g.names if wanted and padded in f" {_norm(known)} "}
    if len(holding) == 1:
        return holding.pop()
    close = close_gpu_names(name)
    hint = f" (did you mean {', '.join(close)}?)" if close else ""
    raise KnowledgeError(f"unknown GPU {name.strip()!r}{hint}: give its compute capability instead, e.g. 8.6")
