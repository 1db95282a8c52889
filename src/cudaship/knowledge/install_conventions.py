"""Install-time conventions (``data/install_conventions.toml``): files a wheel does not hold that a real ``pip
install`` of it makes through a documented runtime it requires (wheel-axle-runtime's symbolic links, listed
in ``.dist-info/symlinks.txt``). The one reader of the listing file is
:func:`cudaship.wheel.metadata.parse_symlinks`; this table says which file it is, who makes the links, when,
and the source."""

from __future__ import annotations

from dataclasses import dataclass

from cudaship.knowledge import _data
from cudaship.once import once

_FILE = "install_conventions.toml"


@dataclass(frozen=True)
class LinkConvention:
    name: str
    runtime: str  #: canonical name of the distribution whose code makes the links
    file: str  #: the listing file's name in the ``.dist-info`` directory
    format: str
    when: str
    source: str


@once
def link_conventions() -> tuple[LinkConvention, ...]:
    return tuple(
        LinkConvention(
            name=row.text("name"),
            runtime=row.text("runtime"),
            file=row.text("file"),
            format=row.text("format"),
            when=row.text("when"),
            source=row.text("source"),
        )
        for row in _data.document(_FILE).rows("links")
    )


def link_convention(file: str) -> LinkConvention | None:
    """The convention whose listing file is ``file`` (``symlinks.txt``), or None."""
    return next((c for c in link_conventions() if c.file == file), None)
