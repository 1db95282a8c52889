"""Choosing a distribution file for a target platform: wheel tags and versions, with ``packaging``."""

from __future__ import annotations

import datetime as dt
from collections.abc import Iterable
from dataclasses import dataclass

from packaging.specifiers import SpecifierSet
from packaging.tags import Tag
from packaging.utils import InvalidWheelFilename, parse_wheel_filename
from packaging.version import InvalidVersion, Version

from cudaship.knowledge.platforms import platform_from_tag
from cudaship.providers.records import Target


def _python_ok(tag: Tag, target: Target) -> bool:
    major, _, minor = target.python.partition(".")
    interp, abi = tag.interpreter, tag.abi
    if interp.startswith("py"):
        digits = interp[2:]
        return digits in (major, major + minor) and abi in ("none", "abi3")
    if interp.startswith("cp") and interp[2:].isdigit():
        digits = interp[2:]
        if digits == major + minor:
            return abi in ("none", "abi3") or abi.startswith(f"cp{digits}")
        if abi == "abi3" and digits[:1] == major:
            return int(digits[1:] or 0) <= int(minor or 0)
    return False


def _platform_ok(tag: Tag, target: Target) -> bool:
    if tag.platform == "any":
        return True
    plat = platform_from_tag(tag.platform)
    if plat.os != target.os:
        return False
    if tag.platform.startswith("musllinux"):
        return False  # the audited wheels are glibc (manylinux) wheels
    if target.os == "macos" and plat.machine is None:
        return True  # universal2
    return plat.machine == target.machine or target.machine is None


def wheel_fits(filename: str, target: Target) -> bool:
    """True when a wheel file installs on ``target`` (any of its tags)."""
    try:
        _name, _version, _build, tags = parse_wheel_filename(filename)
    except (InvalidWheelFilename, InvalidVersion):
        return False
    return any(_python_ok(t, target) and _platform_ok(t, target) for t in tags)


def wheel_version(filename: str) -> Version | None:
    try:
        return parse_wheel_filename(filename)[1]
    except (InvalidWheelFilename, InvalidVersion):
        return None


@dataclass(frozen=True)
class Candidate:
    """A wheel file of a project: its version and whatever the source needs to read it."""

    filename: str
    version: Version
    location: str  #: a URL or a path
    size: int | None = None
    sha256: str | None = None
    metadata_url: str | None = None  #: PEP 658: the METADATA served next to the file
    metadata_sha256: str | None = None
    upload_time: dt.datetime | None = None  #: PEP 700 ``upload-time``; None: the index gives none
    yanked: bool = False  #: PEP 592: taken only when a specifier pins its version exactly


def pins_exactly(spec: SpecifierSet) -> bool:
    """True when ``spec`` pins one version (``==1.2.3``, ``===1.2.3``, not ``==1.2.*``): the one case where a
    yanked file is taken (PEP 592), so that a pinned replay still finds a version yanked since."""
    return any(s.operator == "===" or (s.operator == "==" and not s.version.endswith(".*")) for s in spec)


def _names_pre_release(text: str) -> bool:
    """True when a specifier's version (``7.0rc1``, ``13.1.*``) is itself a pre-release."""
    try:
        return Version(text.rstrip(".*")).is_prerelease
    except InvalidVersion:
        return False


def best(candidates: Iterable[Candidate], spec: SpecifierSet, target: Target) -> Candidate | None:
    """The newest candidate that fits ``target`` and satisfies ``spec`` (pre-releases only when the specifier
    names one or nothing else matches, as pip does)."""
    fitting = [c for c in candidates if wheel_fits(c.filename, target)]
    matching = [c for c in fitting if spec.contains(c.version, prereleases=True)]
    explicit = any(_names_pre_release(s.version) for s in spec)
    allowed = matching if explicit else [c for c in matching if not c.version.is_prerelease]
    if not allowed:  # only pre-releases fit: pip takes them too
        allowed = matching
    if not allowed:
        return None
    return max(allowed, key=lambda c: (c.version, c.filename))
