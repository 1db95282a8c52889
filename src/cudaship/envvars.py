"""Every environment variable cudaship reads, in one table: what reads it, what it means, which values it
takes, and how a value is checked.

cudaship's own variables (``CUDASHIP_*``) are validated: a bad value is a :class:`~cudaship.errors.UsageError`
naming the variable and the value (exit 2), raised by :func:`get` where the code reads it and by
:func:`validate` when a command starts (``cli.main``), so a typo is never taken silently as the default.
The platform's variables (``PATH``, ``LD_LIBRARY_PATH``, ``XDG_CACHE_HOME``, GitHub's) are read as their owner
defines them; the table says what cudaship does with each. docs/cli.md shows :func:`markdown` between
:data:`DOC_START` and :data:`DOC_END`; tests/test_envvars.py ties the table, the docs and the reads in the
source together.
"""

from __future__ import annotations

import os
from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass
from urllib.parse import urlsplit

from cudaship.errors import CudashipError, UnknownTrainError, UsageError
from cudaship.knowledge.trains import parse_train

Check = Callable[[str], "str | None"]  #: the problem with a value, None when it is good


def _choice(*allowed: str) -> Check:
    expected = "expected one of " + ", ".join(a if a else "'' (empty)" for a in allowed)

    def check(value: str) -> str | None:
        return None if value.strip().lower() in allowed else expected

    return check


def _train(value: str) -> str | None:
    try:
        parse_train(value)
    except CudashipError as e:
        return e.message
    return None


def _url(value: str) -> str | None:
    if not value:
        return None  # no index
    parts = urlsplit(value)
    if parts.scheme in ("http", "https") and parts.netloc:
        return None
    return "expected an http(s):// URL of a package index (the only schemes read), or '' for none"


def _directory(value: str) -> str | None:
    if value and os.path.exists(value) and not os.path.isdir(value):
        return "exists and is not a directory"
    return None


def _library(value: str) -> str | None:
    if value and os.path.isdir(value):
        return "a directory, not a library file"
    return None


@dataclass(frozen=True)
class Variable:
    name: str
    read_by: str  #: the commands (or module) that read it
    meaning: str
    values: str  #: the values it takes, as the docs say them
    check: Check | None = None  #: cudaship's own variables: the validation; None: read as the platform says
    #: the error a bad value raises: bad usage (exit 2), or, for a train, the one train rule (exit 4)
    error: type[CudashipError] = UsageError


BOOLEAN = ("", "0", "1", "true", "false", "yes", "no", "on", "off", "t", "f", "y", "n")

