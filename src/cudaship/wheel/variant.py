"""Wheel variants (PEP 825; docs/formats.md section 8): the variant label in a wheel's file name, its
``.dist-info/variant.json`` and an index's ``{name}-{version}-variants.json``.

The readers return the records of :mod:`cudaship.wheel.records` (:class:`VariantMetadata`,
:class:`WheelVariant`); anything malformed is a :class:`~cudaship.errors.WheelError` naming the file and the
key (one line, exit 2). Pure: bytes and names in, records out.

* :func:`split_label`: ``pkg-1.0-py3-none-any-cu129.whl`` → (``pkg-1.0-py3-none-any.whl``, ``cu129``).
  ``packaging.utils.parse_wheel_filename`` refuses the extra component, so every reader of a wheel's file name
  splits the label off first. Six components are unambiguous: a build tag starts with a digit, a Python tag
  never does.
* :func:`parse_variant_json`: either file. ``variant.json`` holds exactly one variant, the file name's label.
"""

from __future__ import annotations

import json
import re
from typing import Any

from cudaship.errors import WheelError
from cudaship.loaders import load_json
from cudaship.schema import Table
from cudaship.wheel.records import (
    VariantDescription,
    VariantMetadata,
    VariantPriorities,
    VariantProperty,
    VariantProvider,
    WheelVariant,
)

#: A variant label (PEP 825: 1-16 characters; the length limit was dropped in a later revision, so any
#: length is accepted).
LABEL = re.compile(r"[0-9a-z_.]+")
NULL_LABEL = "null"
NAMESPACE = re.compile(r"[a-z0-9_]+")
FEATURE = NAMESPACE
VALUE = re.compile(r"[a-z0-9_.]+")
#: ``namespace :: feature :: value``, spaces around ``::`` optional (as variantlib reads it)
PROPERTY = re.compile(r"\s*([a-z0-9_]+)\s*::\s*([a-z0-9_]+)\s*::\s*([a-z0-9_.]+)\s*")
VARIANT_JSON = "variant.json"
#: The largest ``variant.json`` / ``*-variants.json`` read (a release lists tens of variants, a few KiB).
MAX_VARIANT_JSON = 1 << 20

_TOP_KEYS = ("$schema", "default-priorities", "providers", "static-properties", "variants")
_PROVIDER_KEYS = ("requires", "enable-if", "plugin-api", "optional", "install-time")


def split_label(filename: str) -> tuple[str, str | None]:
    """``filename`` without its variant label, and the label (None for a non-variant wheel). A label that is
    not ``[0-9a-z_.]+`` is a WheelError naming the file."""
    if not filename.endswith(".whl"):
        return filename, None
    parts = filename[: -len(".whl")].split("-")
    if len(parts) == 6 and parts[2][:1].isdigit():
        return filename, None  # a build tag, no label
    if len(parts) not in (6, 7):
        return filename, None
    label = parts[-1]
    if not LABEL.fullmatch(label):
        raise WheelError(
            f"variant label {label!r} in the file name: a label is made of 0-9, a-z, '_' and '.'"
        )
    return "-".join(parts[:-1]) + ".whl", label


def parse_property(text: str) -> VariantProperty:
    """``nvidia :: sm_arch :: 90_real`` as a record; anything else is a WheelError."""
    m = PROPERTY.fullmatch(text)
    if m is None:
        raise WheelError(
            f"{text!r} is not a variant property: expected 'namespace :: feature :: value' (namespace and "
            "feature of a-z, 0-9, '_'; value also '.')"
        )
    return VariantProperty(m.group(1), m.group(2), m.group(3))


def _names(table: Table, key: str, value: Any, pattern: re.Pattern[str], what: str) -> tuple[str, ...]:
    items = table.string_list(value, key, single=False, strip=False)
    for i, item in enumerate(items):
        if not pattern.fullmatch(item):
            raise table.fail(f"{key}[{i}]", f"{item!r} is not a valid {what}")
    return items


def _check_key(table: Table, name: str, pattern: re.Pattern[str], what: str) -> None:
    if not pattern.fullmatch(name):
        raise table.fail(table.dotted(name), f"{name!r} is not a valid {what}")


def _priorities(top: Table) -> VariantPriorities:
    prio = top.sub("default-priorities")
    if prio is None:
        raise top.fail("default-priorities", "is required: a table with the list 'namespace'")
    prio.unknown(("namespace", "feature", "property"))
    namespaces = _names(prio, prio.dotted("namespace"), prio.require("namespace"), NAMESPACE, "namespace")
    features: list[tuple[str, tuple[str, ...]]] = []
    feature_table = prio.sub("feature")
    for ns in feature_table or ():
        assert feature_table is not None
        _check_key(feature_table, ns, NAMESPACE, "namespace")
        names = _names(
            feature_table, feature_table.dotted(ns), feature_table.get(ns), FEATURE, "feature name"
        )
        features.append((ns, names))
    values: list[tuple[str, str, tuple[str, ...]]] = []
    prop_table = prio.sub("property")
    for ns, per_ns in prop_table.tables() if prop_table is not None else ():
        assert prop_table is not None
        _check_key(prop_table, ns, NAMESPACE, "namespace")
        for feature in per_ns:
            _check_key(per_ns, feature, FEATURE, "feature name")
            vals = _names(per_ns, per_ns.dotted(feature), per_ns.get(feature), VALUE, "feature value")
            values.append((ns, feature, vals))
    return VariantPriorities(tuple(namespaces), tuple(features), tuple(values))


