"""Host packages (``data/hosts.toml``): distributions whose libraries extensions link against, possibly
without declaring them (the user installs the host first): which directories and library names are theirs.
"""

from __future__ import annotations

import fnmatch
import posixpath
from dataclasses import dataclass

from cudaship.knowledge import _data
from cudaship.once import once

_FILE = "hosts.toml"


@dataclass(frozen=True)
class Host:
    project: str  #: canonical distribution name
    module: str  #: what the user imports first
    directories: tuple[str, ...]  #: site-packages relative directories holding its libraries
    libraries: tuple[str, ...]  #: globs of its library file names
    source: str
    audited: tuple[str, ...] = ()  #: globs of the audited projects the row applies to (empty: any)

    def applies_to(self, project: str) -> bool:
        return not self.audited or any(fnmatch.fnmatchcase(project, g) for g in self.audited)

    def owns_library(self, name: str) -> bool:
        base = posixpath.basename(name)
        return any(fnmatch.fnmatchcase(base, g) for g in self.libraries)

    def owns_directory(self, directory: str) -> bool:
        """``directory`` (site-packages relative, normalised) is one of this host's library directories."""
        return directory in self.directories


@once
def hosts() -> tuple[Host, ...]:
    return tuple(
        Host(
            project=row.text("project"),
            module=row.text("module"),
            directories=row.strings("directories", single=False),
            libraries=row.strings("libraries", single=False),
            source=row.text("source"),
            audited=row.strings("audited", single=False),
        )
        for row in _data.document(_FILE).rows("hosts")
    )


def host_of_directory(directory: str, audited: str) -> Host | None:
    """The host whose library directory ``directory`` (site-packages relative) is, for a wheel of project
    ``audited`` (canonical name), or None."""
    for h in hosts():
        if h.applies_to(audited) and h.owns_directory(directory):
            return h
    return None


def host_of_library(name: str, audited: str) -> Host | None:
    """The host that installs a library named ``name``, for a wheel of project ``audited``, or None."""
    for h in hosts():
        if h.applies_to(audited) and h.owns_library(name):
            return h
    return None