VARIABLES: tuple[Variable, ...] = (
    Variable(
        "CUDASHIP_PROCESSES",
        "`inspect`, `gpus`, `audit`",
        "whether large wheels are read on worker processes",
        "`auto` (default), `always`, `never`",
        _choice("auto", "always", "never"),
    ),
    Variable(
        "CUDASHIP_OFFLINE",
        "`audit`",
        "`--offline`: the package index is not asked, only the on-disk cache and the knowledge table",
        "a boolean: `1`/`true`/`yes`/`on`, `0`/`false`/`no`/`off`, or empty",
        _choice(*BOOLEAN),
    ),
    Variable(
        "CUDASHIP_INDEX_URL",
        "`audit`, `survey`",
        "`--index-url`: the PEP 691 package index the requirements are looked up on (`survey`: the index "
        "whose PROJECTs are surveyed when no source is given)",
        "an `http(s)://` URL; unset or empty: `https://pypi.org/simple` (`--index-url ''` for no index)",
        _url,
    ),
    Variable(
        "CUDASHIP_CACHE_DIR",
        "`audit`, `toolkit`, `survey`",
        "the on-disk cache (index pages under `index/`, downloaded toolkit archives under `toolkit/`, the "
        "survey's member cache under `survey/`)",
        "a directory (created when missing); empty: the default, `$XDG_CACHE_HOME/cudaship` or "
        "`~/.cache/cudaship` (macOS: `~/Library/Caches/cudaship`; Windows: `%LOCALAPPDATA%\\cudaship`)",
        _directory,
    ),
    Variable(
        "CUDASHIP_TRAIN",
        "`arch-list`, `cmake`, `env`",
        "the CUDA train when `--train` is not given (`cudaship env` exports it)",
        "a train: `cu132`, `132`, `13.2`, `13.2.2`",
        _train,
        UnknownTrainError,
    ),
    Variable(
        "CUDASHIP_TOOLKIT",
        "`cmake`",
        "the CUDA toolkit to configure with when `--toolkit` is not given (before `CUDA_HOME`, `CUDA_PATH`)",
        "a directory `cudaship toolkit install` made (it must hold the toolkit's manifest when used)",
        _directory,
    ),
    Variable(
        "CUDASHIP_LIBCUDA",
        "`doctor`",
        "the driver library to load instead of the system's (`libcuda.so.1` / `nvcuda.dll`)",
        "a library file or name; one that does not load means no driver (exit 3)",
        _library,
    ),
    Variable(
        "CUDASHIP_NO_MEMMEM",
        "every reader of device code",
        "search with Python's own byte search instead of the C library's `memmem` (for comparisons)",
        "`1` to disable `memmem`; `0` or empty: use it",
        _choice("", "0", "1"),
    ),
    Variable(
        "NV_VARIANT_PROVIDER_FORCE_CUDA_DRIVER_VERSION",
        "`variant release --here`",
        "the NVIDIA variant provider's override of the CUDA version the driver reports (cudaship reads it "
        "as the "
        "provider does, instead of asking the driver)",
        "a CUDA version: `12.9`",
    ),
    Variable(
        "NV_VARIANT_PROVIDER_FORCE_SM_ARCH",
        "`variant release --here`",
        "the NVIDIA variant provider's override of the highest GPU's compute capability",
        "a compute capability: `9.0`",
    ),
    Variable(
        "CUDASHIP",
        "the GitHub Action's steps (`python -m cudaship.ci.action_steps`)",
        "the command that runs cudaship",
        "a command line (default `cudaship`)",
    ),
    Variable("NO_COLOR", "every command", "no colour in text reports", "set (any value): no colour"),
    Variable(
        "LD_LIBRARY_PATH",
        "`doctor --env`",
        "the loader's search path to simulate when `--ld-library-path` is not given",
        "`:`-separated directories",
    ),
    Variable(
        "PATH",
        "`doctor --env` (Windows), `program export`, `program run`, `toolkit env`",
        "the DLL search path of a Windows environment; where `program export` looks for a compiler; the "
        "compilers `program run` keeps from its child; the `PATH` `toolkit env --format dotenv` extends",
        "the platform's search path",
    ),
    Variable(
        "XDG_CACHE_HOME",
        "`audit`, `toolkit` (Linux)",
        "the base of the default cache directory",
        "an absolute directory; a relative one is ignored, as the XDG specification says",
    ),
    Variable("LOCALAPPDATA", "`toolkit` (Windows)", "the base of the default cache directory", "a directory"),
    Variable(
        "PIP_CACHE_DIR",
        "`audit --load`, `doctor --env --confirm`",
        "pip's cache, shared with the pip that installs the wheel (not with `--allow-sdist`: the run's own)",
        "a directory; unset: pip's default for the OS",
    ),
    Variable(
        "HOME",
        "`audit --load`, `doctor --env --confirm`",
        "where pip's default cache is looked for (the children get a home of the run's own)",
        "a directory",
    ),
    Variable(
        "PYENV_ROOT",
        "`audit --load`",
        "where to look for an interpreter of the wheel's Python version (`versions/`)",
        "a directory (default `~/.pyenv`)",
    ),
    Variable(
        "CUDA_HOME",
        "`cmake`, `audit --load`",
        "a CUDA toolkit: the one to configure with; the stub `libcuda.so` the loader check may use",
        "a directory",
    ),
    Variable("CUDA_PATH", "`cmake`, `audit --load`", "as `CUDA_HOME` (after it)", "a directory"),
    Variable("CUDACXX", "`cmake`", "the CUDA compiler CMake would use, reported", "a path"),
    Variable(
        "CXX",
        "`program export`",
        "the first C++ compiler tried when `--cxx` is not given (then `g++`, `c++`, `clang++` on `PATH`); "
        "one that links libstdc++ statically is skipped, and the note says so",
        "a compiler name or path",
    ),
    Variable(
        "WINDOWS_CUDA_HOME",
        "`program export --target-platform windows-x86_64`",
        "the Windows CUDA toolkit when `--windows-cuda` is not given (torch's own name for it)",
        "a directory with `lib/x64` (`cudaship toolkit install --platform windows-x86_64` makes one)",
    ),
    Variable("CUDAFLAGS", "`cmake`", "the CUDA flags CMake would use, reported", "compiler flags"),
    Variable(
        "TORCH_CUDA_ARCH_LIST",
        "`env --check`",
        "compared with the row's list",
        "an arch list",
    ),
    Variable(
        "CMAKE_CUDA_ARCHITECTURES",
        "`env --check`",
        "compared with the row's list",
        "an arch list",
    ),
    Variable(
        "GITHUB_ACTIONS",
        "`audit`",
        "in a GitHub Actions job: findings also as workflow annotations",
        "`true` in a job",
    ),
    Variable(
        "GITHUB_ENV",
        "`env --write github`, `toolkit env --write github`",
        "the file the variables are appended to",
        "a file path (set by GitHub Actions)",
    ),
    Variable(
        "GITHUB_PATH",
        "`toolkit env --write github`",
        "the file the toolkit's `bin` is appended to",
        "a file path (set by GitHub Actions)",
    ),
    Variable(
        "GITHUB_OUTPUT",
        "`matrix --github-output`, the Action",
        "the file step outputs are appended to",
        "a file path (set by GitHub Actions)",
    ),
    Variable(
        "GITHUB_STEP_SUMMARY",
        "the Action",
        "the file the job summary (the markdown report) is appended to",
        "a file path (set by GitHub Actions)",
    ),
    Variable("GITHUB_WORKSPACE", "the Action", "where the wheel patterns are matched", "a directory"),
    Variable("GITHUB_JOB", "the Action", "the job's id, part of the default artifact name", "a job id"),
    Variable(
        "INPUT_ARTIFACT_NAME",
        "the Action",
        "the `artifact-name` input",
        "a name, or empty: `cudaship-reports-JOB-WHEEL-DIGEST`",
    ),
    Variable("INPUT_WHEELS", "the Action", "the `wheels` input", "glob patterns (default `dist/*.whl`)"),
    Variable("INPUT_POLICY", "the Action", "the `policy` input", "a policy file, or empty"),
    Variable("INPUT_REPORT_DIR", "the Action", "the `report-dir` input", "a directory"),
    Variable("INPUT_HTML", "the Action", "the `html` input", "`true` / `false`"),
    Variable("INPUT_FAIL_ON_FINDINGS", "the Action", "the `fail-on-findings` input", "`true` / `false`"),
    Variable("AUDIT_EXIT_CODE", "the Action's gate step", "the audit step's exit status", "an integer"),
)

