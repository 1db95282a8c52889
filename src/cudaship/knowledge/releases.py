"""CUDA releases (data/releases.toml): PTX ISA, minimum drivers, supported SMs, 'a'/'f', compat floors.

Every fact lives in the data file; these functions only read and validate it. Look-ups by train raise
:class:`~cudaship.errors.UnknownTrainError` naming the known trains.
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass
from functools import lru_cache

from cudaship.errors import KnowledgeError, UnknownTrainError
from cudaship.knowledge import _data
from cudaship.knowledge.arch_names import Arch, ArchList, Target
from cudaship.knowledge.trains import Train, as_train, parse_train, require_known, train_list
from cudaship.once import once
from cudaship.records.binary import DeviceCode, DeviceCodeKind
from cudaship.schema import Table

DATA_FILE = "releases.toml"
#: How messages name this data (``--train cu99: unknown CUDA train 9.9; cudaship's release data knows ...``).
RELEASE_DATA = "cudaship's release data"


def isa_tuple(isa: str) -> tuple[int, int]:
    """``"9.2"`` → ``(9, 2)``; anything else is a KnowledgeError."""
    major, sep, minor = isa.strip().partition(".")
    if not (sep and major.isdigit() and minor.isdigit()):
        raise KnowledgeError(f"invalid PTX ISA version {isa!r}: expected X.Y")
    return int(major), int(minor)


@dataclass(frozen=True)
class Release:
    """One CUDA release line (``13.2``) as the data describes it."""

    train: Train
    ptx_isa: str  #: PTX ISA version its compiler writes ("9.2")
    driver_branch: int | None  #: driver branch shipped with it (595), None when not in the data
    min_driver_linux: (
        str | None
    )  #: exact minimum Linux driver ("595.45.04"), None where only the branch is known
    min_driver_windows: str | None
    sms: tuple[int, ...]  #: SM numbers it compiles SASS for
    arch_specific: bool  #: 'a' targets exist
    family_specific: bool  #: 'f' targets exist
    assumed: str | None  #: why a row is extrapolated, when it is
    #: False for a release line NVIDIA never published (12.7): kept for the PTX ISA it stands for, never a
    #: train a user may name (:func:`require_train`)
    published: bool = True

    @property
    def archs(self) -> tuple[Arch, ...]:
        """The capabilities it compiles for (no variants), oldest first."""
        return tuple(Arch.from_sm(sm) for sm in self.sms)

    @property
    def oldest(self) -> Arch:
        return self.archs[0]

    @property
    def newest(self) -> Arch:
        return self.archs[-1]

    def min_driver(self, platform: str = "linux") -> str | None:
        """The exact minimum driver on ``platform`` ("linux" or "windows"), None when the data lacks it."""
        return self.min_driver_windows if platform == "windows" else self.min_driver_linux

    def min_driver_text(self, platform: str = "linux") -> str:
        """The minimum driver for messages: exact, else ``r595 branch``, else ``a driver for CUDA 13.4``."""
        exact = self.min_driver(platform)
        if exact:
            return exact
        if self.driver_branch is not None:
            return f"r{self.driver_branch} branch"
        return f"a driver for CUDA {self.train.version} or newer"

    def _virtual(self) -> Arch:
        top_major = self.archs[-1].major
        return min(a for a in self.archs if a.major == top_major)

    @property
    def all(self) -> ArchList:
        """What ``-arch=all`` / CMake ``all`` builds: SASS for every SM, PTX for the newest major's first SM.

        Measured with nvcc 13.0 ``--dryrun``: sm_75 ... sm_121 as SASS and compute_120 as PTX.
        """
        virtual = self._virtual()
        return ArchList((*(Target(a, True, False) for a in self.archs), Target(virtual, True, True)))

    @property
    def all_major(self) -> ArchList:
        """What ``-arch=all-major`` builds: the oldest SM and every X.0 as SASS, PTX as for :attr:`all`.

        Measured with nvcc 13.0 ``--dryrun``: sm_75 sm_80 sm_90 sm_100 sm_110 sm_120 and compute_120.
        """
        virtual = self._virtual()
        chosen = [a for a in self.archs if a.minor == 0 or a == self.oldest]
        return ArchList((*(Target(a, True, False) for a in chosen), Target(virtual, True, True)))


def _release(key: str, raw: Table) -> Release:
    try:
        train = parse_train(key)
        ptx_isa = raw.text("ptx_isa", "the PTX ISA version its compiler writes")
        isa_tuple(ptx_isa)
    except (KnowledgeError, ValueError) as e:
        raise raw.fail(raw.key, str(e)) from e
    sms = raw.require("sms", "the SMs it builds for")
    if not isinstance(sms, list) or not all(isinstance(sm, int) for sm in sms) or sms != sorted(set(sms)):
        raise raw.wrong("sms", "a sorted list of integers without duplicates", sms, show=True)
    return Release(
        train=train,
        ptx_isa=ptx_isa,
        driver_branch=raw.integer("driver_branch"),
        min_driver_linux=raw.string("min_driver_linux"),
        min_driver_windows=raw.string("min_driver_windows"),
        sms=tuple(sms),
        arch_specific=raw.boolean("arch_specific", False),
        family_specific=raw.boolean("family_specific", False),
        assumed=raw.string("assumed"),
        published=raw.boolean("published", True),
    )


@once
def releases() -> tuple[Release, ...]:
    """Every release the data knows, oldest first."""
    table = _data.section(DATA_FILE, "releases")
    return tuple(sorted((_release(k, v) for k, v in table.tables()), key=lambda r: r.train))


def known_trains() -> tuple[Train, ...]:
    return tuple(r.train for r in releases())


def published_trains() -> tuple[Train, ...]:
    """The release lines NVIDIA published, oldest first."""
    return tuple(r.train for r in releases() if r.published)


def require_train(text: str, known: Iterable[Train], where: str, *, label: str = "--train") -> Train:
    """The one rule for a train a user names (``--train``, ``$CUDASHIP_TRAIN``, ``toolkit install TRAIN``,
    the API's ``train=``), in every command alike: text that is no train, a release line NVIDIA never
    published (12.7: refused everywhere, with the published ones named), and a train the command's data
    (``known``, ``where``) lacks are each exit 4 (``ExitCode.UNKNOWN_TRAIN``) with one message."""
    try:
        train = parse_train(text)
    except KnowledgeError:
        return require_known(text, known, where, label=label)  # raises, worded as every refusal
    refuse_unpublished(train, text, label)
    return require_known(text, known, where, label=label)


def refuse_unpublished(train: Train, text: str, label: str) -> None:
    """UnknownTrainError when ``train`` is a release line the data holds but NVIDIA never published (12.7)."""
    if train.line not in published_trains() and train.line in {r.train for r in releases()}:
        raise UnknownTrainError(
            f"{label} {text.strip()!r}: CUDA {train.version} was never published; the published CUDA "
            f"releases are {train_list(published_trains())}"
        )


def release_for(train: Train | str) -> Release:
    """The release line of ``train`` (cu132, 13.2, 13.2.2); UnknownTrainError names the known ones."""
    wanted = as_train(train).line
    for release in releases():
        if release.train == wanted:
            return release
    known = ", ".join(t.tag for t in known_trains())
    raise UnknownTrainError(f"unknown CUDA train {wanted.tag} ({wanted.version}); known: {known}")


def release_for_ptx_isa(isa: str) -> Release | None:
    """The oldest release whose compiler writes PTX ISA ``isa`` or newer (the release that introduced it).

    None when ``isa`` is newer than every release in the data.
    """
    wanted = isa_tuple(isa)
    for release in releases():
        if isa_tuple(release.ptx_isa) >= wanted:
            return release
    return None


def minor_compat_floor(major: int, platform: str = "linux") -> str | None:
    """The oldest driver a CUDA ``major``.y build runs on by minor-version compatibility (None: unknown)."""
    table = _data.table(DATA_FILE, "minor_version_compatibility")
    row = table.get(str(major))
    if not isinstance(row, dict):
        return None
    value = row.get("min_driver_windows" if platform == "windows" else "min_driver_linux")
    return str(value) if value is not None else None


def zstd_min_driver() -> str:
    """The oldest driver that loads ZSTD-compressed fatbin entries."""
    return str(_data.table(DATA_FILE, "compression")["zstd_min_driver"])


@lru_cache(maxsize=128)
def cuda_release_for_ptx(isa_version: str | None) -> str | None:
    """The CUDA release that introduced PTX ISA ``isa_version`` (``"9.0"`` → ``"13.0"``), from the knowledge
    base's release table; None when the version is newer than every release it knows, or malformed."""
    if not isa_version:
        return None
    try:
        found = release_for_ptx_isa(isa_version)
    except (KnowledgeError, ValueError):
        return None
    return found.train.version if found is not None else None


def train_from_ptx(device_code: Iterable[DeviceCode]) -> tuple[str, str] | None:
    """``("13.0", "PTX ISA 9.0")``: the CUDA release that introduced the newest PTX ISA among
    ``device_code`` (the toolkit that wrote the PTX is that release or newer), or None without PTX whose
    ISA the release table knows."""
    best: tuple[tuple[int, ...], str, str] | None = None
    for d in device_code:
        if d.kind is not DeviceCodeKind.PTX or not d.version:
            continue
        release = cuda_release_for_ptx(d.version)
        if release is None:
            continue
        try:
            key = tuple(int(x) for x in d.version.split("."))
        except ValueError:
            continue
        if best is None or key > best[0]:
            best = (key, release, d.version)
    return (best[1], f"PTX ISA {best[2]}") if best is not None else None
