"""Reading ``provenance.json``: what a program was exported with. Not every train records itself in the
artifact (a ``.pt2`` records no CUDA version at all), so this file is what makes the train check possible.

Versioned (``"schema": 1``); read strictly: a missing or mistyped key is a one-line error naming the key.
``program export`` writes it (:mod:`cudaship.program.provenance`).
"""

from __future__ import annotations

from dataclasses import fields
from pathlib import Path
from typing import Any

from cudaship.errors import ProgramError
from cudaship.inspection.program_records import ImportLibraryRecord, Provenance
from cudaship.loaders import load_json
from cudaship.safe_read import read_regular
from cudaship.schema import Table

PROVENANCE_FILE = "provenance.json"
SCHEMA = 1
_REQUIRED = ("package", "package_sha256", "torch_version", "device", "target_platform")


def _encodable(value: str) -> bool:
    try:
        value.encode("utf-8")
    except UnicodeEncodeError:  # "\\ud800" is legal JSON; no file name holds it
        return False
    return True


def parse_provenance(text: str, label: str) -> Provenance:

    data = load_json(text, error=ProgramError, label=label)
    if not isinstance(data, dict):
        raise ProgramError("not a JSON object", path=label)
    schema = data.get("schema")
    if schema != SCHEMA:
        raise ProgramError(f"unsupported schema {schema!r} (this cudaship reads schema {SCHEMA})", path=label)
    root = Table(data, "", label, ProgramError)
    values: dict[str, Any] = {key: root.text(key) for key in _REQUIRED}
    for f in fields(Provenance):
        if f.name in values or f.name == "schema" or f.name not in data:
            continue  # a key this cudaship does not know is left alone: a newer one may have written it
        if f.name == "device_code_archs":
            values[f.name] = root.strings(f.name, single=False)
        elif f.name == "import_libraries":
            values[f.name] = tuple(
                _import_library(row) for row in root.rows(f.name, what="a list of objects")
            )
        else:
            values[f.name] = root.string(f.name)
    for key in ("package", "reference", "exported_program"):  # names of files in the directory
        value = values.get(key)
        if isinstance(value, str) and not _encodable(value):
            raise ProgramError(
                f"key {key!r} is not valid Unicode (a lone surrogate): {value!a} names no file",
                path=label,
            )
    package = values["package"]
    if "/" in package or "\\" in package or ":" in package or package.startswith("."):  # ":": C:x on Windows
        raise ProgramError(f"key 'package' must name a file in the directory, not {package!r}", path=label)
    return Provenance(**values)


def _import_library(row: Table) -> ImportLibraryRecord:
    return ImportLibraryRecord(
        library=row.text("library"),
        dll=row.text("dll"),
        how=row.text("how"),
        source=row.text("source"),
        sha256=row.text("sha256"),
        names=tuple(row.strings("names", single=False)) if "names" in row else (),
    )


def provenance_present(directory: Path) -> bool:
    """Whether ``directory`` holds a ``provenance.json`` entry (a link counts, broken or not: reading it says
    what is wrong)."""
    target = directory / PROVENANCE_FILE
    return target.exists() or target.is_symlink()


def read_provenance(directory: Path) -> Provenance:
    target = directory / PROVENANCE_FILE

    if not provenance_present(directory):
        raise ProgramError(
            "no provenance.json: not a directory written by 'cudaship program export'", path=str(directory)
        )
    data = read_regular(target, 1 << 20, error=ProgramError, what="provenance.json")
    try:
        text = data.decode("utf-8")
    except UnicodeDecodeError:
        raise ProgramError("cannot read: not UTF-8 text", path=str(target)) from None
    return parse_provenance(text, str(target))
