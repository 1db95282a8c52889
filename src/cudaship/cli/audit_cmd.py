"""``cudaship audit WHEEL... [--policy FILE] [--load ...]``: check wheels against their CUDA contract.

Exit 0 when every check passed, 1 when any failed, 2 for bad input (an unreadable wheel or wheel member, an
invalid policy). ``--load`` adds the loader oracle's ``load`` checks (docs/load.md): a load failure is an
error (exit 1), a disagreement a warning.
"""

from __future__ import annotations

import dataclasses
import os
import shutil
import sys
import urllib.parse
from pathlib import Path

import click

from cudaship import envvars
from cudaship.binary.magic import binary_format
from cudaship.checks.engine import AuditObserver, audit_wheels
from cudaship.checks.policy import Policy
from cudaship.checks.records import AuditReport
from cudaship.checks.table import load_policy
from cudaship.cli import audit_resolution
from cudaship.cli.common import (
    cache_dir_option,
    format_option,
    jobs_option,
    known_train,
    output_option,
    policy_option,
    progress_option,
    quick_gil_handover,
    show_progress,
    text_style,
    train_option,
)
from cudaship.cli.progress import ByteProgress
from cudaship.config import load_config
from cudaship.errors import CudashipError, UsageError
from cudaship.exitcodes import ExitCode
from cudaship.knowledge.releases import RELEASE_DATA, known_trains
from cudaship.knowledge.trains import Train
from cudaship.providers.index import DEFAULT_INDEX
from cudaship.providers.options import ProviderOptions
from cudaship.render.escape import line
from cudaship.render.output import encodable, write_report
from cudaship.render.style import Style
from cudaship.render.table import AUDIT, formats, render
from cudaship.safe_read import is_dir, not_regular_reason, open_regular


class _ProgressBar(ByteProgress, AuditObserver):
    """Audit's progress: compressed bytes of the current wheel's members, and the wheel's name."""

    def __init__(self) -> None:
        super().__init__("auditing")
        self._count = 0  # wheels audited at once (0: one wheel)
        self._finished = 0

    def wheels_planned(self, count: int, total_bytes: int) -> None:
        self._count = count
        super().planned(total_bytes)
        self.label(f"0/{count} wheels")

    def planned(self, total_bytes: int) -> None:
        if not self._count:
            super().planned(total_bytes)

    def wheel_started(self, path: str) -> None:
        if not self._count:
            self.label(Path(path).name, restart=True)

    def wheel_finished(self, path: str) -> None:
        if self._count:
            self._finished += 1
            self.label(f"{self._finished}/{self._count} wheels, last {Path(path).name}")


_FORMATS = formats("audit")


def _parse_report_option(value: str) -> tuple[str, str]:
    fmt, sep, path = value.partition("=")
    fmt = fmt.strip().lower()
    if not sep or not path or fmt not in _FORMATS:
        raise UsageError(f"--report {value!r}: expected FORMAT=FILE with FORMAT one of {', '.join(_FORMATS)}")
    return fmt, path


#: what ``audit`` reads: wheels and exported programs, by name (a directory stands for those under it)
_AUDITED = (".whl", ".pt2", ".pte")
_WHAT = "wheels (.whl) and exported programs (.pt2, .pte)"


def _expand(arguments: tuple[str, ...]) -> tuple[tuple[str, ...], tuple[str, ...]]:
    """The wheels and programs to audit: files as named, and for a directory every ``.whl`` (and exported
    program, ``.pt2``/``.pte``) under it (sorted, links to directories not followed); and one line for each
    that cannot be audited (missing, a FIFO or a device, a native library, a directory with none of them),
    so that one bad input never hides the report of the others."""
    from cudaship.inspection.walk import walk_entries  # subcommand start-up: only for a directory

    found: list[str] = []
    errors: list[str] = []

    def bad(message: str, path: str) -> None:
        errors.append(str(UsageError(message, path=path)))  # control characters in the name shown escaped

    for w in arguments:
        path = Path(w)
        if is_dir(path):
            seen = False
            for f, refused in walk_entries(path):
                shown = os.path.join(w, os.path.relpath(f, path))
                if not shown.lower().endswith(_AUDITED):
                    continue
                seen = True
                if refused is None:
                    found.append(shown)
                else:
                    bad(f"{refused}: not audited", shown)
            if not seen:
                bad(f"nothing to audit in this directory: audit reads {_WHAT}, none is under it", w)
        elif not path.exists():
            bad("no such file", w)
        elif (refused := not_regular_reason(path)) is not None:
            bad(refused, w)
        elif not w.lower().endswith(_AUDITED) and _head_is_binary(path):
            bad(
                f"a native binary, not a wheel: audit reads {_WHAT}; `cudaship inspect {w}` reads a library",
                w,
            )
        else:
            found.append(w)
    return tuple(found), tuple(errors)


