"""The one table of renderers: for each command, its formats and the renderer of each, typed by the record the
command produces.

A :class:`Renderer` of a command's report type ``R`` is any function ``(report: R, style: Style) -> str``;
a :class:`Command` is the command's formats (its default first) and how to load their renderers, so a format
exists for a command exactly when it is in :data:`COMMANDS`. The CLI's ``--format`` choices come from
:func:`formats`; a command writes its report with ``render(AUDIT, fmt, report, style)``, which mypy checks
against the record type of ``AUDIT``. A renderer takes layout from :class:`Style`, never a decision about
content.

The renderers are loaded only when a command renders (``cudaship --help`` stays fast: the renderers and the
records they import are about 300 modules): each command's ``load`` imports its modules in the function.

:func:`render` is also where names from inputs are made safe to print, for every command and format at once:
the record goes through :func:`cudaship.render.escape.record` before the renderer and the report through
:func:`cudaship.render.escape.report` after (docs/formats.md, "Names from inputs").
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from dataclasses import dataclass
from typing import TYPE_CHECKING, Generic, Protocol, TypeVar

from cudaship.render import escape

if TYPE_CHECKING:
    from cudaship.analysis.doctor import DoctorReport
    from cudaship.analysis.gpus import GpuReport
    from cudaship.checks.environment import EnvReport
    from cudaship.checks.records import AuditReport
    from cudaship.ci.archs import TrainArchs
    from cudaship.ci.cmake import CMakePlan
    from cudaship.ci.env import BuildEnv
    from cudaship.ci.records import MatrixResult
    from cudaship.inspection.program_records import ProgramInfo
    from cudaship.inspection.report import InspectReport
    from cudaship.program.export import ExportResult
    from cudaship.program.records import CheckReport, RunReport
    from cudaship.repair.records import RepairReport
    from cudaship.toolkit.records import ToolkitCatalog, ToolkitEnv, ToolkitView

R = TypeVar("R")
R_contra = TypeVar("R_contra", contravariant=True)


@dataclass(frozen=True)
class Style:
    """Layout a renderer may take (each renderer reads the fields it uses)."""

    color: bool = False  #: ANSI colour (the CLI asks for it only for a terminal without NO_COLOR)
    width: int = 120
    verbose: bool = False  #: audit text: evidence of passing checks too
    exports: bool = True  #: inspect: list exported symbols
    demangle: Callable[[list[str]], list[str]] | None = None  #: inspect: demangle C++ names
    all_exports: bool = False  #: inspect text: every export, not the first 20 (``--all-exports``)
    details: bool = False  #: doctor --env text: every import with the file the loader picks


class Renderer(Protocol[R_contra]):
    """One format of one command: the command's record laid out as text."""

    def __call__(self, report: R_contra, style: Style, /) -> str: ...


@dataclass(frozen=True)
class Formats:
    """A command's name and format names (default first): what the CLI offers, without loading renderers."""

    name: str
    names: tuple[str, ...]


@dataclass(frozen=True)
class Command(Formats, Generic[R]):
    """A command's formats and the loader of their renderers (format name -> renderer, in ``names`` order)."""

    load: Callable[[], Mapping[str, Renderer[R]]]


def _plain(render: Callable[[R], str]) -> Renderer[R]:
    """A renderer that takes no layout (most JSON, markdown and HTML ones)."""
    return lambda report, style: render(report)


# Each loader imports its renderers when the command renders (CLI start-up time: see the module docstring).


def _inspect() -> Mapping[str, Renderer[InspectReport]]:
    from cudaship.render import inspect_json, inspect_text

    return {
        "text": lambda r, s: inspect_text.render(
            r, color=s.color, width=s.width, exports=s.exports, demangle=s.demangle, all_exports=s.all_exports
        ),
        "json": lambda r, s: inspect_json.render(r, exports=s.exports, demangle=s.demangle),
    }


def _gpus() -> Mapping[str, Renderer[GpuReport]]:
    from cudaship.render import gpus

    return gpus.FORMATS


def _audit() -> Mapping[str, Renderer[AuditReport]]:
    from cudaship.render import audit_json, audit_junit, audit_markdown, audit_sarif, audit_text

    return {
        "text": lambda r, s: audit_text.render(r, color=s.color, width=s.width, verbose=s.verbose),
        "json": _plain(audit_json.render),
        "junit": _plain(audit_junit.render),
        "markdown": _plain(audit_markdown.render),
        "sarif": audit_sarif.render,
    }


def _doctor() -> Mapping[str, Renderer[DoctorReport]]:
    from cudaship.render import doctor_json, doctor_text

    return {"text": _plain(doctor_text.render), "json": _plain(doctor_json.render)}


def _doctor_env() -> Mapping[str, Renderer[EnvReport]]:
    from cudaship.render import doctor_env_json, doctor_env_markdown, doctor_env_text

    return {
        "text": lambda r, s: doctor_env_text.render_text(r, details=s.details),
        "json": _plain(doctor_env_json.render_json),
        "markdown": _plain(doctor_env_markdown.render_markdown),
    }


def _arch_list() -> Mapping[str, Renderer[TrainArchs]]:
    from cudaship.render import arch_list

    return arch_list.FORMATS


