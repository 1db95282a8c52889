"""JSON and TOML loading for every file cudaship parses, with limits the parsers lack.

Python's ``json`` and ``tomllib`` recurse once per nesting level: ``[[[[...]]]]`` a few thousand deep raises
``RecursionError`` (an internal error, exit 70, before this module), and a dotted key of 100,000 parts builds
a dict 100,000 levels deep that breaks whatever walks it next. Here a document is refused, as the caller's
one-line error, when its size is over a cap, when it is not UTF-8, when the parser recurses too deep, or when
the result nests deeper than :data:`MAX_DEPTH` (checked without recursion).
"""

from __future__ import annotations

import json
import os
import re
import sys
from typing import Any

from cudaship.errors import CudashipError
from cudaship.safe_read import read_regular

if sys.version_info >= (3, 11):
    import tomllib
else:  # pragma: no cover - exercised on 3.10 only
    import tomli as tomllib  # type: ignore[import-not-found, unused-ignore]

#: Deepest nesting accepted in a JSON or TOML document (cudaship's own files nest 5 deep at most).
MAX_DEPTH = 64
#: Largest JSON or TOML file read by default (redist manifests are about 100 KiB).
MAX_DOCUMENT = 16 << 20


def depth_of(value: Any, limit: int = MAX_DEPTH) -> int:
    """How deep ``value`` nests (a scalar is 0), counting at most to ``limit + 1``; no recursion."""
    deepest = 0
    stack: list[tuple[Any, int]] = [(value, 0)]
    while stack:
        item, depth = stack.pop()
        if isinstance(item, dict):
            children: Any = item.values()
        elif isinstance(item, list):
            children = item
        else:
            continue
        depth += 1
        deepest = max(deepest, depth)
        if deepest > limit:
            return deepest
        stack.extend((child, depth) for child in children)
    return deepest


def _check_depth(value: Any, error: type[CudashipError], label: str | None) -> Any:
    if depth_of(value) > MAX_DEPTH:
        raise error(f"nested more than {MAX_DEPTH} levels deep", path=label)
    return value


def load_json(text: str | bytes, *, error: type[CudashipError], label: str | None = None) -> Any:
    """A JSON document, or ``error`` naming ``label`` (invalid, not UTF-8, nested too deep)."""
    try:
        value = json.loads(text)
    except RecursionError:
        raise error(f"invalid JSON: nested more than {MAX_DEPTH} levels deep", path=label) from None
    except UnicodeDecodeError:
        raise error("invalid JSON: not UTF-8 text", path=label) from None
    except ValueError as e:  # json.JSONDecodeError included
        raise error(f"invalid JSON: {e}", path=label) from None
    return _check_depth(value, error, label)


_QUOTED = re.compile(r'"(?:[^"\\\n]|\\.)*"|\'[^\'\n]*\'')
_KEY_SEPARATORS = re.compile(r"[=,\[\]{}]")


def longest_dotted_key(text: str) -> int:
    """The most dots in one key of ``text`` (an upper bound: quoted strings are left out, then each line is
    cut at ``=``, ``,``, brackets and braces and the dots of each piece counted). Linear in the text.

    tomllib keeps, for every key, the tuples of all its prefixes: a dotted key of 100,000 parts (600 KB)
    costs it 5 x 10^9 tuple slots, and the process is killed for memory before any limit applies. So the
    key depth is checked before parsing. (A line inside a multi-line string is counted like any other.)"""
    if text.count(".") <= MAX_DEPTH:
        return text.count(".")
    deepest = 0
    for line in text.splitlines():
        if line.count(".") <= deepest:
            continue
        bare = _QUOTED.sub('""', line).split("#", 1)[0]
        for piece in _KEY_SEPARATORS.split(bare):
            deepest = max(deepest, piece.count("."))
    return deepest


def load_toml(text: str | bytes, *, error: type[CudashipError], label: str | None = None) -> dict[str, Any]:
    """A TOML document, or ``error`` naming ``label`` (invalid, not UTF-8, nested too deep)."""
    try:
        if isinstance(text, bytes):
            text = text.decode("utf-8")
        if longest_dotted_key(text) >= MAX_DEPTH:
            raise error(f"invalid TOML: a key nested more than {MAX_DEPTH} levels deep", path=label)
        value: dict[str, Any] = tomllib.loads(text)
    except RecursionError:
        raise error(f"invalid TOML: nested more than {MAX_DEPTH} levels deep", path=label) from None
    except UnicodeDecodeError:
        raise error("invalid TOML: not UTF-8 text", path=label) from None
    except tomllib.TOMLDecodeError as e:
        raise error(f"invalid TOML: {e}", path=label) from None
    _check_depth(value, error, label)
    return value


def read_json(path: str | os.PathLike[str], *, error: type[CudashipError], limit: int = MAX_DOCUMENT) -> Any:
    """The JSON document in the regular file at ``path`` (see :func:`load_json`)."""
    label = os.fspath(path)
    return load_json(read_regular(path, limit, error=error, what="JSON file"), error=error, label=label)


def read_toml(
    path: str | os.PathLike[str], *, error: type[CudashipError], limit: int = MAX_DOCUMENT
) -> dict[str, Any]:
    """The TOML document in the regular file at ``path`` (see :func:`load_toml`)."""
    label = os.fspath(path)
    return load_toml(read_regular(path, limit, error=error, what="TOML file"), error=error, label=label)
