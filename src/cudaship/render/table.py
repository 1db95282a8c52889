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
from typing import TYPE_CHECKING, Generic, TypeVar

from cudaship.render import escape
from cudaship.render.style import Renderer, Style

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


@dataclass(frozen=True)
class Formats:
    """A command's name and format names (default first): what the CLI offers, without loading renderers."""

    name: str
    names: tuple[str, ...]


@dataclass(frozen=True)
class Command(Formats, Generic[R]):
    """A command's formats and the loader of their renderers (format name -> renderer, in ``names`` order)."""

    load: Callable[[], Mapping[str, Renderer[R]]]


# Each loader imports its renderers when the command renders (CLI start-up time: see the module docstring).


def _inspect() -> Mapping[str, Renderer[InspectReport]]:
    from cudaship.render import inspect_json, inspect_text

    return {"text": inspect_text.render, "json": inspect_json.render}


def _gpus() -> Mapping[str, Renderer[GpuReport]]:
    from cudaship.render import gpus

    return gpus.FORMATS


def _audit() -> Mapping[str, Renderer[AuditReport]]:
    from cudaship.render import audit_json, audit_junit, audit_markdown, audit_sarif, audit_text

    return {
        "text": audit_text.render,
        "json": audit_json.render,
        "junit": audit_junit.render,
        "markdown": audit_markdown.render,
        "sarif": audit_sarif.render,
    }


def _doctor() -> Mapping[str, Renderer[DoctorReport]]:
    from cudaship.render import doctor

    return doctor.FORMATS


def _doctor_env() -> Mapping[str, Renderer[EnvReport]]:
    from cudaship.render import doctor_env

    return doctor_env.FORMATS


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
    from cudaship.render import program

    return program.INSPECT_FORMATS


def _program_check() -> Mapping[str, Renderer[CheckReport]]:
    from cudaship.render import program

    return program.CHECK_FORMATS


def _program_run() -> Mapping[str, Renderer[RunReport]]:
    from cudaship.render import program

    return program.RUN_FORMATS


def _program_export() -> Mapping[str, Renderer[ExportResult]]:
    from cudaship.render import program

    return program.EXPORT_FORMATS


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
