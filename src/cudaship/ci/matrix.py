"""Build and end-to-end matrices from one list of supported trains (``[tool.cudaship.matrix]``).

The rules, each with a test in tests/ci/test_matrix.py:

- every (train, Python, platform) is a candidate build row, less the configured exclusions;
- a pull request without the all-label gets ONE row: the default Python on the default platform and the
  supported train nearest the default train: the default itself, else the newest older one, and only when no
  older one exists the oldest newer one;
- a labelled pull request, a push, a schedule and a release get every row;
- a fork pull request gets no row that needs secrets or a GPU, and a note says which and why;
- a release fails (``problems``) if a supported train or a (Python, train) pair has no row, or a row's train
  has no arch list for its machine; other events drop such rows with a note;
- end-to-end rows come from a build matrix that was actually generated (``derive_e2e``): one per train built
  on each end-to-end platform, with the oldest Python built for it, so a dropped train is never tested.
"""

from __future__ import annotations

import re
from collections.abc import Callable, Iterable, Mapping
from pathlib import Path
from typing import Any

from cudaship.ci.archs import normalize_machine, train_info
from cudaship.ci.records import (
    ArchSyntaxes,
    Event,
    Exclusion,
    MatrixConfig,
    MatrixResult,
    MatrixRow,
    PlatformSpec,
    RowKind,
    Skipped,
)
from cudaship.config import ProjectConfig
from cudaship.errors import KnowledgeError, PolicyError, UsageError
from cudaship.knowledge.platforms import cuda_machines, cuda_os_names
from cudaship.words import count

#: (train tag, machine) -> the row's arch lists, or None when the arch table has none
ArchLookup = Callable[[str, str], "ArchSyntaxes | None"]

DEFAULT_ALL_LABEL = "ciflow/binaries/all"
_PYTHON_RE = re.compile(r"^3\.(\d+)t?$")
_KEYS = {
    "trains",
    "python",
    "platforms",
    "default-train",
    "default-python",
    "default-platform",
    "all-label",
    "exclude",
    "e2e-platforms",
}
_PLATFORM_KEYS = {"runner", "gpu-runner", "secrets"}


# ---------------------------------------------------------------------------------------------- configuration


def _fail(message: str, source: str | None) -> PolicyError:
    return PolicyError(f"[matrix] {message}", path=source)


def _str_list(table: Mapping[str, Any], key: str, source: str | None) -> list[str]:
    value = table.get(key)
    if not isinstance(value, list) or not value or not all(isinstance(v, str) and v for v in value):
        raise _fail(f"{key} must be a non-empty list of strings", source)
    if len(set(value)) != len(value):
        raise _fail(f"{key} lists a value twice", source)
    return list(value)


def _python_key(version: str) -> tuple[int, int]:
    m = _PYTHON_RE.match(version)
    assert m is not None
    return (int(m.group(1)), 1 if version.endswith("t") else 0)


def _platform(name: str, spec: Any, source: str | None) -> PlatformSpec:
    os_name, _, machine = name.partition("-")
    if os_name not in cuda_os_names() or not machine:
        raise _fail(
            f"platform {name!r} must be <os>-<machine> with os one of {', '.join(cuda_os_names())}", source
        )
    try:
        machine = normalize_machine(machine)
    except KnowledgeError:
        raise _fail(
            f"platform {name!r}: unknown machine {machine!r} (known: {', '.join(cuda_machines())})", source
        ) from None
    if spec is None:
        return PlatformSpec(name, os_name, machine)
    if not isinstance(spec, dict):
        raise _fail(f"platforms.{name} must be a table", source)
    unknown = sorted(set(spec) - _PLATFORM_KEYS)
    if unknown:
        raise _fail(
            f"platforms.{name}: unknown key {unknown[0]!r} (known: {', '.join(sorted(_PLATFORM_KEYS))})",
            source,
        )
    runner = spec.get("runner")
    gpu_runner = spec.get("gpu-runner")
    secrets = spec.get("secrets", False)
    for key, value in (("runner", runner), ("gpu-runner", gpu_runner)):
        if value is not None and not (isinstance(value, str) and value):
            raise _fail(f"platforms.{name}.{key} must be a string", source)
    if not isinstance(secrets, bool):
        raise _fail(f"platforms.{name}.secrets must be true or false", source)
    return PlatformSpec(name, os_name, machine, runner, gpu_runner, secrets)


