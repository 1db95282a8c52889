"""Records to plain JSON values and back, generically, by their declared field types.

:func:`to_json` writes a frozen dataclass as an object of its fields (in declaration order), an enum as its
value, a tuple or list as an array, a mapping as an object, a path as its text (``render/jsonify`` builds the
reports from it). :func:`from_json` reads such a value back into the record type named, field by field from
the type annotations (``str``, ``int``, ``bool``, enums, records, ``tuple[X, ...]``, fixed tuples,
``X | None``): what the survey's member cache stores for a native member (a :class:`FileReport`).

Decoding only builds the records named: no class is looked up from the data and nothing in it runs (unlike
pickle). A value of the wrong shape raises :class:`ValueError` (the caller treats the entry as absent).
"""

from __future__ import annotations

import dataclasses
import functools
import types
import typing
from collections.abc import Mapping
from enum import Enum
from pathlib import PurePath
from typing import Any, TypeAlias, TypeVar

#: a value :func:`json.dumps` writes as it is
JSON: TypeAlias = bool | int | float | str | list["JSON"] | dict[str, "JSON"] | None

T = TypeVar("T")


def to_json(value: object) -> JSON:
    """``value`` (a record, or anything in one) as plain JSON values."""
    if value is None or isinstance(value, (bool, int, float, str)):
        return value
    if isinstance(value, Enum):
        return to_json(value.value)
    if dataclasses.is_dataclass(value) and not isinstance(value, type):
        return {f.name: to_json(getattr(value, f.name)) for f in dataclasses.fields(value)}
    if isinstance(value, (list, tuple)):
        return [to_json(v) for v in value]
    if isinstance(value, Mapping):
        return {str(k): to_json(v) for k, v in value.items()}
    if isinstance(value, PurePath):
        return str(value)
    raise TypeError(f"no JSON for {type(value).__name__}")


def from_json(kind: type[T], data: object) -> T:
    """The record of type ``kind`` (a dataclass) that :func:`to_json` wrote as ``data``; ValueError when
    ``data`` does not have the shape the record's annotations say."""
    return typing.cast(T, _decode(kind, data, kind.__name__))


@functools.cache
def _hints(kind: type) -> dict[str, Any]:
    return typing.get_type_hints(kind)


def _decode(hint: Any, data: object, where: str) -> object:
    origin = typing.get_origin(hint)
    if origin in (typing.Union, types.UnionType):
        options = typing.get_args(hint)
        if data is None and type(None) in options:
            return None
        errors = []
        for option in options:
            if option is type(None):
                continue
            try:
                return _decode(option, data, where)
            except ValueError as e:
                errors.append(str(e))
        raise ValueError(errors[0] if errors else f"{where}: null")
    if origin is tuple:
        args = typing.get_args(hint)
        if not isinstance(data, list):
            raise ValueError(f"{where}: not an array")
        if len(args) == 2 and args[1] is Ellipsis:
            return tuple(_decode(args[0], v, f"{where}[]") for v in data)
        if len(args) != len(data):
            raise ValueError(f"{where}: an array of length {len(data)}, expected length {len(args)}")
        return tuple(_decode(a, v, f"{where}[]") for a, v in zip(args, data, strict=True))
    if isinstance(hint, type) and dataclasses.is_dataclass(hint):
        if not isinstance(data, dict):
            raise ValueError(f"{where}: not an object")
        hints = _hints(hint)
        values = {}
        for f in dataclasses.fields(hint):
            if f.name in data:
                values[f.name] = _decode(hints[f.name], data[f.name], f"{where}.{f.name}")
            elif f.default is dataclasses.MISSING and f.default_factory is dataclasses.MISSING:
                raise ValueError(f"{where}: {f.name} missing")
        unknown = set(data) - set(values)
        if unknown:
            raise ValueError(f"{where}: unknown field {sorted(unknown)[0]}")
        return hint(**values)
    if isinstance(hint, type) and issubclass(hint, Enum):
        try:
            return hint(data)
        except ValueError:
            raise ValueError(f"{where}: {data!r} is no {hint.__name__}") from None
    if hint is bool:
        if not isinstance(data, bool):
            raise ValueError(f"{where}: not a boolean")
        return data
    if hint is int:
        if isinstance(data, bool) or not isinstance(data, int):
            raise ValueError(f"{where}: not an integer")
        return data
    if hint is float:
        if isinstance(data, bool) or not isinstance(data, (int, float)):
            raise ValueError(f"{where}: not a number")
        return float(data)
    if hint is str:
        if not isinstance(data, str):
            raise ValueError(f"{where}: not a string")
        return data
    raise ValueError(f"{where}: no decoder for {hint!r}")
