"""The arch table: which GPUs a release of each CUDA train builds for, per host machine.

A project writes it under the ``archs`` key of its configuration (``[tool.cudaship.archs]`` in pyproject.toml,
``[archs]`` in cudaship.toml)::

    [archs.cu132]
    x86_64 = "8.0 8.6 8.9 9.0 10.0 12.0"          # an arch list in any syntax cudaship reads
    aarch64 = ["8.0", "9.0", "10.0", "11.0", "12.0"]   # or a list of arch names

``audit``, ``arch-list``, ``matrix``, ``env`` and ``cmake`` all read it through :class:`ArchTable`. Looked up,
a row is every arch as SASS with the newest also as PTX. Without an ``archs`` table the built-in one
(data/arch_tables.toml, the release contract's lists) applies: :func:`default_arch_table` (a configuration
is read into a table by :func:`cudaship.ci.archs.arch_table`).
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from cudaship.errors import KnowledgeError, PolicyError, UnknownTrainError
from cudaship.knowledge import _data
from cudaship.knowledge.archs import ArchList, parse_arch, parse_arch_list
from cudaship.knowledge.platforms import normalize_machine
from cudaship.knowledge.trains import Train, as_train, parse_train
from cudaship.once import once
from cudaship.schema import Table


def _row(table: Table, machine_key: str, train: Train) -> ArchList:
    value = table.get(machine_key)
    try:
        if isinstance(value, str):
            parsed = parse_arch_list(value, train=train)
        elif isinstance(value, list) and value and all(isinstance(v, (str, int, float)) for v in value):
            # Numbers in TOML lists: 8.0 → "8.0"; 90 → "90".
            parsed = ArchList.of(parse_arch(str(v), known_only=True) for v in value)
        else:
            raise table.wrong(machine_key, "an arch list string or a non-empty list of arch names", value)
    except KnowledgeError as e:
        raise table.fail(table.dotted(machine_key), e.message) from e
    return parsed.with_newest_ptx()


#: :attr:`ArchTable.source` of the built-in table.
BUILTIN_SOURCE = "the built-in arch table"


@dataclass(frozen=True)
class ArchTable:
    """Train → machine → arch list. Build it with :meth:`from_mapping`; read it with :meth:`lookup`."""

    rows: Mapping[Train, Mapping[str, ArchList]]
    source: str  #: where it came from, for messages ("pyproject.toml", "the built-in arch table")

    @classmethod
    def from_mapping(cls, mapping: Mapping[str, Any], source: str) -> ArchTable:
        """Validate a ``{"cu132": {"x86_64": "8.0 ...", "aarch64": [...]}}`` table.

        Train keys are ``cuXY`` or ``X.Y``; machine keys as :func:`normalize_machine` accepts. Every problem
        is a :class:`~cudaship.errors.PolicyError` naming ``source`` and the key (``archs.cu132.x86_64``).
        """
        root = Table.of(mapping, "archs", source, PolicyError)
        if not mapping:
            raise root.fail("archs", "must be a non-empty table of trains (archs.cu132.x86_64 = ...)")
        rows: dict[Train, dict[str, ArchList]] = {}
        for train_key, machines in root.tables("a table of machines (x86_64 = ..., aarch64 = ...)"):
            try:
                train = parse_train(train_key).line
            except KnowledgeError as e:
                raise root.fail(machines.key, e.message) from e
            if train in rows:
                raise root.fail(machines.key, f"train {train.tag} given twice")
            if not machines.data:
                raise root.fail(machines.key, "must be a non-empty table of machines (x86_64 = ...)")
            row: dict[str, ArchList] = {}
            for machine_key in machines:
                try:
                    machine = normalize_machine(machine_key)
                except KnowledgeError as e:
                    raise machines.fail(machines.dotted(machine_key), e.message) from e
                if machine in row:
                    raise machines.fail(machines.dotted(machine_key), f"machine {machine} given twice")
                row[machine] = _row(machines, machine_key, train)
            rows[train] = row
        return cls(rows=dict(sorted(rows.items())), source=source)

    def trains(self) -> tuple[Train, ...]:
        """The trains the table knows, oldest first."""
        return tuple(self.rows)

    def machines(self, train: Train | str) -> tuple[str, ...]:
        return tuple(self._train_row(train)[1])

    def _train_row(self, train: Train | str) -> tuple[Train, Mapping[str, ArchList]]:
        wanted = as_train(train).line
        row = self.rows.get(wanted)
        if row is None:
            known = ", ".join(t.tag for t in self.rows)
            raise UnknownTrainError(
                f"no arch list for CUDA train {wanted.tag} in {self.source} (known: {known})"
            )
        return wanted, row

    def lookup(self, train: Train | str, machine: str) -> ArchList:
        """The arch list of ``train`` on ``machine``: every arch SASS, the newest also PTX.

        An unknown train raises :class:`~cudaship.errors.UnknownTrainError` naming the known ones (never an
        empty list); a machine the train's row lacks raises KnowledgeError naming the ones it has.
        """
        wanted, row = self._train_row(train)
        key = normalize_machine(machine)
        if key not in row:
            raise KnowledgeError(
                f"no arch list for {key} under CUDA train {wanted.tag} in {self.source} "
                f"(has: {', '.join(row)})"
            )
        return row[key]


@once
def default_arch_table() -> ArchTable:
    """The built-in table of data/arch_tables.toml: a default row for every train from 11.4 to 13.5 (the
    release contract's lists where it has them, else what PyTorch ships, each inside its release's SMs)."""
    return ArchTable.from_mapping(_data.table("arch_tables.toml", "archs"), BUILTIN_SOURCE)