def parse_matrix_config(table: Mapping[str, Any], source: str | None = None) -> MatrixConfig:
    """Validate a ``[matrix]`` table; every problem is a PolicyError naming the key."""
    if not table:
        raise _fail("table is missing: list the supported trains, Python versions and platforms", source)
    unknown = sorted(set(table) - _KEYS)
    if unknown:
        raise _fail(f"unknown key {unknown[0]!r} (known: {', '.join(sorted(_KEYS))})", source)

    infos = [train_info(t) for t in _str_list(table, "trains", source)]
    if len({i.tag for i in infos}) != len(infos):
        raise _fail("trains lists a train twice", source)
    infos.sort(key=lambda i: i.key)
    trains = tuple(i.tag for i in infos)

    pythons = _str_list(table, "python", source)
    for version in pythons:
        if not _PYTHON_RE.match(version):
            raise _fail(f"python: {version!r} is not a CPython version such as '3.12'", source)
    pythons.sort(key=_python_key)

    raw_platforms = table.get("platforms")
    if isinstance(raw_platforms, list):
        names = _str_list(table, "platforms", source)
        platforms = tuple(_platform(n, None, source) for n in names)
    elif isinstance(raw_platforms, dict) and raw_platforms:
        platforms = tuple(_platform(n, s, source) for n, s in raw_platforms.items())
    else:
        raise _fail(
            "platforms must be a non-empty list (['linux-x86_64', ...]) or a table of platforms", source
        )
    platform_names = [p.name for p in platforms]

    default_train_text = table.get("default-train", trains[-1])
    if not isinstance(default_train_text, str):
        raise _fail("default-train must be a string such as 'cu130'", source)
    default_train = train_info(default_train_text).tag

    default_python = table.get("default-python", pythons[-1])
    if not isinstance(default_python, str) or default_python not in pythons:
        raise _fail(f"default-python {default_python!r} is not one of python = {pythons}", source)

    default_platform = table.get("default-platform", platform_names[0])
    if not isinstance(default_platform, str) or default_platform not in platform_names:
        raise _fail(
            f"default-platform {default_platform!r} is not one of platforms = {platform_names}", source
        )

    all_label = table.get("all-label", DEFAULT_ALL_LABEL)
    if not isinstance(all_label, str) or not all_label:
        raise _fail("all-label must be a non-empty string", source)

    raw_exclude = table.get("exclude", [])
    if not isinstance(raw_exclude, list):
        raise _fail("exclude must be a list of tables", source)
    exclude = tuple(
        _exclusion(i, e, trains, pythons, platform_names, source) for i, e in enumerate(raw_exclude)
    )

    if "e2e-platforms" in table:
        e2e = _str_list(table, "e2e-platforms", source)
        for name in e2e:
            if name not in platform_names:
                raise _fail(f"e2e-platforms: {name!r} is not one of platforms = {platform_names}", source)
    else:
        e2e = [p.name for p in platforms if p.gpu_runner] or [default_platform]

    return MatrixConfig(
        trains=trains,
        python=tuple(pythons),
        platforms=platforms,
        default_train=default_train,
        default_python=default_python,
        default_platform=default_platform,
        all_label=all_label,
        exclude=exclude,
        e2e_platforms=tuple(e2e),
        source=source,
    )


def _exclusion(
    index: int,
    entry: Any,
    trains: Iterable[str],
    pythons: Iterable[str],
    platforms: Iterable[str],
    source: str | None,
) -> Exclusion:
    where = f"exclude[{index}]"
    if not isinstance(entry, dict) or not entry:
        raise _fail(
            f"{where} must be a table such as {{ train = 'cu126', platform = 'linux-aarch64' }}", source
        )
    unknown = sorted(set(entry) - {"train", "python", "platform"})
    if unknown:
        raise _fail(f"{where}: unknown key {unknown[0]!r} (known: platform, python, train)", source)
    train = entry.get("train")
    if train is not None:
        train = train_info(str(train)).tag
        if train not in trains:
            raise _fail(f"{where}: train {train!r} is not a supported train", source)
    python = entry.get("python")
    if python is not None and python not in pythons:
        raise _fail(f"{where}: python {python!r} is not in python", source)
    platform = entry.get("platform")
    if platform is not None and platform not in platforms:
        raise _fail(f"{where}: platform {platform!r} is not in platforms", source)
    return Exclusion(train, python, platform)