def _providers(top: Table) -> tuple[VariantProvider, ...]:
    table = top.sub("providers")
    out: list[VariantProvider] = []
    for ns, p in table.tables() if table is not None else ():
        assert table is not None
        _check_key(table, ns, NAMESPACE, "namespace")
        p.unknown(_PROVIDER_KEYS)
        provider = VariantProvider(
            namespace=ns,
            requires=p.strings("requires", single=False, strip=False),
            enable_if=p.string("enable-if"),
            plugin_api=p.string("plugin-api"),
            optional=p.boolean("optional", False),
            install_time=p.boolean("install-time", True),
        )
        if provider.install_time and not provider.requires:
            raise p.fail(p.dotted("requires"), "is required for a provider used at install time")
        out.append(provider)
    return tuple(out)


def _variants(top: Table) -> tuple[VariantDescription, ...]:
    table = top.sub("variants")
    if table is None:
        raise top.fail("variants", "is required: a table of variant labels")
    out: list[VariantDescription] = []
    for label, per_label in table.tables():
        if not LABEL.fullmatch(label):
            raise table.fail(table.dotted(label), f"{label!r} is not a valid variant label ([0-9a-z_.]+)")
        props: list[VariantProperty] = []
        for ns, per_ns in per_label.tables():
            _check_key(per_label, ns, NAMESPACE, "namespace")
            for feature in per_ns:
                _check_key(per_ns, feature, FEATURE, "feature name")
                key = per_ns.dotted(feature)
                vals = _names(per_ns, key, per_ns.get(feature), VALUE, "feature value")
                if not vals:
                    raise per_ns.fail(key, "must list at least one value")
                if len(set(vals)) != len(vals):
                    raise per_ns.fail(key, "lists a value twice")
                props.extend(VariantProperty(ns, feature, v) for v in vals)
        description = VariantDescription(label, tuple(sorted(props)))
        if description.is_null and label != NULL_LABEL:
            raise table.fail(
                table.dotted(label), f"a variant without properties must use the label {NULL_LABEL!r}"
            )
        if not description.is_null and label == NULL_LABEL:
            raise table.fail(
                table.dotted(label),
                f"the label {NULL_LABEL!r} is reserved for the variant without properties",
            )
        out.append(description)
    return tuple(out)


def parse_variant_json(data: bytes | str, source: str) -> VariantMetadata:
    """A ``variant.json`` or ``*-variants.json`` read from ``data``; ``source`` names it in errors."""
    document = load_json(data, error=WheelError, label=source)
    top = Table.of(document, "", source, WheelError, "a JSON object")
    top.unknown(_TOP_KEYS)
    schema = top.string("$schema")
    priorities = _priorities(top)
    providers = _providers(top)
    variants = _variants(top)
    used = {ns for v in variants for ns in v.namespaces()}
    missing = sorted(used - set(priorities.namespaces))
    if missing:
        raise top.fail(
            "default-priorities.namespace",
            f"must list every namespace the variants use; missing {', '.join(missing)}",
        )
    return VariantMetadata(source, schema, priorities, providers, variants)


def wheel_variant(filename: str, dist_info: str, data: bytes | None) -> WheelVariant | None:
    """A wheel's variant: the label of ``filename`` and its ``dist_info``'s ``variant.json`` (``data``; None
    when the wheel has none). None for a non-variant wheel; a label without ``variant.json``, a
    ``variant.json`` without a label, or one that does not describe exactly the file name's label is a
    WheelError naming the member (the caller adds the wheel's path)."""
    _base, label = split_label(filename)
    source = f"{dist_info}/{VARIANT_JSON}"
    if label is None and data is None:
        return None
    if data is None:
        raise WheelError(f"the file name has the variant label {label!r} but there is no {source}")
    try:
        metadata = parse_variant_json(data, source)
    except WheelError as e:
        raise WheelError(f"{e.path}: {e.message}" if e.path else e.message) from None
    labels = [v.label for v in metadata.variants]
    if label is None:
        raise WheelError(
            f"{source} describes variant {', '.join(labels) or 'none'} but the file name has no variant label"
        )
    if labels != [label]:
        shown = ", ".join(labels) or "none"
        raise WheelError(
            f"{source} must describe exactly the file name's variant {label!r}; it describes {shown}"
        )
    return WheelVariant(label, metadata)


#: The schema URL variantlib writes (PEP 825's draft format; the final one will be on packaging.python.org).
SCHEMA_URL = "https://variants-schema.wheelnext.dev/v0.0.3.json"


def variant_json_bytes(
    label: str, properties: tuple[VariantProperty, ...], providers: tuple[VariantProvider, ...]
) -> bytes:
    """A ``variant.json`` for one variant: ``label`` with ``properties``, the ``providers`` of their
    namespaces (in that priority order), indented, keys in a stable order. It reads back as
    :func:`parse_variant_json` reads it."""

    nested: dict[str, dict[str, list[str]]] = {}
    for p in sorted(properties):
        nested.setdefault(p.namespace, {}).setdefault(p.feature, []).append(p.value)
    provider_doc: dict[str, dict[str, Any]] = {}
    for provider in providers:
        entry: dict[str, Any] = {"requires": list(provider.requires)}
        if provider.enable_if is not None:
            entry["enable-if"] = provider.enable_if
        if provider.plugin_api is not None:
            entry["plugin-api"] = provider.plugin_api
        if provider.optional:
            entry["optional"] = True
        if not provider.install_time:
            entry["install-time"] = False
        provider_doc[provider.namespace] = entry
    doc = {
        "$schema": SCHEMA_URL,
        "default-priorities": {"namespace": [p.namespace for p in providers]},
        "providers": provider_doc,
        "variants": {label: nested},
    }
    data = (json.dumps(doc, indent=2) + "\n").encode()
    parse_variant_json(data, VARIANT_JSON)  # what is written reads back
    return data
