"""The one escaping layer between what an input says and what a report prints.

Names in a report come from the input: member names, the wheel's file name, DT_NEEDED, RUNPATH, SONAME, PE
import names, METADATA fields, environment paths. A hostile input can put in them terminal control sequences
(clear the screen, set the window title, hide text with a carriage return), line breaks that forge report
lines, and text a CI runner executes when the report is printed in a job (GitHub Actions reads a line that
begins with ``::`` as a workflow command, ``::add-mask::``, ``::error::``; it and Azure Pipelines also read
``##[`` / ``##vso[`` anywhere in a line). Renderers never see such a string raw: :func:`cudaship.render.table.
render`, the one door to every renderer, passes the command's record through :func:`record` before the
renderer runs and the rendered report through :func:`report` after, by the format's :data:`KIND`:

- before (:func:`record`): every string in the record, however deep (dataclasses, tuples, lists, dicts,
  paths), is escaped for the format. ``text``, ``xml``, ``html``: control characters (C0 including line
  breaks and tab, DEL, C1, Unicode line separators and bidirectional overrides) are shown escaped as
  Python writes them (``\\x1b``, ``\\n``, ``\\u202e``). ``markdown``: the same, and the characters markdown
  or HTML would read as syntax (``& < > [ ] | ```) as character references, so that a name is never a
  tag, a link, an image, a table cell boundary or the end of a code span. ``json``: nothing (``json.dumps``
  escapes control characters itself and the value must stay the input's).
- after (:func:`report`): a line that would begin a workflow command (``::`` after any whitespace) and any
  ``##[`` / ``##vso[`` are neutralised in the format's own way (text: a backslash; XML, HTML, markdown: a
  character reference; JSON: a ``\\u`` escape, which parses back to the same value), and any control
  character still there (only the report's own line breaks and, in a terminal, its colour codes may be) is
  escaped as above; JSON's raw DEL, C1 and line separators become ``\\u`` escapes.

``raw`` formats (shell, dotenv, CMake arguments) are values another tool consumes exactly; they carry no names
from inputs and pass unchanged.
"""

from __future__ import annotations

import copy
import dataclasses
import re
from collections.abc import Callable
from enum import Enum
from pathlib import PurePath
from typing import Any, Literal, TypeVar

T = TypeVar("T")

Kind = Literal["text", "markdown", "xml", "html", "json", "raw"]

#: format name -> kind; a format not named here is text
KIND: dict[str, Kind] = {
    "text": "text",
    "json": "json",
    "junit": "xml",
    "markdown": "markdown",
    "html": "html",
    "github": "json",  # matrix: compact JSON for $GITHUB_OUTPUT
    "sarif": "json",  # audit: SARIF 2.1.0
    "shell": "raw",
    "dotenv": "raw",
    "args": "raw",
    "initial-cache": "raw",
}

#: Characters never printed raw from an input: C0 (line breaks and tab included), DEL, C1, the Unicode line
#: and paragraph separators, the bidirectional embeddings, overrides and isolates (text shown in another
#: order than it is stored), the byte-order mark, and lone surrogates (``\ud800``: legal in JSON text and in
#: Python strings, but no encoding can write one, so a report holding one raw could not be printed at all).
_SURROGATES = "\ud800-\udfff"
_CONTROL_CLASS = f"\x00-\x1f\x7f-\x9f\u061c\u2028\u2029\u202a-\u202e\u2066-\u2069\ufeff{_SURROGATES}"
_CONTROL = re.compile(f"[{_CONTROL_CLASS}]")
#: What markdown (or the HTML it may hold) reads as syntax in a name.
_MARKDOWN = re.compile(f"[{_CONTROL_CLASS}&<>\\[\\]|`]")
#: Where a report may still hold a control character: the layout's own line breaks (and tabs) are kept.
_REPORT_CONTROL = re.compile(
    f"[\x00-\x08\x0b-\x1f\x7f-\x9f\u061c\u2028\u2029\u202a-\u202e\u2066-\u2069\ufeff{_SURROGATES}]"
)
#: An SGR (colour) sequence, the only escape sequence a text report written to a terminal holds.
_SGR = "\x1b\\[[0-9;]*m"
_REPORT_CONTROL_OR_SGR = re.compile(f"({_SGR})|{_REPORT_CONTROL.pattern}")
#: A line the runner reads as a workflow command: ``::`` after whitespace (and colour codes). Group 1 is
#: what comes before the ``::``.
_LINE_COMMAND = re.compile(f"^((?:[^\\S\\n]|{_SGR})*)::", re.MULTILINE)
#: A legacy (``##[``) or Azure Pipelines (``##vso[``) command, read anywhere in a line: the second ``#``.
_HASH_COMMAND = re.compile("(?<=#)#(?=(?:vso)?\\[)")
#: Raw characters in JSON text that ``json.dumps(ensure_ascii=False)`` leaves as they are (all in strings).
#: A lone surrogate among them becomes ``\ud800``, which parses back to the same string.
_JSON_RAW = re.compile(f"[\x7f-\x9f\u061c\u2028\u2029\u202a-\u202e\u2066-\u2069\ufeff{_SURROGATES}]")


