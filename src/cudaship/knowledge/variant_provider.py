"""The NVIDIA wheel-variant provider, emulated (data/variant_providers.toml; docs/formats.md section 8).

What ``nvidia-variant-provider`` reports for a machine (:func:`supported_values`: the driver's CUDA version
and the highest GPU capability in, the values per feature out, best first), and what one declared value means:
:func:`cuda_value` reads a ``cuda_version_*_bound`` value, :func:`sm_value` an ``sm_arch`` value, and
:func:`admits` says whether a GPU's capability is one the value is offered for. A value the provider never
reports (``12.8.1``, ``86_virtual``, ``90``) matches no machine: :func:`value_problem` says why.
Pure functions over the data file; nothing is detected here (``probe/`` reads this machine).
"""

from __future__ import annotations

from dataclasses import dataclass

from cudaship.errors import KnowledgeError
from cudaship.knowledge import _data
from cudaship.knowledge.arch_names import Arch
from cudaship.knowledge.archs import parse_arch
from cudaship.once import once

DATA_FILE = "variant_providers.toml"
LOWER = "cuda_version_lower_bound"
UPPER = "cuda_version_upper_bound"
SM_ARCH = "sm_arch"


@dataclass(frozen=True)
class NvidiaProvider:
    namespace: str
    features: tuple[str, ...]  #: priority order
    cuda_majors: tuple[int, int]  #: inclusive
    cuda_minors: tuple[int, int]  #: inclusive
    min_capability: Arch
    force_driver: str
    force_sm_arch: str
    requires: str
    plugin_api: str
    enable_if: str


@once
def nvidia() -> NvidiaProvider:
    raw = _data.section(DATA_FILE, "nvidia")

    def pair(name: str) -> tuple[int, int]:
        value = raw.require(name)
        if not (isinstance(value, list) and len(value) == 2 and all(isinstance(v, int) for v in value)):
            raise raw.wrong(name, "two integers (an inclusive range)", value)
        return int(value[0]), int(value[1])

    return NvidiaProvider(
        namespace=raw.text("namespace"),
        features=raw.strings("features", single=False, required=True),
        cuda_majors=pair("cuda_majors"),
        cuda_minors=pair("cuda_minors"),
        min_capability=parse_arch(raw.text("min_capability")),
        force_driver=raw.text("force_driver"),
        force_sm_arch=raw.text("force_sm_arch"),
        requires=raw.text("requires"),
        plugin_api=raw.text("plugin_api"),
        enable_if=raw.text("enable_if"),
    )


def cuda_text(version: tuple[int, int], *, bare_major: bool = False) -> str:
    """``(12, 8)`` → ``12.8``; ``bare_major``: ``(13, 0)`` → ``13``."""
    major, minor = version
    return f"{major}" if bare_major and minor == 0 else f"{major}.{minor}"


def cuda_value(value: str) -> tuple[int, int] | None:
    """A ``cuda_version_*_bound`` value as (major, minor), ``13`` as (13, 0); None when the provider never
    reports it (not ``M`` or ``M.m`` with M and m in its ranges, written without leading zeros)."""
    p = nvidia()
    major_text, dot, minor_text = value.partition(".")
    texts = [major_text] + ([minor_text] if dot else [])
    if not all(t.isdigit() and str(int(t)) == t for t in texts):
        return None
    major, minor = int(major_text), int(minor_text) if dot else 0
    if not (p.cuda_majors[0] <= major <= p.cuda_majors[1] and p.cuda_minors[0] <= minor <= p.cuda_minors[1]):
        return None
    return major, minor


@dataclass(frozen=True)
class SmValue:
    """An ``sm_arch`` value: ``90_real`` is (9.0, real)."""

    arch: Arch
    real: bool

    @property
    def text(self) -> str:
        return f"{self.arch.sm}_{'real' if self.real else 'virtual'}"


def sm_value(value: str) -> SmValue | None:
    """``90_real`` → 9.0 real, ``120_virtual`` → 12.0 virtual; None when it is no ``{sm}_real|virtual``."""
    number, _, kind = value.partition("_")
    if kind not in ("real", "virtual") or not number.isdigit() or len(number) < 2 or number[0] == "0":
        return None
    try:
        return SmValue(Arch.from_sm(int(number)), kind == "real")
    except KnowledgeError:
        return None


def value_problem(feature: str, value: str) -> str | None:
    """Why the provider never reports ``nvidia :: feature :: value`` (so the variant matches no machine), or
    None when it can."""
    p = nvidia()
    if feature not in p.features:
        return f"the NVIDIA provider has no feature {feature!r} (it has {', '.join(p.features)})"
    if feature in (LOWER, UPPER):
        if cuda_value(value) is None:
            lo, hi = p.cuda_majors
            return (
                f"the provider reports CUDA versions as 'M' or 'M.m' (M {lo}-{hi}, m {p.cuda_minors[0]}-"
                f"{p.cuda_minors[1]}, no leading zeros): {value!r} matches no machine"
            )
        return None
    sm = sm_value(value)
    if sm is None:
        return (
            f"the provider reports sm_arch as '<sm>_real' or '<sm>_virtual' (90_real): {value!r} matches no "
            "machine"
        )
    if not sm.real and sm.arch.minor != 0:
        return (
            f"the provider reports only '<major>0_virtual' ({sm.arch.major}0_virtual for a "
            f"{sm.arch.major}.x GPU): {value!r} matches no machine"
        )
    if sm.arch < p.min_capability:
        return (
            f"the provider reports no sm_arch for GPUs below {p.min_capability.capability}: {value!r} "
            "matches no machine"
        )
    return None


def admits(value: SmValue, capability: Arch) -> bool:
    """Whether a machine whose highest GPU is ``capability`` is offered ``value``: ``XY_real`` on X.Z with
    Z >= Y, ``X0_virtual`` on every X.Z (never across majors)."""
    device = capability.base
    if device.major != value.arch.major or device < nvidia().min_capability:
        return False
    return device.minor >= value.arch.minor if value.real else True


def supported_values(cuda: tuple[int, int], capability: Arch | None) -> dict[str, tuple[str, ...]]:
    """What the provider reports on a machine whose driver supports CUDA ``cuda`` (major, minor) and whose
    highest GPU is ``capability`` (None: no GPU), feature → values, best first; empty when ``cuda`` is outside
    the provider's range."""
    p = nvidia()
    (lo_major, hi_major), (lo_minor, hi_minor) = p.cuda_majors, p.cuda_minors
    major, minor = cuda
    if not (lo_major <= major <= hi_major and lo_minor <= minor <= hi_minor):
        return {}
    lower: list[str] = []
    for m in range(major, lo_major - 1, -1):
        top = minor if m == major else hi_minor
        lower.extend(f"{m}.{k}" for k in range(top, lo_minor - 1, -1))
        lower.append(f"{m}")
    upper: list[str] = []
    for m in range(hi_major, major - 1, -1):
        if m > major:
            upper.extend(f"{m}.{k}" for k in range(hi_minor, lo_minor - 1, -1))
            upper.append(f"{m}")
        else:
            upper.extend(f"{m}.{k}" for k in range(hi_minor, minor, -1))
    out = {LOWER: tuple(lower), UPPER: tuple(upper)}
    if capability is not None and capability.base >= p.min_capability:
        x, y = capability.major, capability.minor
        out[SM_ARCH] = (*(f"{x}{k}_real" for k in range(y, -1, -1)), f"{x}0_virtual")
    return out
