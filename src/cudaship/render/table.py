"""The one table of renderers: for each command, its formats and the function that renders each.

A command asks :func:`render` for ``(command, format)``; the CLI's ``--format`` choices come from
:func:`formats`, so a format exists for a command exactly when it is in this table. Modules are imported only
when used (``cudaship --help`` stays fast). A renderer takes the command's record and, by keyword, any of the
:class:`Style` fields it names: layout only, never a decision about content.

:func:`render` is also where names from inputs are made safe to print, for every command and format at once:
the record goes through :func:`cudaship.render.escape.record` before the renderer and the report through
:func:`cudaship.render.escape.report` after (docs/formats.md, "Names from inputs").
"""

from __future__ import annotations

import importlib
import inspect
from collections.abc import Callable
from dataclasses import dataclass, fields
from typing import Any

from cudaship.render import escape

#: command -> format -> "module:function" (module under cudaship.render); the first format is the default
TABLE: dict[str, dict[str, str]] = {
    "inspect": {"text": "inspect_text:render", "json": "inspect_json:render"},
    "gpus": {
        "text": "gpus_text:render",
        "json": "gpus_json:render",
        "markdown": "gpus_markdown:render",
        "html": "gpus_html:render",
    },
    "audit": {
        "text": "audit_text:render",
        "json": "audit_json:render",
        "junit": "audit_junit:render",
        "markdown": "audit_markdown:render",
    },
    "doctor": {"text": "doctor_text:render", "json": "doctor_json:render"},
    # doctor's -f choices are these (a superset of plain doctor's; markdown only with --env)
    "doctor --env": {
        "text": "doctor_env_text:render_text",
        "json": "doctor_env_json:render_json",
        "markdown": "doctor_env_markdown:render_markdown",
    },
    "arch-list": {
        "torch": "arch_list_text:render",
        "cmake": "arch_list_text:render",
        "gencode": "arch_list_text:render",
        "list": "arch_list_text:render",
        "plain": "arch_list_text:render",
        "json": "arch_list_json:render",
    },
    "matrix": {"github": "matrix_github:render", "json": "matrix_json:render", "text": "matrix_text:render"},
    "env": {"shell": "env_shell:render", "dotenv": "env_dotenv:render", "json": "env_json:render"},
    "cmake": {
        "args": "cmake_args:render",
        "json": "cmake_json:render",
        "initial-cache": "cmake_initial_cache:render",
    },
    "toolkit": {"text": "toolkit_text:render", "json": "toolkit_json:render"},
    "toolkit env": {"shell": "toolkit_env_shell:render", "dotenv": "toolkit_env_dotenv:render"},
    "program inspect": {"text": "program_text:render_inspect_all", "json": "program_json:render_inspect"},
    "program check": {
        "text": "program_text:render_check",
        "json": "program_json:render_check",
        "markdown": "program_markdown:render_one",
    },
    "program run": {
        "text": "program_text:render_run",
        "json": "program_json:render_run",
        "markdown": "program_markdown:render_one",
    },
    "program export": {"text": "program_text:render_export", "json": "program_json:render_export"},
    "repair": {
        "text": "repair_text:render",
        "json": "repair_json:render",
        "markdown": "repair_markdown:render",
    },
}


@dataclass(frozen=True)
class Style:
    """Layout a renderer may take (by keyword, when its signature names the field)."""

    color: bool = False  #: ANSI colour (the CLI asks for it only for a terminal without NO_COLOR)
    width: int = 120
    verbose: bool = False  #: audit text: evidence of passing checks too
    exports: bool = True  #: inspect: list exported symbols
    demangle: Callable[[list[str]], list[str]] | None = None  #: inspect: demangle C++ names
    all_exports: bool = False  #: inspect text: every export, not the first 20 (``--all-exports``)
    syntax: str = ""  #: arch-list: the list syntax (the format's name)
    details: bool = False  #: doctor --env text: every import with the file the loader picks


def formats(command: str) -> tuple[str, ...]:
    """The formats ``command`` writes, its default first."""
    return tuple(TABLE[command])


def renderer(command: str, fmt: str) -> Callable[..., str]:
    """The function that renders ``command``'s record in ``fmt`` (KeyError for a pair not in the table)."""
    module_name, _, function = TABLE[command][fmt.lower()].partition(":")
    module = importlib.import_module(f"cudaship.render.{module_name}")
    fn: Callable[..., str] = getattr(module, function)
    return fn


def render(command: str, fmt: str, record: Any, style: Style | None = None) -> str:
    """``record`` (the command's result) rendered in ``fmt``."""
    fmt = fmt.lower()
    fn = renderer(command, fmt)
    style = style or Style()
    if command == "arch-list" and not style.syntax:
        style = Style(**{**{f.name: getattr(style, f.name) for f in fields(style)}, "syntax": fmt})
    accepted = inspect.signature(fn).parameters
    options = {f.name: getattr(style, f.name) for f in fields(style) if f.name in accepted}
    kind = escape.kind_of(fmt)
    rendered: str = fn(escape.record(record, kind), **options)
    return escape.report(rendered, kind, color=style.color and "color" in accepted)
