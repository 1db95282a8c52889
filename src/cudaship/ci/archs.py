"""The one place the CI layer touches the knowledge base: trains, the arch table and arch-list syntaxes.

``matrix``, ``env`` and ``cmake`` all look up a row's arch list here, from the same arch table ``audit`` uses
(the ``archs`` key of the configuration, else the built-in table).
"""

from __future__ import annotations

import platform as _platform
from dataclasses import dataclass

from cudaship.ci.records import ArchSyntaxes
from cudaship.config import ProjectConfig
from cudaship.errors import KnowledgeError
from cudaship.knowledge.arch_table import ArchTable, default_arch_table
from cudaship.knowledge.archs import ArchList, format_arch_list
from cudaship.knowledge.platforms import normalize_machine as normalize_machine
from cudaship.knowledge.trains import parse_train


def host_machine() -> str:
    """This machine, as the arch table names machines (x86_64 or aarch64)."""
    return normalize_machine(_platform.machine() or "x86_64")


@dataclass(frozen=True)
class TrainInfo:
    tag: str  #: ``cu132``
    version: str  #: ``13.2``
    key: tuple[int, ...]  #: for ordering: (13, 2)


def train_info(text: str) -> TrainInfo:
    """Parse ``cu132`` or ``13.2``; a malformed train is a KnowledgeError (whether the data knows the train
    is the arch table's question: :func:`lookup`)."""
    train = parse_train(text)
    return TrainInfo(train.tag, train.version, (train.major, train.minor))


@dataclass(frozen=True)
class TrainArchs:
    """``arch-list``'s answer: a train's arch list on a machine, and the table it came from."""

    train: str  #: ``cu132``
    cuda: str  #: ``13.2``
    machine: str
    source: str  #: the table's source (a configuration file, or the built-in table)
    archs: ArchList


def arch_table(config: ProjectConfig) -> ArchTable:
    """The configuration's ``archs`` table when it has one, else the built-in one
    (:func:`~cudaship.knowledge.arch_table.default_arch_table`). Here, not in knowledge/: knowledge reads
    only its own data, never the user's configuration."""
    mapping = config.table("archs")
    if not mapping:
        return default_arch_table()
    source = str(config.source) if config.source else "configuration"
    return ArchTable.from_mapping(mapping, source)


def lookup(table: ArchTable, train: str, machine: str) -> ArchList:
    """The arch list of (train, machine); UnknownTrainError when the table has none."""
    return table.lookup(parse_train(train), machine)


def syntaxes(archlist: ArchList) -> ArchSyntaxes:
    return ArchSyntaxes(
        torch=format_arch_list(archlist, "torch"),
        cmake=format_arch_list(archlist, "cmake"),
        gencode=format_arch_list(archlist, "gencode"),
        list=format_arch_list(archlist, "list"),
    )


def try_syntaxes(table: ArchTable, train: str, machine: str) -> ArchSyntaxes | None:
    """The row's arch lists, or None when the arch table has no list for (train, machine)."""
    try:
        return syntaxes(lookup(table, train, machine))
    except KnowledgeError:  # UnknownTrainError included
        return None
