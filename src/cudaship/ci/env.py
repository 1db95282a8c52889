"""The build environment of one matrix row, and writing it where a later step reads it.

``cudaship env --train cu132`` computes the variables from the train (never from what the environment already
holds) and writes them to ``$GITHUB_ENV`` and/or a file a later step sources, so the list a build consumes is
the row's list even when a reusable workflow passes its own. ``check_env`` compares a live environment with
the row's values: the guard against a list that was silently replaced.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass

from cudaship import envvars
from cudaship.ci.archs import arch_table, host_machine, lookup, normalize_machine, syntaxes, train_info
from cudaship.config import ProjectConfig
from cudaship.errors import KnowledgeError
from cudaship.knowledge.archs import ArchList, parse_arch_list

#: The variables, in the order they are written.
VARIABLES: tuple[str, ...] = (
    "CUDASHIP_TRAIN",
    "CUDASHIP_CUDA_VERSION",
    "CUDASHIP_MACHINE",
    "CUDASHIP_ARCH_LIST",
    "TORCH_CUDA_ARCH_LIST",
    "CMAKE_CUDA_ARCHITECTURES",
)

#: The variables a build consumes and a reusable workflow might replace: what ``check_env`` compares.
GUARDED: tuple[str, ...] = ("TORCH_CUDA_ARCH_LIST", "CMAKE_CUDA_ARCHITECTURES")


@dataclass(frozen=True)
class BuildEnv:
    train: str
    cuda: str
    machine: str
    values: tuple[tuple[str, str], ...]  #: (name, value) in VARIABLES order
    archs: ArchList  #: the row's arch list, for comparing lists written differently

    def as_dict(self) -> dict[str, str]:
        return dict(self.values)


def build_env(config: ProjectConfig, train: str, machine: str | None = None) -> BuildEnv:
    """The row's variables; UnknownTrainError (exit 4) when the train or its arch list is unknown."""
    info = train_info(train)
    arch_machine = normalize_machine(machine) if machine else host_machine()
    archlist = lookup(arch_table(config), info.tag, arch_machine)
    lists = syntaxes(archlist)
    values = (
        ("CUDASHIP_TRAIN", info.tag),
        ("CUDASHIP_CUDA_VERSION", info.version),
        ("CUDASHIP_MACHINE", arch_machine),
        ("CUDASHIP_ARCH_LIST", lists.list),
        ("TORCH_CUDA_ARCH_LIST", lists.torch),
        ("CMAKE_CUDA_ARCHITECTURES", lists.cmake),
    )
    return BuildEnv(info.tag, info.version, arch_machine, values, archlist)


# ------------------------------------------------------------------------------------------------ the guard


@dataclass(frozen=True)
class EnvMismatch:
    name: str
    expected: str
    found: str | None


#: The build system each guarded variable is for: a build reads its own, so each is enough for its own build.
BUILD_SYSTEM = {"TORCH_CUDA_ARCH_LIST": "torch builds", "CMAKE_CUDA_ARCHITECTURES": "CMake builds"}


@dataclass(frozen=True)
class EnvCheck:
    """What ``env --check`` found: the guarded variables that are set (``checked``, each compared with the
    row's list), those not set (``unset``: not this build's system, so not compared) and the mismatches."""

    checked: tuple[str, ...]
    unset: tuple[str, ...]
    mismatches: tuple[EnvMismatch, ...]

    @property
    def ok(self) -> bool:
        """At least one build system's variable is set, and every one set is the row's list."""
        return bool(self.checked) and not self.mismatches


def check_env(env: BuildEnv, environ: Mapping[str, str] | None = None) -> EnvCheck:
    """Each guarded variable that ``environ`` sets, compared with the row's list; an unset one is not a
    mismatch (a torch-only build sets only ``TORCH_CUDA_ARCH_LIST``), but none set at all fails the check.

    Lists are compared parsed, so ``8.0 8.6`` and ``8.0;8.6`` are the same list; an unparsable value differs.
    """
    expected = env.as_dict()
    checked, unset, mismatches = [], [], []
    for name in GUARDED:
        found = envvars.get(name, environ)
        if found is None:
            unset.append(name)
            continue
        checked.append(name)
        if not _same_list(found, env.archs, _SYNTAX[name]):
            mismatches.append(EnvMismatch(name, expected[name], found))
    return EnvCheck(tuple(checked), tuple(unset), tuple(mismatches))


_SYNTAX = {"TORCH_CUDA_ARCH_LIST": "torch", "CMAKE_CUDA_ARCHITECTURES": "cmake"}


def _same_list(text: str, expected: ArchList, syntax: str) -> bool:
    try:
        return parse_arch_list(text, syntax) == expected
    except KnowledgeError:
        return False
