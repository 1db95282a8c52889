"""Minimum versions between NVIDIA's CUDA component wheels (``data/component_minimums.toml``).

* :func:`cuda_minor` — the CUDA minor a component wheel's version belongs to (``nvidia-cusparse-cu12``
  12.5.8.93 → ``12.8``), from the first version of each component in each release.
* :func:`violations` — the rules that installed versions break: a component whose required sibling is from an
  older CUDA minor than its own.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass

from packaging.utils import canonicalize_name
from packaging.version import InvalidVersion, Version

from cudaship.knowledge import _data
from cudaship.once import once

_FILE = "component_minimums.toml"


@dataclass(frozen=True)
class Rule:
    component: str  #: canonical project name: ``nvidia-cusparse-cu12``
    needs: str  #: ``nvidia-nvjitlink-cu12``
    source: str


@dataclass(frozen=True)
class Violation:
    """``component`` (version, CUDA minor) needs ``needs`` of its CUDA minor or newer; the installed one is
    older."""

    rule: Rule
    component_version: str
    component_cuda: str
    needs_version: str
    needs_cuda: str
    minimum: str  #: the first ``needs`` version of the component's CUDA minor


def _minor_key(minor: str) -> tuple[int, int]:
    major, _, rest = minor.partition(".")
    return int(major), int(rest)


@once
def _firsts() -> dict[str, list[tuple[Version, str]]]:
    """Project → [(first version, CUDA minor)], oldest first."""
    out: dict[str, list[tuple[Version, str]]] = {}
    for minor, row in _data.section(_FILE, "releases").tables():
        for project in row:
            version = row.get(project)
            try:
                out.setdefault(canonicalize_name(project), []).append((Version(str(version)), minor))
            except InvalidVersion:
                raise row.wrong(project, "a version", version, show=True) from None
    for rows in out.values():
        rows.sort()
    return out


@once
def rules() -> tuple[Rule, ...]:
    out = []
    for row in _data.document(_FILE).rows("rules"):
        component, needs = canonicalize_name(row.text("component")), canonicalize_name(row.text("needs"))
        if component not in _firsts() or needs not in _firsts():
            raise row.fail(row.key, "names a project no release lists")
        out.append(Rule(component, needs, row.text("source")))
    return tuple(out)


def cuda_minor(project: str, version: str) -> str | None:
    """The CUDA minor of ``project`` at ``version`` (None: an unknown component, or older than any
    release)."""
    rows = _firsts().get(canonicalize_name(project))
    if not rows:
        return None
    try:
        v = Version(version)
    except InvalidVersion:
        return None
    found = None
    for first, minor in rows:
        if v >= first:
            found = minor
    return found


def first_version(project: str, minor: str) -> str | None:
    """The version of ``project`` in the first release of CUDA ``minor``."""
    for first, m in _firsts().get(canonicalize_name(project), ()):
        if m == minor:
            return str(first)
    return None


def violations(installed: Mapping[str, str]) -> list[Violation]:
    """The rules broken by ``installed`` (canonical project name → version)."""
    versions: dict[str, str] = {canonicalize_name(k): v for k, v in installed.items()}
    out = []
    for rule in rules():
        have, need = versions.get(rule.component), versions.get(rule.needs)
        if have is None or need is None:
            continue
        have_cuda, need_cuda = cuda_minor(rule.component, have), cuda_minor(rule.needs, need)
        if have_cuda is None or need_cuda is None:
            continue
        if _minor_key(need_cuda) < _minor_key(have_cuda):
            minimum = first_version(rule.needs, have_cuda) or have_cuda
            out.append(Violation(rule, have, have_cuda, need, need_cuda, minimum))
    return out
