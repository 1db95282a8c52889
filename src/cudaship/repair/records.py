"""Records of a repair: what the plan removes, edits and declares, and what came of it."""

from __future__ import annotations

from dataclasses import dataclass, field


@dataclass(frozen=True)
class Removed:
    """A vendored library an NVIDIA wheel provides: left out of the repaired wheel."""

    member: str  #: path inside the wheel (``cudemo.libs/libcudart-96c42e41.so.13``)
    library: str  #: its own name (``libcudart.so.13``)
    size: int  #: uncompressed bytes
    compressed_size: int
    project: str  #: the NVIDIA project that installs it (``nvidia-cuda-runtime``)
    directory: str  #: where that project installs it (``nvidia/cu13/lib``)


@dataclass(frozen=True)
class Kept:
    """A vendored CUDA library that stays, and why."""

    member: str
    library: str
    reason: str


@dataclass(frozen=True)
class ElfEdit:
    """The dynamic-section edits of one shipped library."""

    member: str
    replace_needed: tuple[tuple[str, str], ...]  #: (name written, name it becomes)
    runpath_before: tuple[str, ...]
    runpath_after: tuple[str, ...]
    dropped: tuple[tuple[str, str], ...]  #: (entry, why it goes)
    #: the entries are DT_RPATH (kept so: it also serves the libraries this one loads, DT_RUNPATH does not)
    was_rpath: bool
    #: CUDA DT_NEEDED entries none of whose symbols is used (``--drop-unused-cuda``), removed
    remove_needed: tuple[str, ...] = ()

    @property
    def runpath_changed(self) -> bool:
        return self.runpath_before != self.runpath_after


@dataclass(frozen=True)
class PeEdit:
    """Imported DLL names of one shipped PE file set back to the DLL's own name (in place: the own name is
    shorter than delvewheel's mangled one)."""

    member: str
    replace_imports: tuple[tuple[str, str], ...]


@dataclass(frozen=True)
class Bootstrap:
    """Lines added to a package's ``__init__.py`` that add NVIDIA's DLL directories with
    ``os.add_dll_directory`` before its extensions load (Windows)."""

    member: str  #: ``cudemo/__init__.py``
    directories: tuple[str, ...]  #: relative to the package directory (``../nvidia/cu13/bin/x86_64``)


@dataclass(frozen=True)
class Unread:
    """A native member repair could not read (truncated, not a binary it reads, over a reader's limit):
    copied unchanged, unedited, and named here so the report does not pass over it (audit names it too)."""

    member: str
    reason: str  #: the reader's one line


@dataclass(frozen=True)
class RecordFix:
    """A RECORD row that disagreed with the wheel's members, rewritten by ``--fix-record``."""

    member: str
    kind: str  #: the problem: "hash", "size", "missing", "unlisted", "unhashed", "duplicate"
    problem: str  #: the reader's one line: what RECORD said against what the member is


@dataclass(frozen=True)
class AddedRequirement:
    text: str  #: the Requires-Dist line's value
    libraries: tuple[str, ...]  #: the libraries it provides to the wheel
    why: str


@dataclass(frozen=True)
class RepairPlan:
    wheel: str  #: input path
    filename: str
    os: str
    train: str  #: ``13.0 (inferred from ...)``, or why there is none
    major: int | None = None  #: the train's CUDA major, None when there is none
    removed: tuple[Removed, ...] = ()
    kept: tuple[Kept, ...] = ()
    edits: tuple[ElfEdit, ...] = ()
    requirements: tuple[AddedRequirement, ...] = ()
    notes: tuple[str, ...] = ()
    pe_edits: tuple[PeEdit, ...] = ()
    bootstraps: tuple[Bootstrap, ...] = ()
    unread: tuple[Unread, ...] = ()  #: native members no edit looked at, as their readers failed on them
    #: RECORD rows that disagreed with the members, rewritten from the members (``--fix-record`` only)
    record_fixes: tuple[RecordFix, ...] = ()
    #: the CUDA majors of the wheel's variants (``libfoo_cuda118.so`` ... ``_cuda132.so``), each built for
    #: its own: what ``--print-excludes`` covers for a wheel without one train
    variant_majors: tuple[int, ...] = ()

    @property
    def changed(self) -> bool:
        return bool(
            self.removed
            or self.edits
            or self.requirements
            or self.pe_edits
            or self.bootstraps
            or self.record_fixes
        )

    @property
    def bytes_removed(self) -> int:
        return sum(r.size for r in self.removed)


@dataclass(frozen=True)
class Verification:
    """The written wheel read back (:mod:`cudaship.repair.verify`) and each claim of the report checked
    against it: members removed, kept (bytes unchanged), edited, requirements added, bootstraps added,
    RECORD, METADATA."""

    checked: int  #: claims checked
    failed: tuple[str, ...] = ()  #: each claim that does not hold, one line each

    @property
    def holds(self) -> bool:
        return not self.failed


@dataclass(frozen=True)
class EditedSize:
    """How one edited library was written, and its size before and after (issue 31, class 6)."""

    member: str
    how: str  #: ``in place`` (the new strings fit in its string table: same size) or ``patchelf``
    before: int  #: uncompressed bytes
    after: int


@dataclass(frozen=True)
class WheelRepair:
    """One wheel's repair: its plan, and the sizes before and after (``output`` None on a dry run, an error
    or nothing to write)."""

    path: str
    plan: RepairPlan | None
    size_before: int = 0  #: the wheel file's bytes
    uncompressed_before: int = 0
    output: str | None = None
    size_after: int | None = None
    uncompressed_after: int | None = None
    unchanged_copy: bool = False  #: nothing to change: the output is the input's bytes
    error: str | None = None
    #: the written wheel read back before it was placed (None: nothing was written); a claim that failed
    #: leaves nothing placed, and ``error`` names it
    verification: Verification | None = None
    #: each edited ELF library: how it was edited and its size before and after (empty: nothing written)
    edited: tuple[EditedSize, ...] = ()


@dataclass(frozen=True)
class RepairReport:
    wheels: tuple[WheelRepair, ...]
    dry_run: bool
    directory: str | None
    notes: tuple[str, ...] = field(default_factory=tuple)

    @property
    def failed(self) -> bool:
        return any(w.error for w in self.wheels)

    @property
    def unverified(self) -> bool:
        """A written wheel did not match its report (so it was not placed): a bug, exit 70."""
        return any(w.verification is not None and not w.verification.holds for w in self.wheels)
