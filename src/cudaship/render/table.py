"""The one table of renderers: for each command, its formats and the renderer of each, typed by the record the
command produces.

A :class:`Renderer` of a command's report type ``R`` is any function ``(report: R, style: Style) -> str``;
a :class:`Command` is the command's formats (its default first) and how to load their renderers, so a format
exists for a command exactly when it is in :data:`COMMANDS`. The CLI's ``--format`` choices come from
:func:`formats`; a command writes its report with ``render(AUDIT, fmt, report, style)``, which mypy checks
against the record type of ``AUDIT``. A renderer takes layout from :class:`Style`, never a decision about
content.

The renderers are loaded only when a command renders (``cudaship --help`` stays fast: the renderers and the
records they import are about 300 modules): each command's ``load`` imports the modules of the one format
asked, in the function.

:func:`render` is also where names from inputs are made safe to print, for every command and format at once:
the record goes through :func:`cudaship.render.escape.record` before the renderer and the report through
:func:`cudaship.render.escape.report` after (docs/formats.md, "Names from inputs").
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import TYPE_CHECKING, Generic, TypeVar

from cudaship.render import escape
from cudaship.render.style import Renderer, Style

if TYPE_CHECKING:
    from cudaship.analysis.doctor import DoctorReport
    from cudaship.analysis.gpus import GpuReport
    from cudaship.checks.environment import EnvReport
    from cudaship.checks.records import AuditReport
    from cudaship.checks.variant_props import PropertiesReport
    from cudaship.checks.variant_release import ReleaseReport
    from cudaship.ci.archs import TrainArchs
    from cudaship.ci.cmake import CMakePlan
    from cudaship.ci.env import BuildEnv
    from cudaship.ci.records import MatrixResult
    from cudaship.inspection.program_records import ProgramInfo
    from cudaship.inspection.report import InspectReport
    from cudaship.program.export import ExportResult
    from cudaship.program.records import CheckReport, RunReport
    from cudaship.repair.records import RepairReport
    from cudaship.survey.engine import SurveySummary
    from cudaship.toolkit.records import ToolkitCatalog, ToolkitEnv, ToolkitView

R = TypeVar("R")


@dataclass(frozen=True)
class Formats:
    """A command's name and format names (default first): what the CLI offers, without loading renderers."""

    name: str
    names: tuple[str, ...]


@dataclass(frozen=True)
class Command(Formats, Generic[R]):
    """A command's formats and the loader of a format's renderer (a name in ``names`` -> its renderer; only
    that format's modules are imported: a JSON report need not import rich)."""

    load: Callable[[str], Renderer[R]]


# Each loader imports a format's renderer when the command renders it (start-up time: the module docstring).


def _inspect(fmt: str) -> Renderer[InspectReport]:
    if fmt == "json":  # JSON alone does not import rich (about 60 ms)
        from cudaship.render import inspect_json

        return inspect_json.render
    from cudaship.render import inspect_text

    return inspect_text.render


def _gpus(fmt: str) -> Renderer[GpuReport]:
    from cudaship.render import gpus

    return gpus.FORMATS[fmt]


def _audit(fmt: str) -> Renderer[AuditReport]:
    if fmt == "json":
        from cudaship.render import audit_json

        return audit_json.render
    if fmt == "junit":
        from cudaship.render import audit_junit

        return audit_junit.render
    if fmt == "markdown":
        from cudaship.render import audit_markdown

        return audit_markdown.render
    if fmt == "sarif":
        from cudaship.render import audit_sarif

        return audit_sarif.render
    from cudaship.render import audit_text

    return audit_text.render


def _doctor(fmt: str) -> Renderer[DoctorReport]:
    from cudaship.render import doctor

    return doctor.FORMATS[fmt]


def _doctor_env(fmt: str) -> Renderer[EnvReport]:
    from cudaship.render import doctor_env

    return doctor_env.FORMATS[fmt]


def _arch_list(fmt: str) -> Renderer[TrainArchs]:
    from cudaship.render import arch_list

    return arch_list.FORMATS[fmt]


def _matrix(fmt: str) -> Renderer[MatrixResult]:
    from cudaship.render import matrix

    return matrix.FORMATS[fmt]


def _env(fmt: str) -> Renderer[BuildEnv]:
    from cudaship.render import env

    return env.FORMATS[fmt]


def _cmake(fmt: str) -> Renderer[CMakePlan]:
    from cudaship.render import cmake

    return cmake.FORMATS[fmt]


def _toolkit(fmt: str) -> Renderer[ToolkitView | ToolkitCatalog]:
    from cudaship.render import toolkit

    return toolkit.FORMATS[fmt]


def _toolkit_env(fmt: str) -> Renderer[ToolkitEnv]:
    from cudaship.render import toolkit

    return toolkit.ENV_FORMATS[fmt]


def _program_inspect(fmt: str) -> Renderer[list[ProgramInfo]]:
    from cudaship.render import program

    return program.INSPECT_FORMATS[fmt]


def _program_check(fmt: str) -> Renderer[CheckReport]:
    from cudaship.render import program

    return program.CHECK_FORMATS[fmt]


def _program_run(fmt: str) -> Renderer[RunReport]:
    from cudaship.render import program

    return program.RUN_FORMATS[fmt]


def _program_export(fmt: str) -> Renderer[ExportResult]:
    from cudaship.render import program

    return program.EXPORT_FORMATS[fmt]


def _repair(fmt: str) -> Renderer[RepairReport]:
    from cudaship.render import repair

    return repair.FORMATS[fmt]


def _variant_properties(fmt: str) -> Renderer[PropertiesReport]:
    from cudaship.render import variant

    return variant.FORMATS[fmt]


def _variant_release(fmt: str) -> Renderer[ReleaseReport]:
    from cudaship.render import variant

    return variant.RELEASE_FORMATS[fmt]


def _survey(fmt: str) -> Renderer[SurveySummary]:
    from cudaship.render import survey_text

    return survey_text.FORMATS[fmt]


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
VARIANT_PROPERTIES: Command[PropertiesReport] = Command(
    "variant properties", ("text", "args", "json"), _variant_properties
)
VARIANT_MAKE: Command[PropertiesReport] = Command("variant make", ("text", "json"), _variant_properties)
VARIANT_RELEASE: Command[ReleaseReport] = Command("variant release", ("text", "json"), _variant_release)
SURVEY: Command[SurveySummary] = Command("survey", ("text", "json", "markdown"), _survey)

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
        VARIANT_PROPERTIES,
        VARIANT_MAKE,
        VARIANT_RELEASE,
        SURVEY,
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
    renderer = command.load(fmt)
    style = style or Style()
    kind = escape.kind_of(fmt)
    rendered = renderer(escape.record(report, kind), style)
    return escape.report(rendered, kind, color=style.color and kind == "text")
