"""Loading the knowledge base's TOML data files (``cudaship/knowledge/data``), once per process."""

from __future__ import annotations

from importlib import resources
from typing import Any

from cudaship.errors import KnowledgeError
from cudaship.loaders import load_toml
from cudaship.once import once
from cudaship.schema import Table


@once
def load(name: str) -> dict[str, Any]:
    """Parse ``data/<name>`` (shipped with the package). A broken data file is a KnowledgeError naming it."""
    try:
        text = (
            resources.files("cudaship.knowledge").joinpath("data").joinpath(name).read_text(encoding="utf-8")
        )
    except (OSError, UnicodeDecodeError) as e:
        raise KnowledgeError(f"cannot read knowledge data file {name}: {e}") from e
    try:
        return load_toml(text, error=KnowledgeError)
    except KnowledgeError as e:
        raise KnowledgeError(f"cannot read knowledge data file {name}: {e.message}") from e


def document(name: str) -> Table:
    """Data file ``name`` as a :class:`~cudaship.schema.Table`: every problem is a KnowledgeError naming the
    file and the key path (``knowledge data file hosts.toml: hosts[0].module: is required``)."""
    return Table(load(name), "", f"knowledge data file {name}", KnowledgeError)


def section(name: str, key: str) -> Table:
    """The table ``[key]`` of data file ``name``; missing or not a table is a KnowledgeError."""
    return document(name).table(key)


def table(name: str, key: str) -> dict[str, Any]:
    """The table ``key`` of data file ``name`` as a dict; missing or not a table is a KnowledgeError."""
    return dict(section(name, key).data)