def _head_is_binary(path: Path) -> bool:
    """The file starts as a native binary does (ELF, PE, Mach-O)."""
    try:
        with open_regular(path) as f:
            return binary_format(f.read(64)) is not None
    except (CudashipError, OSError):
        return False  # the audit's own reading says what is wrong with it


def _parse_train_option(value: str | None) -> Train | None:
    """``--train`` as a train cudaship's release data knows (the data the audit judges a train by)."""
    if value is None:
        return None
    return known_train(value, "--train", known_trains(), RELEASE_DATA)


def _load(
    report: AuditReport,
    policy: Policy,
    providers: ProviderOptions,
    load_python: str | None,
    pins: tuple[str, ...],
    extras: tuple[str, ...],
    timeout: float,
    keep: bool,
    jobs: int | None,
    progress_shown: bool,
    libcuda_stub: str | None = None,
    contain: Containing | None = None,
) -> AuditReport:
    """The report with each wheel loaded for real (``--load``)."""
    # subcommand start-up: the loader oracle only for audit --load
    from cudaship.oracle.install import InstallOptions
    from cudaship.oracle.run import LoadOptions, load_audit

    contain = contain or Containing()

    if load_python is not None and shutil.which(load_python) is None and not Path(load_python).is_file():
        raise UsageError("--load-python: no such interpreter", path=load_python)
    if libcuda_stub is not None and not Path(libcuda_stub).is_file():
        raise UsageError("--libcuda-stub: no such file", path=libcuda_stub)
    index = providers.index_url if providers.index_url not in (None, DEFAULT_INDEX) else None
    options = LoadOptions(
        install=InstallOptions(
            index_url=index,
            find_links=tuple(providers.find_links),
            offline=providers.offline,
            pins=pins,
            extras=extras,
            python=load_python,
            keep=keep,
            allow_sdist=contain.allow_sdist,
        ),
        timeout=timeout,
        jobs=jobs,
        libcuda_stub=libcuda_stub,
        memory=contain.memory,
        deadline=contain.deadline,
    )

    terminal = sys.stderr.isatty()

    def progress(done: int, total: int, label: str) -> None:
        text = f"loading: {label}" if not total else f"loading {done}/{total}: {label}"
        if terminal:  # one line redrawn in place
            click.echo(f"\r\x1b[2K{line(text)[:150]}", err=True, nl=False)
        else:  # --progress into a log: plain lines
            click.echo(line(f"cudaship: {text}"), err=True)

    wheels = []
    for wheel in report.wheels:
        wheels.append(load_audit(wheel, policy, options, progress if progress_shown else None))
    if progress_shown and terminal:
        click.echo("\r\x1b[2K", err=True, nl=False)
    return dataclasses.replace(report, wheels=tuple(wheels))


#: The report's first line with --load (text and markdown; JSON: each wheel's load notes, first).
RAN_CODE_LINE = (
    "--load ran the code of the wheels below (pip install, imports, library constructors), contained as "
    "docs/reliability.md says"
)


@dataclasses.dataclass(frozen=True)
class Containing:
    """What ``audit --load`` lets the wheel's code have (``--load-memory``, ``--load-deadline``,
    ``--allow-sdist``)."""

    memory: int | None = 8 << 30
    deadline: float | None = 3600.0
    allow_sdist: bool = False


def _memory_option(value: str | None) -> int | None:
    from cudaship.containment import DEFAULT_MEMORY, parse_memory

    if value is None:
        return DEFAULT_MEMORY
    try:
        return parse_memory(value) or None
    except ValueError:
        raise UsageError(f"--load-memory: {value[:60]!r} is not a size (8G, 512M, 0 for no limit)") from None


