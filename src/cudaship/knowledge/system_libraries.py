"""Which imports the operating system, the Python interpreter or the NVIDIA driver provide.

Data: ``data/system_libraries.toml`` (its sources are in the file); the driver's libraries come from
:mod:`cudaship.knowledge.libraries`. Names are matched case-insensitively as globs; Mach-O install names match
on the full path, others on the base name.
"""

from __future__ import annotations

import fnmatch
import re
from dataclasses import dataclass
from enum import Enum

from cudaship.knowledge import _data, libraries
from cudaship.knowledge.platforms import os_names
from cudaship.once import once
from cudaship.words import count

_FILE = "system_libraries.toml"


class Provider(str, Enum):
    SYSTEM = "system"
    PYTHON = "python"
    DRIVER = "driver"


@once
def _tables() -> tuple[dict[str, tuple[str, ...]], tuple[str, ...]]:
    """(system library names per platform, the interpreter's library names: the same on every platform)."""

    def names(table: str) -> tuple[str, ...]:
        return tuple(
            v.lower() for v in _data.section(_FILE, table).strings("libraries", single=False, required=True)
        )

    return {platform: names(platform) for platform in os_names()}, names("python")


def system_library_patterns(platform: str) -> tuple[str, ...]:
    """The documented default list of system libraries for ``platform`` (linux, windows, macos)."""
    if platform not in os_names():
        return ()
    return _tables()[0][platform]


def _matches(patterns: tuple[str, ...], name: str) -> bool:
    lowered = name.lower()
    base = lowered.replace("\\", "/").rsplit("/", 1)[-1]
    for pattern in patterns:
        subject = lowered if "/" in pattern else base
        if fnmatch.fnmatchcase(subject, pattern):
            return True
    return False


def provider_of(name: str, platform: str, extra_system: tuple[str, ...] = ()) -> Provider | None:
    """Who provides the library ``name`` on ``platform`` without the wheel: the driver, Python or the OS."""
    if platform not in os_names():
        return None
    system, python = _tables()
    if libraries.is_driver(name):
        return Provider.DRIVER
    if _matches(python, name):
        return Provider.PYTHON
    if _matches(system[platform] + tuple(p.lower() for p in extra_system), name):
        return Provider.SYSTEM
    return None


_DISTRIBUTION_FILE = "distribution_libraries.toml"


@dataclass(frozen=True)
class DistributionLibrary:
    """A library outside the manylinux policy that Linux distributions package
    (data/distribution_libraries.toml)."""

    soname: str
    debian: str  #: the Debian/Ubuntu package that installs it
    rhel: str  #: the RHEL/Fedora package that installs it
    default: bool  #: installed wherever a CUDA wheel runs as a matter of course
    why: str

    @property
    def packages(self) -> str:
        return f"{self.debian} (Debian/Ubuntu) / {self.rhel} (RHEL/Fedora)"


@once
def _distribution() -> dict[str, DistributionLibrary]:
    out: dict[str, DistributionLibrary] = {}
    for e in _data.document(_DISTRIBUTION_FILE).rows("library", required=True):
        e.require("default", "true or false")
        soname, debian, rhel, why = (e.text(k) for k in ("soname", "debian", "rhel", "why"))
        lib = DistributionLibrary(soname, debian, rhel, e.boolean("default", False), why)
        out[lib.soname.lower()] = lib
    return out


def distribution_library(name: str) -> DistributionLibrary | None:
    """The distribution library ``name`` (an ELF SONAME as imported), if the table lists it."""
    return _distribution().get(name.replace("\\", "/").rsplit("/", 1)[-1].lower())


def distribution_stems() -> frozenset[str]:
    """The stems (``libheif``) of the distribution libraries the table lists: the same library on another
    platform (``libheif.1.dylib`` from Homebrew) has the stem of its Linux SONAME."""
    return frozenset(soname.split(".", 1)[0] for soname in _distribution())


_POLICY_FILE = "linux_policies.toml"


@dataclass(frozen=True)
class LinuxPolicy:
    """The policy a Linux platform tag claims (data/linux_policies.toml): its name and the libraries it lets a
    wheel import without shipping them."""

    name: str  #: ``manylinux_2_28``, ``manylinux2014``, ``musllinux_1_2``
    allowed: frozenset[str]

    def allows(self, soname: str) -> bool:
        return soname.replace("\\", "/").rsplit("/", 1)[-1] in self.allowed


@once
def _policies() -> dict[str, tuple[tuple[tuple[int, ...], tuple[str, ...], frozenset[str]], ...]]:
    out: dict[str, tuple[tuple[tuple[int, ...], tuple[str, ...], frozenset[str]], ...]] = {}
    for family in ("manylinux", "musllinux"):
        rows = []
        for row in _data.document(_POLICY_FILE).rows(family, required=True):
            since = tuple(int(x) for x in row.text("from").split("."))
            aliases = row.strings("aliases", single=False)
            rows.append((since, aliases, frozenset(row.strings("libraries", single=False))))
        out[family] = tuple(sorted(rows))
    return out