def _shown(match: re.Match[str]) -> str:
    """A control character as Python writes it in a string literal: ``\\x1b``, ``\\n``, ``\\u202e``."""
    return ascii(match.group())[1:-1]


def text(value: str) -> str:
    """``value`` with every control character shown escaped (one line, nothing a terminal acts on)."""
    return _CONTROL.sub(_shown, value)


_MARKDOWN_REFERENCE = {c: f"&#{ord(c)};" for c in "&<>[]|`"}


def markdown(value: str) -> str:
    """``value`` for any place in a markdown report: control characters shown escaped; ``& < > [ ] | ```
    as character references (no tag, link, image, cell boundary or code-span end; a table still renders
    them as the characters). A backslash stays (a Windows path reads as one in a code span): the renderers
    put a space between a name and the ``|`` or ``**`` after it."""

    def one(match: re.Match[str]) -> str:
        c = match.group()
        return _MARKDOWN_REFERENCE.get(c) or ascii(c)[1:-1]

    return _MARKDOWN.sub(one, value)


def markdown_cell(value: object) -> str:
    """``value`` as the text of a markdown table cell: a ``|`` does not end the cell, a line break does not
    end the row (the report's own layout; names from inputs are escaped already, by :func:`record`)."""
    return str(value).replace("|", "\\|").replace("\n", " ")


def xml_safe(value: str) -> str:
    """``value`` with control characters shown escaped: XML 1.0 has no way to write most of them, even as
    character references (the XML serializer escapes ``& < > "`` itself)."""
    return text(value)


def line(value: str) -> str:
    """``value`` as one line of a log (an error message on standard error): control characters shown escaped
    (tab kept), and no workflow command, at its start or inside."""
    shown = _CONTROL.sub(lambda m: "\t" if m.group() == "\t" else _shown(m), value)
    return report(shown, "text")


_STRING_ESCAPE: dict[Kind, Callable[[str], str] | None] = {
    "text": text,
    "markdown": markdown,
    "xml": xml_safe,
    "html": text,
    "json": None,
    "raw": None,
}


def kind_of(fmt: str) -> Kind:
    return KIND.get(fmt.lower(), "text")


def record(value: T, kind: Kind) -> T:
    """``value`` (a command's record) with every string in it escaped for ``kind``: dataclasses, tuples
    (named ones too), lists, dicts (keys too), sets and paths are rebuilt where a string in them changes, and
    returned as they are where nothing does. Enums, numbers and other objects pass unchanged."""
    escape = _STRING_ESCAPE[kind]
    if escape is None:
        return value
    escaped: T = _Mapper(escape).map(value)
    return escaped


