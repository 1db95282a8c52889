"""One way to validate a parsed TOML or JSON table: typed reads whose every error is one line naming the file,
the key path and the problem (``cudaship.toml: audit.closure.exports: must be true or false, not a string``).

The project's configuration (``[audit]``, ``[archs]``, ``[matrix]``), the knowledge base's data files and the
JSON files cudaship reads back all go through :class:`Table`, so an unknown key, a wrong type and a value out
of range are reported the same way everywhere:

- a wrong type: ``KEY: must be <what>, not <the type found>``;
- a value out of range: ``KEY: must be <what>, not <the value>`` (or the caller's own words, via
  :meth:`Table.fail`);
- a missing key: ``KEY: is required`` (with the caller's hint);
- an unknown key: ``KEY: unknown key (did you mean NAME?); known: a, b, c``, and for a table
  ``[KEY]: unknown table (did you mean [NAME]?); known: [a], [b]``.

``error`` is the error class the caller's layer raises (PolicyError for configuration, KnowledgeError for
the shipped data, UsageError for a file given on the command line). This module parses nothing: loading
(size, depth and encoding limits) is :mod:`cudaship.loaders`.
"""

from __future__ import annotations

import difflib
import json
import re
from collections.abc import Callable, Iterable, Iterator, Mapping
from dataclasses import dataclass
from typing import Any

from cudaship.errors import CudashipError

_BARE_KEY = re.compile(r"[A-Za-z0-9_-]+")

#: Checks one string item at its key path; raises through :meth:`Table.fail` when it is wrong.
ItemCheck = Callable[["Table", str, str], None]


def type_name(value: Any) -> str:
    """``a table``, ``a list``, ``a string``, ... as a message says what it found."""
    return {
        dict: "a table",
        list: "a list",
        str: "a string",
        int: "an integer",
        float: "a number",
        bool: "a boolean",
    }.get(type(value), type(value).__name__)


