"""The survey's dataset on disk, resumable, whichever engine wrote it.

Layout of a survey directory ``DEST`` (docs/survey.md):

- ``DEST/parts/``: the rows, as part files. Every part holds the complete rows of the wheels it names (never
  half a wheel), written whole under a temporary name and renamed into place, so a run stopped at any moment
  leaves only complete parts. A part is ``<run>-<n>.parquet`` (the engine's Parquet writer) or
  ``<run>-<n>.jsonl`` (JSON Lines, one row per line): readers take both.
- ``DEST/survey.json``: what was asked (sources, filters, options) and each run's start, end and counts.

A wheel is done when a part holds a row with its ``wheel_key``; a second run over the same sources skips
those and fetches only what is new. The Parquet schema is :func:`arrow_schema`, built from
:data:`~cudaship.survey.records.ROW_TYPES`; pyarrow is imported only here and only when called.
"""

from __future__ import annotations

from typing import Any

from cudaship.survey.records import ROW_TYPES

PARTS = "parts"
MANIFEST = "survey.json"


def arrow_schema() -> Any:
    """The rows' Parquet schema (a ``pyarrow.Schema``), column for column :data:`ROW_TYPES`."""
    import pyarrow as pa

    arch = pa.struct([("arch", pa.string()), ("kind", pa.string()), ("bytes", pa.int64())])
    types = {
        "str": pa.string(),
        "int": pa.int64(),
        "bool": pa.bool_(),
        "list[str]": pa.list_(pa.string()),
        "list[arch]": pa.list_(arch),
    }
    return pa.schema([(name, types[kind]) for name, kind in ROW_TYPES])
