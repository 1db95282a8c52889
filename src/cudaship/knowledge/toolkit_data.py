"""The toolkit tables: CUDA train -> release, and friendly component names -> each source's names.

Data: ``data/toolkit_releases.toml`` and ``data/toolkit_components.toml``. Everything here is a pure lookup;
an unknown train, release or component is a :class:`KnowledgeError` (``UnknownTrainError`` for trains) whose
message lists what is known.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from typing import Any

from cudaship.errors import KnowledgeError, UnknownTrainError
from cudaship.knowledge import _data
from cudaship.knowledge.releases import refuse_unpublished
from cudaship.knowledge.trains import parse_train, require_known
from cudaship.once import once

RELEASES_FILE = "toolkit_releases.toml"
COMPONENTS_FILE = "toolkit_components.toml"


def _key(version: str) -> tuple[int, ...]:
    return tuple(int(part) for part in version.split("."))


@dataclass(frozen=True)
class SourceName:
    """What one source calls a component in some release: a name (and PyPI extra), or 'inside another'."""

    name: str | None  #: redist manifest key or PyPI project name; None when ``included_in`` is set
    extra: str | None = None  #: the ``cuda-toolkit`` metapackage extra (PyPI only)
    included_in: str | None = None  #: another component carries this one in that release
    note: str | None = None  #: what a user should know about this source's package in that release
    #: toolkit paths the component promises (``bin/nvcc``) that this source's package lacks in that release:
    #: ``toolkit install`` refuses it rather than assembling a toolkit that cannot do the component's job
    lacks: tuple[str, ...] = ()


@once
def trains() -> dict[str, str]:
    """Known trains (``"13.2"``) -> their default release (``"13.2.2"``), oldest first."""
    raw = _data.section(RELEASES_FILE, "trains")
    result: dict[str, str] = {}
    for train in raw:
        release = raw.text(train)
        if not release.startswith(f"{train}."):
            raise raw.wrong(train, f"a {train}.x release", release, show=True)
        result[train] = release
    return dict(sorted(result.items(), key=lambda item: _key(item[0])))


@once
def releases() -> dict[str, dict[str, Any]]:
    """Known exact releases -> their table (``notes``), oldest first."""
    raw = _data.section(RELEASES_FILE, "releases")
    out = {release: dict(info.data) for release, info in raw.tables()}
    for release in out:
        if not re.fullmatch(r"\d+\.\d+\.\d+", release):
            raise raw.fail(raw.dotted(release), "must be named by an exact release (13.2.2)")
    return dict(sorted(out.items(), key=lambda item: _key(item[0])))


@once
def not_installable() -> dict[str, str]:
    """Trains (``"11.2"``) and exact releases (``"11.4.1"``) NVIDIA publishes no usable redist manifest for ->
    why."""
    raw = _data.section(RELEASES_FILE, "not_installable")
    out = {key: raw.text(key, "why") for key in raw}
    for key in out:
        if not re.fullmatch(r"\d+\.\d+(\.\d+)?", key):
            raise raw.fail(raw.dotted(key), "must be named by a train (11.2) or a release (11.4.1)")
    return out


#: How messages name the toolkit tables.
TOOLKIT_DATA = "toolkit install"


def resolve_release(text: str, label: str = "TRAIN") -> str:
    """The exact release a user's ``13.2`` / ``cu132`` / ``13.2.2`` means.

    A train or release that cannot be installed is an UnknownTrainError (exit 4), worded as every command
    words a train it cannot serve (:func:`~cudaship.knowledge.trains.require_known`), with the reason when the
    data has one (a train NVIDIA's redist manifests cannot assemble)."""
    known = [parse_train(t) for t in trains()]
    try:
        train = parse_train(text)
    except KnowledgeError:
        require_known(text, known, TOOLKIT_DATA, label=label)
        raise
    refuse_unpublished(train, text, label)  # as every command refuses it, before this data's own reasons
    why = not_installable().get(train.full_version) or not_installable().get(train.version)
    if why is not None:
        shown = f"{label} {text.strip()!r}"
        raise UnknownTrainError(f"{shown}: CUDA {train.full_version} is not installable: {why}")
    require_known(text, known, TOOLKIT_DATA, label=label)
    if train.patch is None:
        return trains()[train.version]
    if train.full_version not in releases():
        same_line = [r for r in releases() if r.startswith(f"{train.version}.")]
        raise UnknownTrainError(
            f"{label} {text.strip()!r}: unknown CUDA release {train.full_version}; {TOOLKIT_DATA} knows "
            f"{', '.join(same_line)}"
        )
    return train.full_version


def release_notes(release: str, platform: str | None = None) -> str | None:
    """What ``toolkit install`` says about ``release``: its notes for every platform, then those for
    ``platform``'s OS (``linux-x86_64`` -> ``notes_linux``), if any."""
    info = releases().get(release, {})
    parts = [info.get("notes")]
    if platform is not None:
        parts.append(info.get(f"notes_{platform.split('-', 1)[0]}"))
    shown = [p for p in parts if isinstance(p, str)]
    return " ".join(shown) if shown else None


@once
def _components() -> dict[str, dict[str, Any]]:
    out = {}
    for name, info in _data.section(COMPONENTS_FILE, "components").tables():
        info.rows("redist", required=True)
        out[name] = dict(info.data)
    return out


@once
def component_sets() -> dict[str, tuple[str, ...]]:
    raw = _data.section(COMPONENTS_FILE, "sets")
    known = _components()
    result: dict[str, tuple[str, ...]] = {}
    for name in raw:
        result[name] = raw.strings(name, single=False)
        for i, member in enumerate(result[name]):
            if member not in known:
                raise raw.fail(raw.dotted(name) + f"[{i}]", f"{member!r} is not a component")
    return result


def component_names() -> tuple[str, ...]:
    return tuple(_components())


def component_description(name: str) -> str:
    return str(_components()[name].get("description", ""))


def expand_components(requested: list[str] | tuple[str, ...] | None) -> tuple[str, ...]:
    """Friendly names and set names (comma- or list-separated) -> component names, in a stable order."""
    if not requested:
        requested = ["default"]
    wanted: list[str] = []
    for item in requested:
        for word in (w.strip().lower() for w in item.split(",")):
            if not word:
                continue
            if word in component_sets():
                members: tuple[str, ...] = component_sets()[word]
            elif word in _components():
                members = (word,)
            else:
                raise KnowledgeError(
                    f"unknown component {word!r}; components: {', '.join(component_names())}; "
                    f"sets: {', '.join(component_sets())}"
                )
            wanted.extend(m for m in members if m not in wanted)
    order = component_names()
    return tuple(sorted(wanted, key=order.index))


def _in_range(entry: dict[str, Any], release: str) -> bool:
    since, until = entry.get("since"), entry.get("until")
    key = _key(release)
    if since is not None and key < _key(str(since)):
        return False
    return not (until is not None and key >= _key(str(until)))


def source_name(component: str, source: str, release: str) -> SourceName | None:
    """What ``source`` ("redist" or "pypi") calls ``component`` in ``release``; None if it has none."""
    info = _components().get(component)
    if info is None:
        raise KnowledgeError(f"unknown component {component!r}; components: {', '.join(component_names())}")
    entries = info.get(source, [])
    if not isinstance(entries, list):
        raise KnowledgeError(f"{COMPONENTS_FILE}: components.{component}.{source} must be a list")
    for entry in entries:
        if isinstance(entry, dict) and _in_range(entry, release):
            included = entry.get("included_in")
            if included is not None:
                return SourceName(None, None, str(included))
            note = entry.get("note")
            lacks = entry.get("lacks", [])
            if not isinstance(lacks, list) or not all(isinstance(p, str) for p in lacks):
                raise KnowledgeError(
                    f"{COMPONENTS_FILE}: components.{component}.{source}: lacks must be a list of paths"
                )
            return SourceName(
                str(entry["name"]),
                entry.get("extra"),
                None,
                None if note is None else str(note),
                tuple(lacks),
            )
    return None


def component_provides(component: str, windows: bool = False) -> tuple[str, ...]:
    """Toolkit paths an install of ``component`` must hold (``bin/nvcc``; ``bin/nvcc.exe`` for Windows)."""
    info = _components().get(component)
    if info is None:
        raise KnowledgeError(f"unknown component {component!r}; components: {', '.join(component_names())}")
    paths = info.get("provides", [])
    if not isinstance(paths, list) or not all(isinstance(p, str) for p in paths):
        raise KnowledgeError(f"{COMPONENTS_FILE}: components.{component}.provides must be a list of paths")
    return tuple(p + ".exe" if windows and p.startswith("bin/") else p for p in paths)


def component_for_pypi_project(project: str, release: str) -> str | None:
    """The friendly component whose PyPI project is ``project`` in ``release`` (normalized names)."""
    wanted = re.sub(r"[-_.]+", "-", project).lower()
    for component in component_names():
        found = source_name(component, "pypi", release)
        if found is not None and found.name is not None and found.name.lower() == wanted:
            return component
    return None