_BY_NAME = {v.name: v for v in VARIABLES}


def _checked(variable: Variable, value: str | None) -> str | None:
    if value is not None and variable.check is not None:
        problem = variable.check(value)
        if problem is not None:
            raise variable.error(f"environment variable {variable.name}={value!r}: {problem}")
    return value


def get(name: str, environ: Mapping[str, str] | None = None) -> str | None:
    """The value of ``name`` (one of :data:`VARIABLES`), None when unset; a bad value of a validated variable
    raises UsageError naming the variable and the value."""
    return _checked(_BY_NAME[name], (os.environ if environ is None else environ).get(name))


def snapshot(names: Iterable[str], environ: Mapping[str, str] | None = None) -> dict[str, str]:
    """The variables ``names`` (each one of :data:`VARIABLES`) that are set, read by :func:`get`: the
    environment a reader is handed as an explicit input, so that a test can hand it another."""
    return {name: value for name in names if (value := get(name, environ)) is not None}


def validate(environ: Mapping[str, str] | None = None) -> None:
    """Check every validated variable that is set; the first bad one raises UsageError."""
    env = os.environ if environ is None else environ
    for variable in VARIABLES:
        _checked(variable, env.get(variable.name))


def is_true(value: str | None) -> bool:
    """A boolean variable's value (:data:`BOOLEAN`) as a bool; unset and empty are false."""
    return value is not None and value.strip().lower() in ("1", "true", "yes", "on", "t", "y")


# --- docs ---------------------------------------------------------------------------------------------------

#: Where docs/cli.md holds :func:`markdown` (tests/test_envvars.py keeps them equal).
DOC_START = "<!-- environment variables: generated by `python -m cudaship.envvars`; do not edit by hand -->"
DOC_END = "<!-- end of environment variables -->"


def markdown() -> str:
    lines = [
        DOC_START,
        "",
        "| variable | read by | what it does | values | a bad value |",
        "|---|---|---|---|---|",
    ]
    for v in VARIABLES:
        if v.check is None:
            bad = "read as the platform defines it"
        else:
            bad = f"exit {int(v.error.exit_code)}, one line naming it"
        cells = [f"`{v.name}`", v.read_by, v.meaning, v.values, bad]
        lines.append("| " + " | ".join(c.replace("|", "\\|") for c in cells) + " |")
    lines += ["", DOC_END]
    return "\n".join(lines)


if __name__ == "__main__":  # pragma: no cover - a maintainer's tool
    print(markdown())