@click.command("audit")
@click.argument("wheels", nargs=-1, required=True, type=click.Path(path_type=str))
@policy_option("the built-in default checks", "policy_file")
@format_option("audit")
@output_option()
@click.option(
    "--report",
    "extra_reports",
    multiple=True,
    metavar="FORMAT=FILE",
    help=f"Also write the report in FORMAT ({', '.join(_FORMATS)}) to FILE, from the same run; "
    "repeatable (e.g. --report junit=audit.xml --report json=audit.json).",
)
@click.option("--verbose", "-v", is_flag=True, help="Text: show the evidence of passing checks too.")
@progress_option("bytes read and the wheel being read")
@click.option(
    "--env",
    "env",
    metavar="PYTHON|DIR",
    default=None,
    help="Look requirements up first in this installed environment: a Python interpreter, a virtual "
    "environment's root or a site-packages directory (RECORD files of installed distributions).",
)
@click.option(
    "--find-links",
    "find_links",
    multiple=True,
    metavar="DIR",
    help="Then in this wheelhouse (a directory of wheels); repeatable.",
)
@click.option(
    "--index-url",
    "index_url",
    default=None,
    metavar="URL",
    help="Then in this package index (PEP 691 JSON; PEP 658 metadata; wheels read with HTTP range requests); "
    f"'' for none. Default: $CUDASHIP_INDEX_URL, else {DEFAULT_INDEX}.",
)
@click.option(
    "--index-host",
    "index_hosts",
    multiple=True,
    metavar="HOST",
    help="Also follow the index's file URLs (and redirects) to HOST; repeatable. By default only the index's "
    "own host and the hosts it is known to serve files from (files.pythonhosted.org for PyPI); only http(s).",
)
@click.option(
    "--offline/--online",
    default=None,
    help="--offline: no network; the index only through the on-disk cache, then the knowledge table. "
    "Default: $CUDASHIP_OFFLINE, else online.",
)
@cache_dir_option("the index's answers under index/")
@audit_resolution.resolution_options
@train_option(
    "The CUDA train the wheels are built for, overriding the +cuXYZ tag and the inference",
    default_text="the tag, else inferred from the device code (the report says from what)",
    dest="train_text",
)
@click.option(
    "--load",
    "load",
    is_flag=True,
    help="Also install each wheel with pip into a fresh venv and load it for real. This RUNS THE WHEEL'S "
    "CODE: its imports and library constructors run in child processes (contained: allow-listed environment "
    "without tokens or keys, fresh HOME and TMPDIR, memory limit, deadline, every process ended at the end; "
    "not a sandbox: use a disposable container for wheels you do not trust, docs/reliability.md). Compares "
    "what the loader mapped with the static verdicts (docs/load.md). Uses --index-url, --find-links and "
    "--offline for pip, which installs wheels only (see --allow-sdist).",
)
@click.option(
    "--load-memory",
    "load_memory",
    metavar="SIZE",
    default=None,
    help="With --load: each child's memory limit, private writable memory (RLIMIT_DATA on Linux): 8G, 512M; "
    "0 for none.  [default: 8G]",
)
@click.option(
    "--load-deadline",
    "load_deadline",
    type=click.FloatRange(min=0),
    default=3600,
    show_default=True,
    metavar="SECONDS",
    help="With --load: seconds the whole load of one wheel may take (pip and every child; what is left is "
    "reported as not run); 0 for none.",
)
@click.option(
    "--allow-sdist",
    "allow_sdist",
    is_flag=True,
    help="With --load: let pip build requirements that have no wheel. Building RUNS THEIR BUILD CODE "
    "(setup.py, a build backend); without it pip installs wheels only (--only-binary :all:).",
)
@click.option(
    "--load-python",
    "load_python",
    metavar="PYTHON",
    default=None,
    help="With --load: load in this existing environment instead of a fresh venv (the wheel alone is "
    "installed with --no-deps into a temporary directory layered on it; nothing is installed into it).",
)
@click.option(
    "--with",
    "pins",
    multiple=True,
    metavar="REQUIREMENT",
    help="With --load: install this too (torch==2.9.1); pins a host package the audit names. Repeatable.",
)
@click.option(
    "--extra",
    "load_extras",
    multiple=True,
    metavar="NAME",
    help="With --load: install the wheel with this extra of its own (WHEEL[NAME]). Repeatable.",
)
@click.option(
    "--load-timeout",
    "load_timeout",
    type=click.FloatRange(min=1),
    default=120,
    show_default=True,
    metavar="SECONDS",
    help="With --load: seconds each child process may take before it is killed (reported as a timeout).",
)
@click.option(
    "--libcuda-stub",
    "libcuda_stub",
    metavar="PATH",
    help="With --load, where there is no NVIDIA driver: the stub libcuda.so to load as libcuda.so.1 "
    "(default: CUDA_HOME, CUDA_PATH or /usr/local/cuda's lib64/stubs).",
)
@click.option(
    "--keep", is_flag=True, help="With --load: keep the temporary environment (its path is in the report)."
)
@jobs_option("wheels and their members")
def command(
    wheels: tuple[str, ...],
    policy_file: str | None,
    fmt: str,
    output: str | None,
    extra_reports: tuple[str, ...],
    verbose: bool,
    progress: bool | None,
    jobs: int | None,
    env: str | None,
    find_links: tuple[str, ...],
    index_url: str | None,
    offline: bool | None,
    cache_dir: Path | None,
    train_text: str | None,
    index_hosts: tuple[str, ...] = (),
    load: bool = False,
    load_python: str | None = None,
    pins: tuple[str, ...] = (),
    load_extras: tuple[str, ...] = (),
    load_timeout: float = 120,
    keep: bool = False,
    libcuda_stub: str | None = None,
    load_memory: str | None = None,
    load_deadline: float = 3600,
    allow_sdist: bool = False,
    constraint_files: tuple[str, ...] = (),
    exclude_newer: str | None = None,
    replay: str | None = None,
    write_constraints: str | None = None,
) -> int:
    """Audit WHEEL(s) against their CUDA contract: files, imports, archs, requirements, ownership, closure.

    A WHEEL may also be an exported program (.pt2, .pte), read as a container; a directory stands for every
    .whl, .pt2 and .pte file under it."""
    train = _parse_train_option(train_text)  # the same rule and exit code (4) as every command's --train
    wheels, unreadable = _expand(wheels)
    extras = [_parse_report_option(value) for value in extra_reports]
    config = load_config(policy_file)
    pinned = audit_resolution.pinning(config, constraint_files, exclude_newer, replay)
    if index_url is None:  # a replay asks the index its report recorded, offline unless --online
        index_url = pinned.index_url
    if offline is None:
        offline = pinned.offline
    if index_url is None:  # click reads no variable itself: every CUDASHIP_* one is read through envvars
        index_url = envvars.get("CUDASHIP_INDEX_URL") or DEFAULT_INDEX
    if offline is None:
        offline = envvars.is_true(envvars.get("CUDASHIP_OFFLINE"))
    providers = ProviderOptions(
        env=env,
        find_links=find_links,
        index_url=index_url or None,
        offline=offline,
        cache_dir=cache_dir,
        index_hosts=index_hosts,
        constraints=pinned.constraints,
        exclude_newer=pinned.exclude_newer,
        resolved_at=pinned.resolved_at,
    )
    for d in find_links:
        if not Path(d).is_dir():
            raise UsageError("not a directory", path=d)
    if index_url and urllib.parse.urlsplit(index_url).scheme not in ("http", "https"):
        raise UsageError(
            f"--index-url: {index_url[:200]!r} is not an http(s) URL (only http and https are read)"
        )
    if env is not None and not Path(env).exists():
        raise UsageError("no such file or directory", path=env)
    if env is not None:
        from cudaship.providers.sources import EnvSource  # subcommand start-up: only with --env

        EnvSource(env)  # one with no distribution installed is bad input, not a provider that has nothing
    policy = load_policy(config)
    progress_shown = show_progress(progress)
    with quick_gil_handover():
        if not wheels:
            report = AuditReport(wheels=(), policy_source=policy.source, policy_default=policy.is_default)
        elif progress_shown:
            with _ProgressBar() as bar:
                report = audit_wheels(
                    wheels, policy, observer=bar, workers=jobs, providers=providers, train=train
                )
        else:
            report = audit_wheels(wheels, policy, workers=jobs, providers=providers, train=train)
    if unreadable:  # the inputs that could not be audited: in the report with the others (exit 2)
        report = dataclasses.replace(report, errors=unreadable + report.errors)

    if load:
        report = _load(
            report,
            policy,
            providers,
            load_python,
            pins,
            load_extras,
            load_timeout,
            keep,
            jobs,
            progress_shown,
            libcuda_stub,
            Containing(_memory_option(load_memory), load_deadline or None, allow_sdist),
        )
        report = dataclasses.replace(report, ran_code=RAN_CODE_LINE)
    elif load_python or pins or load_extras or keep or libcuda_stub or load_memory or allow_sdist:
        raise UsageError(
            "--load-python, --with, --extra, --keep, --libcuda-stub, --load-memory and --allow-sdist "
            "need --load"
        )

    for error in report.errors:
        click.echo(line(f"cudaship: error: {error}"), err=True)
    audit_resolution.finish(report, write_constraints)
    if not report.wheels:
        return ExitCode.BAD_INPUT
    fmt = fmt.lower()
    to_stdout = output is None or output == "-"
    write_report(render(AUDIT, fmt, report, text_style(output, verbose=verbose)), output)
    for extra_fmt, path in extras:
        write_report(render(AUDIT, extra_fmt, report, Style(verbose=verbose)), path)
    if envvars.get("GITHUB_ACTIONS") == "true":
        from cudaship.render import audit_text  # imports rich: only for the text and annotations

        annotations = audit_text.github_annotations(report)
        if annotations:
            # The runner reads workflow commands from stdout and stderr alike. When stdout carries the report
            # (any format), they go to stderr: a report piped into $GITHUB_STEP_SUMMARY or parsed as JSON/XML
            # holds none of them.
            stream = sys.stderr if to_stdout else sys.stdout
            stream.write(encodable(annotations, getattr(stream, "encoding", None)))
            stream.flush()
    # A damaged member (the archive cannot give its bytes back) leaves part of the wheel unchecked: bad input
    # (2), as an unreadable wheel is, even though the report above also lists it as a failed check.
    for damaged in report.damaged:
        click.echo(line(f"cudaship: error: {damaged}"), err=True)
    if report.errors or report.damaged:
        return ExitCode.BAD_INPUT
    return ExitCode.OK if report.ok else ExitCode.FINDINGS