@dataclass(frozen=True)
class Table:
    """Typed access to one table of a parsed document. ``key`` is its dotted path (``""`` at the top),
    ``source`` the file it came from (the error's ``path``), ``error`` the class every problem raises."""

    data: Mapping[str, Any]
    key: str = ""
    source: str | None = None
    error: type[CudashipError] = CudashipError

    @classmethod
    def of(
        cls, value: Any, key: str, source: str | None, error: type[CudashipError], what: str = "a table"
    ) -> Table:
        """``value`` as a Table at ``key``, or the error ``KEY: must be a table, not ...`` (at the top, key
        ``""``: ``must be a table, not ...``)."""
        if not isinstance(value, dict):
            raise cls({}, key, source, error).fail(key, f"must be {what}, not {type_name(value)}")
        return cls(value, key, source, error)

    # --- paths and errors

    def dotted(self, name: str | int) -> str:
        """The key path of ``name`` inside this table (``[i]`` for a list index)."""
        if isinstance(name, int):
            return f"{self.key}[{name}]"
        part = name if _BARE_KEY.fullmatch(name) else json.dumps(name)  # as TOML writes it: "5.3", "lib/*.so"
        return f"{self.key}.{part}" if self.key else part

    def fail(self, key: str, problem: str) -> CudashipError:
        """The error for ``key`` (a full key path): ``KEY: PROBLEM``, naming the file (the top: PROBLEM)."""
        return self.error(f"{key}: {problem}" if key else problem, path=self.source)

    def wrong(self, name: str, what: str, value: Any = None, *, show: bool = False) -> CudashipError:
        """``KEY: must be WHAT, not <the type of value>`` (``show``: not the value itself)."""
        found = repr(value) if show else type_name(value)
        return self.fail(self.dotted(name), f"must be {what}, not {found}")

    # --- reading

    def __contains__(self, name: str) -> bool:
        return name in self.data

    def __iter__(self) -> Iterator[str]:
        return iter(self.data)

    def get(self, name: str) -> Any:
        return self.data.get(name)

    def require(self, name: str, hint: str = "") -> Any:
        value = self.get(name)
        if value is None:
            raise self.fail(self.dotted(name), f"is required{': ' + hint if hint else ''}")
        return value

    def sub(self, name: str, what: str = "a table") -> Table | None:
        """The sub-table ``name`` (None when absent)."""
        value = self.get(name)
        if value is None:
            return None
        return Table.of(value, self.dotted(name), self.source, self.error, what)

    def table(self, name: str, what: str = "a table") -> Table:
        """The sub-table ``name``; absent is ``KEY: is required``."""
        self.require(name, what)
        table = self.sub(name, what)
        assert table is not None
        return table

    def tables(self, what: str = "a table") -> Iterator[tuple[str, Table]]:
        """Every entry of this table, each one a table (``[components.a]``, ``[components.b]``)."""
        for name in self.data:
            table = self.sub(name, what)
            assert table is not None
            yield name, table

    def rows(
        self, name: str, *, one: bool = False, required: bool = False, what: str | None = None
    ) -> tuple[Table, ...]:
        """The array of tables ``[[name]]`` (``one``: a single table is taken as a list of one; ``what``: how
        the message names it, for a JSON file say)."""
        value = self.get(name)
        what = what or f"an array of tables ([[{self.dotted(name)}]])"
        if value is None:
            if required:
                raise self.fail(self.dotted(name), f"is required: {what}")
            return ()
        if one and isinstance(value, dict):
            value = [value]
        if not isinstance(value, list):
            raise self.wrong(name, what, value)
        key = self.dotted(name)
        return tuple(Table.of(item, f"{key}[{i}]", self.source, self.error) for i, item in enumerate(value))

    def boolean(self, name: str, default: bool) -> bool:
        value = self.get(name)
        if value is None:
            return default
        if not isinstance(value, bool):
            raise self.wrong(name, "true or false", value)
        return value

    def integer(self, name: str, default: int | None = None) -> int | None:
        value = self.get(name)
        if value is None:
            return default
        if not isinstance(value, int) or isinstance(value, bool):
            raise self.wrong(name, "an integer", value)
        return value

    def string(
        self, name: str, default: str | None = None, choices: Iterable[str] = (), *, nonempty: bool = False
    ) -> str | None:
        value = self.get(name)
        if value is None:
            return default
        if not isinstance(value, str) or (nonempty and not value):
            raise self.wrong(name, "a non-empty string" if nonempty else "a string", value)
        options = tuple(choices)
        if options and value not in options:
            raise self.wrong(name, f"one of {', '.join(options)}", value, show=True)
        return value

    def number(self, name: str, hint: str = "") -> int:
        """A required integer."""
        self.require(name, hint)
        value = self.integer(name)
        assert value is not None
        return value

    def text(self, name: str, hint: str = "") -> str:
        """A required non-empty string."""
        self.require(name, hint)
        value = self.string(name, nonempty=True)
        assert value is not None
        return value

    def strings(
        self,
        name: str,
        default: tuple[str, ...] = (),
        *,
        single: bool = True,
        required: bool = False,
        unique: bool = False,
        check: ItemCheck | None = None,
        strip: bool = True,
    ) -> tuple[str, ...]:
        """A list of non-empty strings, each stripped (``single``: a lone string is a list of one; ``strip``
        False: kept as written, a file name say). ``check`` is called with (this table, the item, its key
        path) for each item."""
        value = self.get(name)
        if value is None:
            if required:
                raise self.fail(self.dotted(name), "is required: a non-empty list of strings")
            return default
        return self.string_list(
            value,
            self.dotted(name),
            single=single,
            required=required,
            unique=unique,
            check=check,
            strip=strip,
        )

    def string_list(
        self,
        value: Any,
        key: str,
        *,
        single: bool = True,
        required: bool = False,
        unique: bool = False,
        check: ItemCheck | None = None,
        strip: bool = True,
    ) -> tuple[str, ...]:
        """``value`` (found at ``key``, a nested list say) read as :meth:`strings` reads a key."""
        if single and isinstance(value, str):
            value = [value]
        if not isinstance(value, list) or (required and not value):
            what = (
                ("a string or a " if single else "a ")
                + ("non-empty " if required else "")
                + "list of strings"
            )
            found = repr(value) if isinstance(value, list) else type_name(value)
            raise self.fail(key, f"must be {what}, not {found}")
        out: list[str] = []
        for i, item in enumerate(value):
            if not isinstance(item, str) or not (item.strip() if strip else item):
                raise self.fail(f"{key}[{i}]", f"must be a non-empty string, not {item!r}")
            if check is not None:
                check(self, item, f"{key}[{i}]")
            out.append(item.strip() if strip else item)
        if unique and len(set(out)) != len(out):
            twice = next(s for s in out if out.count(s) > 1)
            raise self.fail(key, f"lists {twice!r} twice")
        return tuple(out)

    def unknown(self, allowed: Iterable[str], *, what: str = "key") -> None:
        """Refuse the first key (sorted) that is not ``allowed``: a typo would otherwise be ignored and a
        default used. A table (``what="table"``) is shown as ``[path]``."""
        known = sorted(set(allowed))
        extra = sorted(set(self.data) - set(known))
        if not extra:
            return
        name = extra[0]
        close = difflib.get_close_matches(name, known, n=1, cutoff=0.6)
        if what == "table":
            show: Callable[[str], str] = lambda n: f"[{self.dotted(n)}]"  # noqa: E731
            shown = show(name)
        else:
            show = str
            shown = self.dotted(name)
        hint = f" (did you mean {show(close[0])}?)" if close else ""
        listed = ", ".join(show(k) for k in known) or "none"
        raise self.fail(shown, f"unknown {what}{hint}; known: {listed}")