def _matrix() -> Mapping[str, Renderer[MatrixResult]]:
    from cudaship.render import matrix

    return matrix.FORMATS


def _env() -> Mapping[str, Renderer[BuildEnv]]:
    from cudaship.render import env

    return env.FORMATS


def _cmake() -> Mapping[str, Renderer[CMakePlan]]:
    from cudaship.render import cmake

    return cmake.FORMATS


def _toolkit() -> Mapping[str, Renderer[ToolkitView | ToolkitCatalog]]:
    from cudaship.render import toolkit

    return toolkit.FORMATS


def _toolkit_env() -> Mapping[str, Renderer[ToolkitEnv]]:
    from cudaship.render import toolkit

    return toolkit.ENV_FORMATS


def _program_inspect() -> Mapping[str, Renderer[list[ProgramInfo]]]:
    from cudaship.render import program_json, program_text

    return {"text": _plain(program_text.render_inspect_all), "json": _plain(program_json.render_inspect)}


def _program_check() -> Mapping[str, Renderer[CheckReport]]:
    from cudaship.render import program_json, program_markdown, program_text

    text, json = program_text.render_check, program_json.render_check
    return {"text": _plain(text), "json": _plain(json), "markdown": _plain(program_markdown.render_one)}


def _program_run() -> Mapping[str, Renderer[RunReport]]:
    from cudaship.render import program_json, program_markdown, program_text

    text, json = program_text.render_run, program_json.render_run
    return {"text": _plain(text), "json": _plain(json), "markdown": _plain(program_markdown.render_one)}


def _program_export() -> Mapping[str, Renderer[ExportResult]]:
    from cudaship.render import program_json, program_text

    return {"text": _plain(program_text.render_export), "json": _plain(program_json.render_export)}


def _repair() -> Mapping[str, Renderer[RepairReport]]:
    from cudaship.render import repair

    return repair.FORMATS


INSPECT: Command[InspectReport] = Command("inspect", ("text", "json"), _inspect)
GPUS: Command[GpuReport] = Command("gpus", ("text", "json", "markdown", "html"), _gpus)
AUDIT: Command[AuditReport] = Command("audit", ("text", "json", "junit", "markdown", "sarif"), _audit)
DOCTOR: Command[DoctorReport] = Command("doctor", ("text", "json"), _doctor)
#: doctor's -f choices are these (a superset of plain doctor's; markdown only with --env)
DOCTOR_ENV: Command[EnvReport] = Command("doctor --env", ("text", "json", "markdown"), _doctor_env)
ARCH_LIST: Command[TrainArchs] = Command(
    "arch-list", ("torch", "cmake", "gencode", "list", "plain", "json"), _arch_list
)
MATRIX: Command[MatrixResult] = Command("matrix", ("github", "json", "text"), _matrix)
ENV: Command[BuildEnv] = Command("env", ("shell", "dotenv", "json"), _env)
CMAKE: Command[CMakePlan] = Command("cmake", ("args", "json", "initial-cache"), _cmake)
TOOLKIT: Command[ToolkitView | ToolkitCatalog] = Command("toolkit", ("text", "json"), _toolkit)
TOOLKIT_ENV: Command[ToolkitEnv] = Command("toolkit env", ("shell", "dotenv"), _toolkit_env)
PROGRAM_INSPECT: Command[list[ProgramInfo]] = Command("program inspect", ("text", "json"), _program_inspect)
PROGRAM_CHECK: Command[CheckReport] = Command("program check", ("text", "json", "markdown"), _program_check)
PROGRAM_RUN: Command[RunReport] = Command("program run", ("text", "json", "markdown"), _program_run)
PROGRAM_EXPORT: Command[ExportResult] = Command("program export", ("text", "json"), _program_export)
REPAIR: Command[RepairReport] = Command("repair", ("text", "json", "markdown"), _repair)

#: every command, by the name the CLI knows it by
COMMANDS: dict[str, Formats] = {
    c.name: c
    for c in (
        INSPECT,
        GPUS,
        AUDIT,
        DOCTOR,
        DOCTOR_ENV,
        ARCH_LIST,
        MATRIX,
        ENV,
        CMAKE,
        TOOLKIT,
        TOOLKIT_ENV,
        PROGRAM_INSPECT,
        PROGRAM_CHECK,
        PROGRAM_RUN,
        PROGRAM_EXPORT,
        REPAIR,
    )
}


def formats(command: str) -> tuple[str, ...]:
    """The formats ``command`` (its name, e.g. ``"program check"``) writes, its default first."""
    return COMMANDS[command].names


def render(command: Command[R], fmt: str, report: R, style: Style | None = None) -> str:
    """``report`` (the command's result) rendered in ``fmt`` (KeyError for a format not in the table)."""
    fmt = fmt.lower()
    if fmt not in command.names:
        raise KeyError(f"{command.name}: no format {fmt!r}")
    renderer = command.load()[fmt]
    style = style or Style()
    kind = escape.kind_of(fmt)
    rendered = renderer(escape.record(report, kind), style)
    return escape.report(rendered, kind, color=style.color and kind == "text")