def load_matrix_config(config: ProjectConfig) -> MatrixConfig:
    source = str(config.source) if config.source else None
    if config.source is None:
        raise PolicyError(
            "no configuration found: add [tool.cudaship.matrix] to pyproject.toml or pass --policy"
        )
    return parse_matrix_config(config.table("matrix"), source)


# ---------------------------------------------------------------------------------------------- build matrix


def nearest_train(supported: Iterable[str], default: str) -> str | None:
    """The supported train nearest ``default``: itself, else the newest older, else the oldest newer one."""
    infos = sorted((train_info(t) for t in supported), key=lambda i: i.key)
    if not infos:
        return None
    target = train_info(default).key
    older = [i for i in infos if i.key <= target]
    if older:
        return older[-1].tag
    return infos[0].tag


def _row(
    kind: RowKind,
    train: str,
    python: str,
    platform: PlatformSpec,
    archs: ArchSyntaxes | None,
) -> MatrixRow:
    e2e = kind is RowKind.E2E
    return MatrixRow(
        kind=kind,
        train=train,
        cuda=train_info(train).version,
        python=python,
        platform=platform.name,
        os=platform.os,
        machine=platform.machine,
        runner=platform.gpu_runner if e2e else platform.runner,
        archs=archs,
        needs_gpu=e2e,
        needs_secrets=platform.secrets and not e2e,
    )


def build_matrix(
    config: MatrixConfig,
    archs: ArchLookup,
    event: Event,
    labels: Iterable[str] = (),
    fork: bool = False,
) -> MatrixResult:
    """The build rows for ``event``, with the reasons for every row left out."""
    labels = {label.strip() for label in labels if label.strip()}
    notes: list[str] = []
    skipped: list[Skipped] = []
    problems: list[str] = []

    candidates: list[MatrixRow] = []
    missing_archs: dict[tuple[str, str], list[MatrixRow]] = {}
    for train in config.trains:
        for python in config.python:
            for platform in config.platforms:
                excluded = next((e for e in config.exclude if e.matches(train, python, platform.name)), None)
                if excluded is not None:
                    skipped.append(
                        Skipped(train, python, platform.name, f"excluded by {excluded.describe()}")
                    )
                    continue
                row = _row(RowKind.BUILD, train, python, platform, archs(train, platform.machine))
                if row.archs is None:
                    missing_archs.setdefault((train, platform.machine), []).append(row)
                candidates.append(row)

    for (train, machine), rows in missing_archs.items():
        message = f"train {train} has no arch list for {machine} in the arch table"
        if event is Event.RELEASE:
            problems.append(message)
        else:
            notes.append(f"{message}: {count(len(rows), 'row')} left out")
        skipped.extend(Skipped(r.train, r.python, r.platform, message) for r in rows)
    if event is not Event.RELEASE:
        candidates = [r for r in candidates if r.archs is not None]

    if event is Event.PULL_REQUEST and config.all_label not in labels:
        pool = [
            r
            for r in candidates
            if r.python == config.default_python and r.platform == config.default_platform
        ]
        chosen = nearest_train({r.train for r in pool}, config.default_train)
        rows = [r for r in pool if r.train == chosen]
        if chosen is None:
            notes.append(
                f"pull request: no buildable row for Python {config.default_python} on "
                f"{config.default_platform}; nothing to build"
            )
        else:
            why = (
                "the default train"
                if chosen == config.default_train
                else (f"the supported train nearest the default {config.default_train}")
            )
            notes.append(
                f"pull request without label {config.all_label!r}: one row, {chosen} ({why}), "
                f"Python {config.default_python}, {config.default_platform}"
            )
        for r in candidates:
            if r not in rows:
                skipped.append(
                    Skipped(r.train, r.python, r.platform, f"pull request without label {config.all_label!r}")
                )
    else:
        rows = candidates

    if fork:
        kept = [r for r in rows if not (r.needs_secrets or r.needs_gpu)]
        for r in rows:
            if r not in kept:
                skipped.append(
                    Skipped(
                        r.train, r.python, r.platform, "fork pull request: no secrets for a fork's workflow"
                    )
                )
        dropped = len(rows) - len(kept)
        if dropped:
            platforms = sorted({r.platform for r in rows if r not in kept})
            notes.append(
                f"fork pull request: {count(dropped, 'row')} on {', '.join(platforms)} left out: they need "
                "repository secrets, which a fork's workflow does not get"
            )
        rows = kept

    if event is Event.RELEASE:
        problems.extend(release_gaps(config, rows))

    return MatrixResult(event, RowKind.BUILD, tuple(rows), tuple(skipped), tuple(notes), tuple(problems))