class _Mapper:
    def __init__(self, escape: Callable[[str], str]) -> None:
        self.escape = escape
        self.memo: dict[int, Any] = {}  # id -> result, for containers met more than once

    def map(self, value: Any) -> Any:
        if isinstance(value, Enum) or value is None or isinstance(value, (bool, int, float, bytes)):
            return value
        if isinstance(value, str):
            return self.escape(value)
        key = id(value)
        if key in self.memo:
            return self.memo[key]
        result = self._container(value)
        self.memo[key] = result
        return result

    def _container(self, value: Any) -> Any:
        if isinstance(value, PurePath):
            shown = self.escape(str(value))
            return value if shown == str(value) else type(value)(shown)
        if dataclasses.is_dataclass(value) and not isinstance(value, type):
            changed = {}
            for f in dataclasses.fields(value):
                old = getattr(value, f.name)
                new = self.map(old)
                if new is not old:
                    changed[f.name] = new
            if not changed:
                return value
            out = copy.copy(value)
            for name, new in changed.items():
                object.__setattr__(out, name, new)
            return out
        if isinstance(value, (tuple, list, set, frozenset)):
            items = [self.map(v) for v in value]
            if all(a is b for a, b in zip(items, value, strict=True)) and not isinstance(
                value, (set, frozenset)
            ):
                return value
            if isinstance(value, tuple) and hasattr(value, "_make"):
                return value._make(items)
            return type(value)(items)
        if isinstance(value, dict):
            pairs = [(self.map(k), self.map(v)) for k, v in value.items()]
            if all(k is k0 and v is v0 for (k, v), (k0, v0) in zip(pairs, value.items(), strict=True)):
                return value
            return type(value)(pairs)
        return value


def report(rendered: str, kind: Kind, *, color: bool = False) -> str:
    """The rendered report with no workflow command and no control character the layout did not put there
    (see the module's docstring); ``color``: a text report's colour codes are kept."""
    if kind == "raw":
        return rendered
    if kind == "json":
        rendered = _JSON_RAW.sub(lambda m: f"\\u{ord(m.group()):04x}", rendered)
        return _HASH_COMMAND.sub("\\\\u0023", rendered)
    if kind == "text":
        if color:
            rendered = _REPORT_CONTROL_OR_SGR.sub(lambda m: m.group(1) or _shown(m), rendered)
        else:
            rendered = _REPORT_CONTROL.sub(_shown, rendered)
        rendered = _LINE_COMMAND.sub(lambda m: f"{m.group(1)}\\::", rendered)
        return _HASH_COMMAND.sub("\\\\#", rendered)
    # xml, html, markdown: character references (no control character is representable in XML at all)
    rendered = _REPORT_CONTROL.sub(_shown, rendered)
    rendered = _LINE_COMMAND.sub(lambda m: f"{m.group(1)}&#58;:", rendered)
    return _HASH_COMMAND.sub("&#35;", rendered)


#: The GitHub Actions annotation escapes (what the runner decodes in a workflow command's data and
#: properties).
def annotation_data(value: str) -> str:
    """The message part of ``::error ...::MESSAGE``: its line breaks kept as ``%0A`` (the annotation shows
    them), each line as :func:`line` writes it (control characters shown escaped, no workflow command),
    ``%`` encoded first."""
    kept = "\n".join(line(part) for part in value.replace("\r\n", "\n").split("\n"))
    return kept.replace("%", "%25").replace("\r", "%0D").replace("\n", "%0A")


def annotation_property(value: str) -> str:
    """A property value (``title=``, ``file=``): one line (a line break in it shown escaped, as :func:`line`
    writes it), with ``%``, and ``:`` and ``,`` that end a property, percent-encoded."""
    encoded = line(value).replace("%", "%25").replace("\r", "%0D").replace("\n", "%0A")
    return encoded.replace(":", "%3A").replace(",", "%2C")


def stray(rendered: str) -> list[str]:
    """What :func:`report` guarantees never to leave (for tests and the fuzz harness): each control character
    other than a line break, and each line a runner would read as a workflow command."""
    found = [ascii(m.group()) for m in _REPORT_CONTROL.finditer(rendered)]
    found += [m.group() for m in re.finditer("^[^\\S\\n]*::.*$", rendered, re.MULTILINE)]
    found += [m.group() for m in re.finditer("##(?:vso)?\\[", rendered)]
    return found
