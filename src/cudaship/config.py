"""Finding the project's cudaship configuration.

Order: an explicit file (``--policy FILE``: a ``cudaship.toml`` or a ``pyproject.toml``), else
``[tool.cudaship]`` of ``pyproject.toml`` in the start directory or its parents, else ``cudaship.toml`` there.
In a ``cudaship.toml`` the tables sit at top level (``[archs]``, ``[matrix]``); in a pyproject.toml under
``[tool.cudaship]``.
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path
from typing import Any

from cudaship import loaders
from cudaship.errors import PolicyError
from cudaship.schema import Table


@dataclass(frozen=True)
class ProjectConfig:
    """The ``[tool.cudaship]`` table (or a cudaship.toml's top level) and where it came from."""

    data: dict[str, Any]
    source: Path | None  #: None when no configuration was found

    def table(self, key: str) -> dict[str, Any]:
        """The table ``key`` (``archs``, ``audit``, ``matrix``); ``{}`` when absent."""
        table = Table(self.data, "", str(self.source) if self.source else None, PolicyError).sub(key)
        return dict(table.data) if table is not None else {}


def read_toml(path: Path) -> dict[str, Any]:
    """Parse a TOML file, turning every failure into a one-line PolicyError naming the file: a FIFO or
    device is refused unread, a file over 16 MiB or nested over 64 levels is refused (see
    :mod:`cudaship.loaders`)."""
    return loaders.read_toml(path, error=PolicyError)


#: The tables a configuration may hold at its top level (a ``cudaship.toml``, or ``[tool.cudaship]``).
KNOWN_TABLES = ("archs", "audit", "matrix", "resolution")


def _from_file(path: Path) -> ProjectConfig:
    """The file's configuration; a top-level key that is none of :data:`KNOWN_TABLES` is refused: a typo
    (``[audti.ships]``) would otherwise be ignored and the defaults run."""
    data = read_toml(path)
    root = Table(data, "", str(path), PolicyError)
    if path.name == "pyproject.toml":
        tool = data.get("tool", {})
        section = tool.get("cudaship") if isinstance(tool, dict) else None
        root = Table.of({} if section is None else section, "tool.cudaship", str(path), PolicyError)
    root.unknown(KNOWN_TABLES, what="table")
    return ProjectConfig(dict(root.data), path)


def load_config(explicit: str | Path | None = None, start: Path | None = None) -> ProjectConfig:
    """Load the configuration: ``explicit`` if given, else search from ``start`` (default: cwd) upwards."""
    if explicit is not None:
        return _from_file(Path(explicit))
    here = (start or Path.cwd()).resolve()
    for directory in (here, *here.parents):
        pyproject = directory / "pyproject.toml"
        if pyproject.exists():  # a FIFO or device named so is refused by read_toml, not skipped
            config = _from_file(pyproject)
            if config.data:
                return config
        standalone = directory / "cudaship.toml"
        if standalone.exists():
            return _from_file(standalone)
    return ProjectConfig({}, None)
