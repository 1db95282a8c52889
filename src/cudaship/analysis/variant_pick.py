"""Which variant of a release an installer picks on a machine (PEP 825's filtering and "Variant ordering";
docs/formats.md section 8), given the values the providers report there.

``supported`` maps (namespace, feature) to the values a provider reports on the machine, best first (for the
NVIDIA provider: :func:`cudaship.knowledge.variant_provider.supported_values`). A variant is compatible when,
for every feature it names, one of its values is supported; the null variant always is. Compatible variants
are ordered by PEP 825's algorithm: namespaces in ``default-priorities.namespace`` order, features in
``default-priorities.feature`` order then the provider's, values in ``default-priorities.property`` order then
the provider's; each variant's best (namespace, feature, value) index triples, sorted, compared in order; a
variant whose list is a prefix of another's sorts after it; ties by label. The null variant sorts last.

:func:`pick` is the one answer to "which variant does an installer pick on this machine", for ``variant
release``, ``gpus`` and ``doctor``; :func:`forced_machine` and :func:`provider_machine` say what the provider
sees here (its override variables over the probed GPU and driver).
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass

from cudaship import envvars
from cudaship.errors import CudashipError, UsageError
from cudaship.knowledge.arch_names import Arch
from cudaship.knowledge.archs import parse_arch
from cudaship.knowledge.driver import parse_driver
from cudaship.knowledge.releases import published_trains
from cudaship.knowledge.variant_provider import cuda_text, nvidia, supported_values
from cudaship.wheel.records import VariantDescription, VariantMetadata, VariantPriorities, WheelVariant

Supported = Mapping[tuple[str, str], Sequence[str]]

#: after every real index: a variant whose key list ends first sorts after the longer one
_END = (1 << 30, 0, 0)


def compatible(desc: VariantDescription, supported: Supported) -> bool:
    """Every feature ``desc`` names has one of its values among the supported ones."""
    features = {(p.namespace, p.feature) for p in desc.properties}
    for key in features:
        allowed = supported.get(key, ())
        if not any(v in allowed for v in desc.values(*key)):
            return False
    return True


def _orders(
    priorities: VariantPriorities, supported: Supported
) -> tuple[list[str], dict[str, list[str]], dict[tuple[str, str], list[str]]]:
    namespaces = list(priorities.namespaces)
    features: dict[str, list[str]] = {}
    values: dict[tuple[str, str], list[str]] = {}
    for ns in namespaces:
        order = list(priorities.features_of(ns))
        for n, f in supported:
            if n == ns and f not in order:
                order.append(f)
        features[ns] = order
        for f in order:
            vals = list(priorities.values_of(ns, f))
            vals += [v for v in supported.get((ns, f), ()) if v not in vals]
            values[(ns, f)] = vals
    return namespaces, features, values


def order(
    variants: Sequence[VariantDescription], priorities: VariantPriorities, supported: Supported
) -> list[VariantDescription]:
    """The compatible ``variants``, most preferred first (the installer installs the first)."""
    namespaces, features, values = _orders(priorities, supported)

    def key(desc: VariantDescription) -> tuple[list[tuple[int, int, int]], str]:
        triples: list[tuple[int, int, int]] = []
        for ns, f in dict.fromkeys((p.namespace, p.feature) for p in desc.properties):
            ranked = values.get((ns, f), [])
            best = min(ranked.index(v) for v in desc.values(ns, f) if v in ranked)
            triples.append((namespaces.index(ns), features[ns].index(f), best))
        return [*sorted(triples), _END], desc.label

    return sorted((d for d in variants if compatible(d, supported)), key=key)


def pick(
    variants: Sequence[VariantDescription],
    priorities: VariantPriorities,
    capability: Arch | None,
    cuda: tuple[int, int] | None,
) -> VariantDescription | None:
    """The variant an installer installs on a machine whose highest GPU is ``capability`` and whose driver
    reports CUDA ``cuda`` (None: no driver, so the NVIDIA provider reports nothing), as the NVIDIA provider
    (:func:`~cudaship.knowledge.variant_provider.supported_values`) and :func:`order` decide; None when no
    variant fits and there is no null variant. Other namespaces' providers are not emulated: a variant that
    names one is incompatible."""
    supported: dict[tuple[str, str], tuple[str, ...]] = {}
    if cuda is not None:
        ns = nvidia().namespace
        supported = {(ns, f): v for f, v in supported_values(cuda, capability).items()}
    ranked = order(variants, priorities, supported)
    return ranked[0] if ranked else None


def default_drivers() -> tuple[tuple[int, int], ...]:
    """The CUDA versions a driver may report, for a grid of machines: every published release from the
    provider's lowest major (11.0)."""
    lo = nvidia().cuda_majors[0]
    return tuple((t.major, t.minor) for t in published_trains() if t.major >= lo)


