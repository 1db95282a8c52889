"""cudaship's public Python API: four typed functions for build and test code (a cibuildwheel hook, a pytest
fixture, a release script). See docs/api.md.

Each returns the record the command's ``--format json`` report serialises (the same object the CLI renders),
so ``inspect(path)`` holds exactly what ``cudaship inspect --format json PATH`` prints. Where the command
would exit 2 (an input it could not read) the function raises :class:`InputError`, which carries the whole
report; every other problem the command turns into an exit code is a :class:`~cudaship.errors.CudashipError`
subclass (:class:`~cudaship.errors.PolicyError` for a bad policy, :class:`~cudaship.errors.UnknownTrainError`
for a train the release data does not know, :class:`~cudaship.errors.KnowledgeError` for an unknown GPU or
driver). Findings are not errors: an audit that fails its policy returns its report (``report.ok`` is False),
as ``gpus`` returns one whose ``unmet`` lists the GPUs asked that cannot run the input.

Everything outside ``cudaship.__all__`` is private: modules may change between releases.
"""

from __future__ import annotations

import os
from collections.abc import Sequence
from pathlib import Path

from cudaship.analysis.gpus import GpuReport, gpu_report
from cudaship.checks.engine import audit_wheels
from cudaship.checks.records import AuditReport
from cudaship.checks.table import load_policy
from cudaship.config import load_config
from cudaship.errors import CudashipError, UsageError
from cudaship.inspection.report import InspectReport
from cudaship.inspection.walk import inspect_paths
from cudaship.knowledge.archs import Arch
from cudaship.knowledge.driver import parse_driver
from cudaship.knowledge.gpus import capability_of
from cudaship.knowledge.releases import RELEASE_DATA, known_trains, require_train
from cudaship.providers.options import ProviderOptions
from cudaship.repair.records import RepairReport
from cudaship.repair.run import repair_wheel

#: a path as the functions take it
PathArg = str | os.PathLike[str]

Report = InspectReport | GpuReport | AuditReport | RepairReport


class InputError(CudashipError):
    """An input could not be read (the command's exit 2). ``report`` is the whole report: the inputs that
    were read, and each one that was not with its error."""

    def __init__(self, message: str, report: Report) -> None:
        super().__init__(message)
        self.report = report


def _paths(paths: PathArg | Sequence[PathArg]) -> list[str]:
    if isinstance(paths, (str, os.PathLike)):
        return [os.fspath(paths)]
    return [os.fspath(p) for p in paths]


def inspect(
    paths: PathArg | Sequence[PathArg], *, details: bool = False, workers: int | None = None
) -> InspectReport:
    """``cudaship inspect``: what each library, wheel, program or device-code file (or every one under a
    directory) needs and carries. ``details`` reads each cubin's toolkit version (slower); ``workers``
    threads read files and wheel members (default: the usable CPUs, at most 4).

    Raises :class:`InputError` when an input cannot be read."""
    report = inspect_paths(_paths(paths), details=details, workers=workers)
    if report.failed:
        raise InputError(_first_failure([f"{f.path}: {f.error}" for f in report.failed]), report)
    return report


def gpus(
    paths: PathArg | Sequence[PathArg],
    *,
    gpus: Sequence[str] = (),
    driver: str | None = None,
    details: bool = False,
    workers: int | None = None,
) -> GpuReport:
    """``cudaship gpus``: per GPU, whether each input runs on it (SASS, PTX JIT or not), and the driver it
    needs. ``gpus``: GPU names or compute capabilities (``"H100"``, ``"RTX 4090"``, ``"8.6"``; default: every
    capability from 7.0 to 12.1); ``driver``: a driver version (``"580.65"``) or the CUDA release it supports
    (``"13.0"``) to judge under.

    Raises :class:`InputError` when an input cannot be read; :class:`~cudaship.errors.KnowledgeError` for a
    GPU or driver the knowledge base does not know."""
    capabilities: list[Arch] = []
    asked: list[tuple[Arch, str]] = []
    for text in gpus:
        arch = capability_of(text)
        if arch not in capabilities:
            capabilities.append(arch)
        if text.strip() != arch.capability:  # a name, shown in its row (a capability names no GPU)
            asked.append((arch, " ".join(text.split())))
    inspected = inspect_paths(_paths(paths), details=details, workers=workers)
    report = gpu_report(
        inspected,
        capabilities=sorted(capabilities) if gpus else None,
        driver=parse_driver(driver, "linux") if driver is not None else None,
        asked=asked,
    )
    if report.failed:
        raise InputError(_first_failure([f"{f.label}: {f.error}" for f in report.failed]), report)
    return report


def audit(
    wheel: PathArg,
    *,
    policy: PathArg | None = None,
    train: str | None = None,
    providers: ProviderOptions | None = None,
    workers: int | None = None,
) -> AuditReport:
    """``cudaship audit``: the checks of the policy on one wheel (or exported program, ``.pt2``/``.pte``).

    ``policy``: a ``cudaship.toml`` or ``pyproject.toml``; None: the one the CLI finds (``[tool.cudaship]`` of
    the nearest ``pyproject.toml``, else ``cudaship.toml``, from the current directory up), else the built-in
    default. ``train`` overrides the wheel's CUDA train (``"12.8"``, ``"cu128"``). ``providers`` says where
    the wheel's requirements are looked up; the default is cudaship's knowledge table only, no network (the
    CLI also asks PyPI: ``ProviderOptions(index_url="https://pypi.org/simple")``).

    Returns the report whether or not the wheel passes (``report.ok``). Raises :class:`InputError` when the
    wheel cannot be read (or a member of it is damaged), :class:`~cudaship.errors.PolicyError` for an invalid
    policy, :class:`~cudaship.errors.UnknownTrainError` for a train the release data does not know."""
    parsed_train = require_train(train, known_trains(), RELEASE_DATA, label="train") if train else None
    loaded = load_policy(load_config(os.fspath(policy) if policy is not None else None))
    report = audit_wheels(
        [os.fspath(wheel)], loaded, workers=workers, providers=providers, train=parsed_train
    )
    problems = [*report.errors, *report.damaged]
    if problems:
        raise InputError(_first_failure(problems), report)
    return report


def repair(
    wheel: PathArg,
    dest: PathArg | None = None,
    *,
    dry_run: bool = False,
    drop_unused: bool = False,
    workers: int | None = None,
) -> RepairReport:
    """``cudaship repair``: a copy of ``wheel`` in the directory ``dest`` without the CUDA libraries an NVIDIA
    wheel provides, its DT_NEEDED and RUNPATH pointed at NVIDIA's wheels and those wheels declared as
    requirements. The input is never changed. ``dry_run``: the plan only (``dest`` may then be None);
    ``drop_unused``: also remove DT_NEEDED entries none of whose symbols is used.

    Raises :class:`InputError` when the wheel cannot be read or repaired."""
    if dest is None and not dry_run:
        raise UsageError("repair: give dest, a directory for the repaired wheel, or dry_run=True")
    directory = Path(dest) if dest is not None else None
    result = repair_wheel(Path(wheel), directory, dry_run=dry_run, workers=workers, drop_unused=drop_unused)
    report = RepairReport((result,), dry_run, str(directory) if directory else None)
    if result.error:
        raise InputError(result.error, report)
    return report


def _first_failure(problems: list[str]) -> str:
    more = f" (and {len(problems) - 1} more)" if len(problems) > 1 else ""
    return problems[0] + more
