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
from collections.abc import Callable, Iterable, Mapping, Sequence
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
from cudaship.loaders import read_json
from cudaship.schema import Table
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


def _python_key(version: str) -> tuple[int, int]:
    m = _PYTHON_RE.match(version)
    assert m is not None
    return (int(m.group(1)), 1 if version.endswith("t") else 0)


def _platform(root: Table, name: str, key: str, spec: Table | None) -> PlatformSpec:
    os_name, _, machine = name.partition("-")
    if os_name not in cuda_os_names() or not machine:
        raise root.fail(
            key, f"platform {name!r} must be <os>-<machine> with os one of {', '.join(cuda_os_names())}"
        )
    try:
        machine = normalize_machine(machine)
    except KnowledgeError:
        raise root.fail(
            key, f"platform {name!r}: unknown machine {machine!r} (known: {', '.join(cuda_machines())})"
        ) from None
    if spec is None:
        return PlatformSpec(name, os_name, machine)
    spec.unknown(_PLATFORM_KEYS)
    return PlatformSpec(
        name,
        os_name,
        machine,
        spec.string("runner", nonempty=True),
        spec.string("gpu-runner", nonempty=True),
        spec.boolean("secrets", False),
    )


def parse_matrix_config(table: Mapping[str, Any], source: str | None = None) -> MatrixConfig:
    """Validate a ``[matrix]`` table; every problem is a PolicyError naming the key (``matrix.python``)."""
    root = Table(table, "matrix", source, PolicyError)
    if not table:
        raise root.fail(
            "matrix", "table is missing: list the supported trains, Python versions and platforms"
        )
    root.unknown(_KEYS)

    infos = [train_info(t) for t in root.strings("trains", single=False, required=True, unique=True)]
    tags = [i.tag for i in infos]
    if len(set(tags)) != len(tags):
        twice = next(t for t in tags if tags.count(t) > 1)
        raise root.fail("matrix.trains", f"lists a train twice ({twice})")
    infos.sort(key=lambda i: i.key)
    trains = tuple(i.tag for i in infos)

    pythons = list(root.strings("python", single=False, required=True, unique=True))
    for i, version in enumerate(pythons):
        if not _PYTHON_RE.match(version):
            raise root.fail(
                root.dotted("python") + f"[{i}]", f"{version!r} is not a CPython version such as '3.12'"
            )
    pythons.sort(key=_python_key)

    if isinstance(root.get("platforms"), list):
        names = root.strings("platforms", single=False, required=True, unique=True)
        platforms = tuple(_platform(root, n, f"matrix.platforms[{i}]", None) for i, n in enumerate(names))
    elif isinstance(root.get("platforms"), dict) and root.get("platforms"):
        specs = root.table("platforms").tables()
        platforms = tuple(_platform(root, n, spec.key, spec) for n, spec in specs)
    else:
        raise root.wrong(
            "platforms",
            "a non-empty list (['linux-x86_64', ...]) or a table of platforms",
            root.get("platforms"),
        )
    platform_names = [p.name for p in platforms]

    default_train = train_info(root.string("default-train", trains[-1]) or trains[-1]).tag
    default_python = root.string("default-python", pythons[-1], pythons) or pythons[-1]
    default_platform = root.string("default-platform", platform_names[0], platform_names) or platform_names[0]
    all_label = root.string("all-label", DEFAULT_ALL_LABEL, nonempty=True) or DEFAULT_ALL_LABEL
    exclude = tuple(_exclusion(row, trains, pythons, platform_names) for row in root.rows("exclude"))

    if "e2e-platforms" in root:
        e2e = root.strings("e2e-platforms", single=False, required=True)
        for i, name in enumerate(e2e):
            if name not in platform_names:
                raise root.fail(
                    f"matrix.e2e-platforms[{i}]", f"{name!r} is not one of platforms = {platform_names}"
                )
    else:
        e2e = tuple(p.name for p in platforms if p.gpu_runner) or (default_platform,)

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
    entry: Table, trains: Sequence[str], pythons: Sequence[str], platforms: Sequence[str]
) -> Exclusion:
    if not entry.data:
        raise entry.fail(entry.key, "must be a table such as { train = 'cu126', platform = 'linux-aarch64' }")
    entry.unknown({"train", "python", "platform"})
    train = entry.get("train")
    if train is not None:
        train = train_info(str(train)).tag
        if train not in trains:
            raise entry.wrong("train", f"one of trains = {list(trains)}", train, show=True)
    return Exclusion(
        train,
        entry.string("python", choices=pythons),
        entry.string("platform", choices=platforms),
    )


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
    try:
        data = read_json(path, error=UsageError)
    except UsageError as e:
        message = e.message.replace("invalid JSON", "build matrix is not JSON", 1)
        raise UsageError(message, path=str(path)) from None
    if not isinstance(data, dict):
        raise UsageError('build matrix must be an object with an "include" list', path=str(path))
    rows = Table(data, "", str(path), UsageError).rows("include", required=True, what="a list of build rows")
    for row in rows:
        for key in ("train", "python", "platform"):
            row.text(key)
        row.string("kind", "build", ("build",))
    return [dict(row.data) for row in rows]


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