def release_variants(
    variants: Sequence[WheelVariant], index: VariantMetadata | None = None
) -> tuple[tuple[VariantDescription, ...], VariantPriorities | None]:
    """A release's variants (the index's ``*-variants.json`` first, then each wheel's ``variant.json`` for a
    label the index does not list) and its default priorities (the index's, else the first wheel's); None
    when there is neither."""
    descriptions: dict[str, VariantDescription] = {}
    priorities = index.priorities if index is not None else None
    if index is not None:
        descriptions = {v.label: v for v in index.variants}
    for variant in variants:
        descriptions.setdefault(variant.label, variant.description)
        if priorities is None:
            priorities = variant.metadata.priorities
    return tuple(descriptions.values()), priorities


@dataclass(frozen=True)
class ProviderMachine:
    """A machine as the NVIDIA provider sees it: the highest GPU's capability and the CUDA version its driver
    reports (None: no GPU, no driver), and the override variables that set either."""

    capability: Arch | None
    cuda: tuple[int, int] | None
    forced: tuple[str, ...] = ()

    @property
    def text(self) -> str:
        gpu = f"GPU {self.capability.capability}" if self.capability is not None else "no GPU"
        driver = f"driver for CUDA {cuda_text(self.cuda)}" if self.cuda is not None else "no driver"
        forced = f" ({', '.join(f'{v} set' for v in self.forced)})" if self.forced else ""
        return f"{gpu}, {driver}{forced}"


def forced_machine() -> ProviderMachine:
    """What the provider's override variables (``NV_VARIANT_PROVIDER_FORCE_SM_ARCH``,
    ``NV_VARIANT_PROVIDER_FORCE_CUDA_DRIVER_VERSION``) say of this machine, None where one is not set; a value
    that is no capability or CUDA version is a UsageError naming the variable."""
    p = nvidia()
    forced_sm = envvars.get(p.force_sm_arch)
    forced_cuda = envvars.get(p.force_driver)
    forced: list[str] = []
    cap = cuda = None
    try:
        if forced_sm:
            forced.append(p.force_sm_arch)
            cap = parse_arch(forced_sm).base
        if forced_cuda:
            forced.append(p.force_driver)
            found = parse_driver(forced_cuda).cuda
            cuda = (found.major, found.minor) if found is not None else None
    except CudashipError as e:
        raise UsageError(f"{forced[-1]}: {e.message}") from None
    return ProviderMachine(cap, cuda, tuple(forced))


def provider_machine(
    forced: ProviderMachine, capabilities: Sequence[Arch] = (), driver_cuda: tuple[int, int] | None = None
) -> ProviderMachine:
    """This machine as the provider sees it: the override variables' values (``forced``) over the probed
    ones (the highest of ``capabilities``, ``driver_cuda``)."""
    cap = forced.capability or (max(c.base for c in capabilities) if capabilities else None)
    cuda = forced.cuda or driver_cuda
    return ProviderMachine(cap, cuda, forced.forced)


NULL = "null"


@dataclass(frozen=True)
class VariantPick:
    """What one GPU gets, under one driver or a range of drivers that all get the same variant."""

    capability: str  #: "9.0"
    cuda: (
        str | None
    )  #: the CUDA version the driver reports ("12.8"), the lowest of the range; None: no driver
    cuda_to: str | None  #: the highest of the range (None: one driver)
    label: str | None  #: the variant installed; None: nothing (no variant fits and there is no null variant)
    wheel: str | None  #: the picked variant's wheel, when it was given
    runs: bool | None  #: None: not judged (the null variant, nothing picked, or its wheel not given)
    reason: str

    @property
    def fits(self) -> bool:
        """A variant other than the null one is installed."""
        return self.label is not None and self.label != NULL


@dataclass(frozen=True)
class VariantRelease:
    """One release's variants and what the machines asked get."""

    release: str  #: "torch 2.9.0"
    labels: tuple[str, ...]
    index: str | None  #: the ``*-variants.json`` read, when one was
    machine: str | None  #: doctor: this machine as the provider sees it (``GPU 9.0, driver for CUDA 12.8``)
    picks: tuple[VariantPick, ...]