def release_gaps(config: MatrixConfig, rows: Iterable[MatrixRow]) -> list[str]:
    """What a release matrix misses: supported trains and (Python, train) pairs with no row."""
    rows = list(rows)
    problems: list[str] = []
    built_trains = {r.train for r in rows}
    for train in config.trains:
        if train not in built_trains:
            problems.append(f"supported train {train} has no row")
    pairs = {(r.python, r.train) for r in rows}
    for train in config.trains:
        if train not in built_trains:
            continue
        for python in config.python:
            if (python, train) not in pairs:
                problems.append(f"(Python {python}, train {train}) has no row")
    return problems


# ---------------------------------------------------------------------------------------------- e2e matrix


def read_build_matrix(path: Path) -> list[dict[str, str]]:
    """The ``include`` rows of a build matrix file written by ``cudaship matrix`` (either JSON format)."""
    from cudaship.loaders import read_json

    try:
        data = read_json(path, error=UsageError)
    except UsageError as e:
        message = e.message.replace("invalid JSON", "build matrix is not JSON", 1)
        raise UsageError(message, path=str(path)) from None
    rows = data.get("include") if isinstance(data, dict) else None
    if not isinstance(rows, list):
        raise UsageError('build matrix must be an object with an "include" list', path=str(path))
    for index, row in enumerate(rows):
        if not isinstance(row, dict):
            raise UsageError(f"build matrix include[{index}] is not an object", path=str(path))
        for key in ("train", "python", "platform"):
            if not isinstance(row.get(key), str):
                raise UsageError(f"build matrix include[{index}] has no {key!r}", path=str(path))
        if row.get("kind", "build") != "build":
            raise UsageError(
                f"build matrix include[{index}] is a {row.get('kind')!r} row, not a build row", path=str(path)
            )
    return rows


def derive_e2e(
    config: MatrixConfig,
    archs: ArchLookup,
    build_rows: Iterable[Mapping[str, str]],
    event: Event,
    fork: bool = False,
) -> MatrixResult:
    """End-to-end rows for the trains a build matrix actually built: one per (train, e2e platform)."""
    notes: list[str] = []
    skipped: list[Skipped] = []
    built: dict[tuple[str, str], list[str]] = {}
    for row in build_rows:
        train = train_info(row["train"]).tag
        built.setdefault((train, row["platform"]), []).append(row["python"])
    if not built:
        notes.append("the build matrix has no rows: no wheel to test end to end")

    rows: list[MatrixRow] = []
    for (train, platform_name), pythons in sorted(
        built.items(), key=lambda kv: (train_info(kv[0][0]).key, kv[0][1])
    ):
        if platform_name not in config.e2e_platforms:
            continue
        try:
            platform = config.platform(platform_name)
        except KeyError:
            notes.append(f"build row platform {platform_name!r} is not configured; no end-to-end row")
            continue
        python = min(pythons, key=lambda v: _python_key(v) if _PYTHON_RE.match(v) else (999, 0))
        rows.append(_row(RowKind.E2E, train, python, platform, archs(train, platform.machine)))

    for train in config.trains:
        if not any(t == train for t, _ in built):
            notes.append(f"train {train} was not built: no end-to-end row")

    if fork and rows:
        for r in rows:
            skipped.append(
                Skipped(
                    r.train,
                    r.python,
                    r.platform,
                    "fork pull request: end-to-end rows need a GPU runner and secrets",
                    RowKind.E2E,
                )
            )
        notes.append(
            f"fork pull request: {count(len(rows), 'end-to-end row')} left out: they run on GPU runners "
            "and need secrets, which a fork's workflow does not get"
        )
        rows = []

    return MatrixResult(event, RowKind.E2E, tuple(rows), tuple(skipped), tuple(notes), ())
