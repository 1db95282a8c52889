"""JSON from records, generically: a frozen dataclass is an object of its fields (in declaration order), an
enum its value, a tuple or list an array, a mapping an object, a path its text; nothing else changes.

A JSON renderer builds its document from :func:`to_json` (a whole record) and :func:`pick` (some of a record's
fields, by name) and writes it with :func:`dumps`, so that a field added to a record reaches the report
without a renderer naming it again, and renderers do not restate the same field lists. What is not a plain
copy of a field (a derived value, a renamed key, a schema version) stays explicit in the renderer; the
schemas in ``render/schemas/`` say what each report holds.
"""

from __future__ import annotations

import dataclasses
import json

from cudaship.records.codec import JSON, to_json

__all__ = ["JSON", "dumps", "fields", "pick", "to_json"]


def fields(record: object) -> dict[str, JSON]:
    """Every field of the dataclass ``record``, in declaration order, as JSON."""
    return pick(record, *(f.name for f in dataclasses.fields(record)))  # type: ignore[arg-type]


def pick(record: object, *names: str) -> dict[str, JSON]:
    """The fields ``names`` of ``record``, in that order, as JSON."""
    return {name: to_json(getattr(record, name)) for name in names}


def dumps(doc: object, *, ascii: bool = True, newline: bool = True) -> str:
    """``doc`` (JSON values, e.g. from :func:`to_json`) indented by 2; ``ascii``: non-ASCII as ``\\u``
    escapes (``ensure_ascii``); ``newline``: a line break after it."""
    return json.dumps(doc, indent=2, ensure_ascii=ascii) + ("\n" if newline else "")