_POLICY_TAG = re.compile(r"^(manylinux|musllinux)_(\d+)_(\d+)_|^(manylinux\d+)_")


def linux_policy(platform_tag: str) -> LinuxPolicy | None:
    """The policy a platform tag claims (``manylinux_2_28_x86_64``, ``manylinux2014_x86_64``,
    ``musllinux_1_2_aarch64``); None for a tag that claims none (``linux_x86_64``, any other OS)."""
    match = _POLICY_TAG.match(platform_tag.lower())
    if match is None:
        return None
    tables = _policies()
    if match.group(4):  # a legacy alias
        for _since, aliases, allowed in tables["manylinux"]:
            if match.group(4) in aliases:
                return LinuxPolicy(match.group(4), allowed)
        return None
    family, version = match.group(1), (int(match.group(2)), int(match.group(3)))
    rows = [allowed for since, _aliases, allowed in tables[family] if since <= version]
    if not rows:
        return None
    return LinuxPolicy(f"{family}_{version[0]}_{version[1]}", rows[-1])


@dataclass(frozen=True)
class LibraryFamily:
    """Libraries a distribution ships together, one soname major per release of the project
    (data/distribution_libraries.toml ``[[family]]``: FFmpeg's libavcodec, libavformat, ...)."""

    name: str  #: ``FFmpeg``
    debian: str
    rhel: str
    macos: str
    libraries: tuple[str, ...]  #: ``libavutil``, ``libavcodec``, ...
    #: (release, the soname major of each library in :attr:`libraries` order)
    releases: tuple[tuple[str, tuple[int, ...]], ...]

    @property
    def packages(self) -> str:
        return f"{self.debian} (Debian/Ubuntu) / {self.rhel} (RHEL/Fedora) / {self.macos} (macOS)"

    def releases_of(self, library: str, major: int) -> tuple[str, ...]:
        """The releases whose ``library`` has soname major ``major`` (libswresample 4: FFmpeg 5 and 6)."""
        i = self.libraries.index(library)
        return tuple(release for release, majors in self.releases if majors[i] == major)


@once
def _families() -> dict[str, LibraryFamily]:
    """Library stem (``libavcodec``) -> its family."""
    out: dict[str, LibraryFamily] = {}
    for e in _data.document(_DISTRIBUTION_FILE).rows("family"):
        libraries = e.strings("libraries", single=False, required=True)
        releases = []
        for i, row in enumerate(e.require("releases", "a list of [release, majors...]")):
            if (
                not isinstance(row, list)
                or len(row) != len(libraries) + 1
                or not all(isinstance(m, int) for m in row[1:])
            ):
                raise e.fail(
                    f"releases[{i}]",
                    f"must be [release, then a SONAME major for each of {count(len(libraries), 'library')}]",
                )
            releases.append((str(row[0]), tuple(row[1:])))
        family = LibraryFamily(
            e.text("name"), e.text("debian"), e.text("rhel"), e.text("macos"), libraries, tuple(releases)
        )
        out.update((lib.lower(), family) for lib in libraries)
    return out


#: ``libavcodec.so.61`` (ELF), ``libavcodec.61.dylib`` (Mach-O), ``avcodec-61.dll`` (PE): (stem, major)
_FAMILY_NAME = re.compile(
    r"^(?:(?P<elf>lib[\w+-]+)\.so\.(?P<elf_major>\d+)(?:\.\d+)*"
    r"|(?P<macho>lib[\w+-]+)\.(?P<macho_major>\d+)(?:\.\d+)*\.dylib"
    r"|(?P<pe>[\w+]+)-(?P<pe_major>\d+)\.dll)$",
    re.IGNORECASE,
)


def family_member(name: str) -> tuple[LibraryFamily, str, int] | None:
    """(the family, the library's stem as the table names it, the soname major) of an import that belongs to
    a library family (``libavcodec.so.61``, ``@rpath/libavcodec.61.dylib``, ``avcodec-61.dll``); None
    otherwise."""
    m = _FAMILY_NAME.match(name.replace("\\", "/").rsplit("/", 1)[-1])
    if m is None:
        return None
    if m.group("elf"):
        stem, major = m.group("elf"), m.group("elf_major")
    elif m.group("macho"):
        stem, major = m.group("macho"), m.group("macho_major")
    else:
        stem, major = f"lib{m.group('pe')}", m.group("pe_major")
    family = _families().get(stem.lower())
    if family is None:
        return None
    own = next(lib for lib in family.libraries if lib.lower() == stem.lower())
    return family, own, int(major)
