"""The NVIDIA wheels that ship each CUDA library file (``data/repair_providers.toml``), checked against the
wheels' real file lists per platform: which project, in which version range, for the wheels of which CUDA
major, installs which file where. Read by :mod:`cudaship.knowledge.repair` (what repair points a de-vendored
library at) and :mod:`cudaship.knowledge.providers` (the offline stand-in of those projects' files).
"""

from __future__ import annotations

from dataclasses import dataclass

from packaging.specifiers import InvalidSpecifier, SpecifierSet

from cudaship.knowledge import _data
from cudaship.knowledge.libraries import OS
from cudaship.once import once


@dataclass(frozen=True)
class ProviderRow:
    """One row of ``data/repair_providers.toml``: an NVIDIA project whose wheels ship one library file for
    the wheels of one CUDA major, checked against the real wheels' file lists per platform."""

    component: str
    cuda: int  #: the CUDA major of the wheel's train the row serves
    project: str
    range: str  #: "train" (>=<train>,<cuda+1>) or the specifier repair writes
    linux: str | None  #: the file's path in site-packages on Linux
    windows: str | None  #: the DLL's path in site-packages on Windows
    copies: SpecifierSet | None  #: the full versions a copy named by its full version may carry (Linux)
    checked: tuple[tuple[str, str], ...]  #: (platform, the version pip installs there), per claimed platform

    def path(self, os: OS) -> str | None:
        return self.linux if os == "linux" else self.windows

    def claims(self, os: OS, machine: str | None) -> bool:
        """Whether the row was checked for ``os`` on ``machine`` (any machine of ``os`` when None)."""
        if self.path(os) is None:
            return False
        if machine is None:
            return any(p.startswith(os + "-") for p, _ in self.checked)
        return any(p == f"{os}-{machine}" for p, _ in self.checked)


_FILE = "repair_providers.toml"


@once
def provider_rows() -> tuple[ProviderRow, ...]:
    """Every row of ``data/repair_providers.toml``."""
    out: list[ProviderRow] = []
    for row in _data.document(_FILE).rows("provider"):
        copies = row.string("copies")
        checked = row.table("checked", "a table of platform = version")
        try:
            spec = SpecifierSet(copies) if copies else None
            rng = row.text("range", '"train" or a version specifier')
            if rng != "train":
                SpecifierSet(rng)
        except InvalidSpecifier as e:
            raise row.fail(row.dotted("range"), f"is not a version specifier: {e}") from e
        out.append(
            ProviderRow(
                component=row.text("component"),
                cuda=row.number("cuda", "a CUDA major"),
                project=row.text("project"),
                range=rng,
                linux=row.string("linux"),
                windows=row.string("windows"),
                copies=spec,
                checked=tuple(sorted((str(k), str(v)) for k, v in checked.data.items())),
            )
        )
    return tuple(out)


def files_of(project: str, os: OS) -> tuple[str, ...]:
    """Every path a row says ``project`` installs on ``os``."""
    return tuple(sorted({p for r in provider_rows() if r.project == project and (p := r.path(os))}))
