"""Which variant of a release an installer picks on a machine (PEP 825's filtering and "Variant ordering";
docs/formats.md section 8), given the values the providers report there.

``supported`` maps (namespace, feature) to the values a provider reports on the machine, best first (for the
NVIDIA provider: :func:`cudaship.knowledge.variant_provider.supported_values`). A variant is compatible when,
for every feature it names, one of its values is supported; the null variant always is. Compatible variants
are ordered by PEP 825's algorithm: namespaces in ``default-priorities.namespace`` order, features in
``default-priorities.feature`` order then the provider's, values in ``default-priorities.property`` order then
the provider's; each variant's best (namespace, feature, value) index triples, sorted, compared in order; a
variant whose list is a prefix of another's sorts after it; ties by label. The null variant sorts last.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence

from cudaship.wheel.records import VariantDescription, VariantPriorities

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
