"""Records of an audit: one :class:`~cudaship.records.findings.CheckResult` (the one finding model, shared
with ``program check`` and ``doctor --env``) per named check, grouped per wheel in an :class:`AuditReport`.

Checks return these frozen dataclasses and never print; renderers in :mod:`cudaship.render` turn them into
text, JSON, JUnit XML or markdown.
"""

from __future__ import annotations

import dataclasses
from dataclasses import dataclass, field

from cudaship import words
from cudaship.analysis.summary import Summary
from cudaship.providers.records import Pin, ResolvedProject
from cudaship.records.findings import CheckResult


@dataclass(frozen=True)
class WheelFacts:
    """What the audit read about the wheel itself, shown at the top of each wheel's report."""

    filename: str
    name: str | None = None
    version: str | None = None
    local: str | None = None
    train: str | None = None  #: ``13.2``: from ``--train``, the local tag (``+cu132``) or inferred
    train_source: str | None = None  #: where :attr:`train` came from, one line (or why there is none)
    platform: str | None = None  #: ``linux``, ``windows``, ``macos`` or ``any``
    machine: str | None = None  #: ``x86_64``, ``aarch64`` or None for pure wheels
    tags: tuple[str, ...] = ()
    files: int = 0
    native_files: int = 0
    uncompressed_size: int = 0
    #: the wheel carries CUDA code (device code, a CUDA library used or shipped, CUDA sources; see
    #: checks/cuda_content.py); False: "no CUDA code" in its first line and summary
    cuda_code: bool = True


@dataclass(frozen=True)
class StaticImport:
    """The static audit's verdict on one import of one shipped native library (from the closure family's
    resolutions): what ``audit --load`` compares with what the real loader mapped."""

    file: str  #: the library, as a path inside the wheel
    library: str  #: the DT_NEEDED / imported DLL name, as written
    ok: bool
    via: str  #: how it resolves (a :class:`cudaship.checks.resolve.Via` value: ``shipped``, ``system`` ...)
    target: str | None = None  #: the installed path (site-packages relative) for shipped / required files
    detail: str = ""
    extra: str | None = None  #: the wheel's extra under which the provider is installed (None: always)
    #: how the need is met, the one judgement's word (:class:`cudaship.records.judgement.Met`)
    met: str = "missing"
    #: whether the static model can compute it (False: the package's code decides at run time; see --load)
    certain: bool = True


@dataclass(frozen=True)
class LoadComparison:
    """One DT_NEEDED of one library: the static verdict next to what the loader mapped for it."""

    file: str  #: the library, as a path inside the wheel
    library: str  #: the DT_NEEDED name
    static: str  #: one phrase: ``resolves: shipped at x/libfoo.so.1``, ``does not resolve: ...``
    loader: str  #: one phrase: ``loaded /venv/.../libfoo.so.1``, ``the library did not load``
    agree: bool | None  #: None: the loader could not tell (the library itself did not load)


@dataclass(frozen=True)
class LoadProbeLine:
    """One child of ``audit --load``: what it ran and how it ended."""

    label: str  #: ``import pkg``, ``dlopen pkg/lib/libfoo.so (after import pkg)``
    ok: bool
    message: str | None = None


@dataclass(frozen=True)
class LoadCheck:
    """What ``audit --load`` did for one wheel: where it loaded it, each child's outcome and, per library and
    per DT_NEEDED, whether the static audit and the real loader agree."""

    skipped: str | None = None  #: one line: why nothing was loaded (another OS's wheel, no interpreter)
    environment: str | None = None  #: one line: the interpreter and what was installed
    stub_libcuda: str | None = None  #: the toolkit stub used as libcuda.so.1 (no driver here)
    libraries: int = 0
    libraries_agree: int = 0
    imports: int = 0
    imports_agree: int = 0
    probes: tuple[LoadProbeLine, ...] = ()
    comparisons: tuple[LoadComparison, ...] = ()
    notes: tuple[str, ...] = ()

    @property
    def line(self) -> str:
        """``loader: 41/43 libraries agree (120/122 imports)``, or why it was skipped."""
        if self.skipped is not None:
            return f"loader check skipped: {self.skipped}"
        # "6/8 libraries agree", "1/1 library agrees": noun and verb agree with the whole
        noun = words.agree(self.libraries, "library agrees", "libraries agree")
        line = f"loader: {self.libraries_agree}/{self.libraries} {noun}"
        if self.imports:
            line += f" ({self.imports_agree}/{self.imports} {words.agree(self.imports, 'import', 'imports')})"
        if self.stub_libcuda:
            line += "; libcuda.so.1 was the toolkit's stub (no driver)"
        return line


@dataclass(frozen=True)
class WheelAudit:
    """Every check run on one wheel."""

    path: str
    facts: WheelFacts
    checks: tuple[CheckResult, ...]
    notes: tuple[str, ...] = ()
    #: members the archive could not give back (corrupt data, bad CRC, unsupported method), with the
    #: reason: the wheel is damaged and those members went unchecked, so the audit exits 2 (bad input)
    unreadable: tuple[tuple[str, str], ...] = ()
    #: the static verdict of every import of every shipped native library (the closure family's)
    imports: tuple[StaticImport, ...] = ()
    #: what ``audit --load`` saw, when it ran
    load: LoadCheck | None = None
    #: libraries shipped under several names (byte copies standing in for symlinks, one SONAME in one
    #: directory): per library, the copy loaded by the name its dependents need first, then the others
    #: (:func:`cudaship.checks.closure.copy_groups`); ``audit --load`` loads each library once, by that copy
    copies: tuple[tuple[str, ...], ...] = ()
    #: canonical names of host packages the wheel's libraries need but do not declare (an extension whose
    #: RUNPATH points into torch/lib, or that links libc10.so, with no torch requirement): ``audit --load``
    #: installs them too. See knowledge/data/hosts.toml.
    host_packages: tuple[str, ...] = ()
    #: every project the closure of its requirements resolved, at its version (empty: none was resolved)
    resolved: tuple[Pin, ...] = ()
    #: projects the index gave no upload time for while ``--exclude-newer`` was set
    undated: tuple[str, ...] = ()

    @property
    def summary(self) -> Summary:
        return Summary.of(self.checks)


def canonical(audit: WheelAudit) -> WheelAudit:
    """The wheel's audit with every list that a binary, the zip or a thread ordered put in its canonical order
    (docs/json-schema.md, "Order"): the static imports by library path, then import name. The checks list in
    the order of the families, and each family orders its own checks and evidence (paths and names sorted,
    archs by number, kinds of resolution in :class:`cudaship.checks.resolve.Via` order)."""
    return dataclasses.replace(audit, imports=tuple(sorted(audit.imports, key=lambda i: (i.file, i.library))))


@dataclass(frozen=True)
class Resolution:
    """What an audit resolved its wheels' requirements against, and to: the report's ``resolution``, which
    ``audit --replay REPORT`` reads back (and ``--write-constraints`` writes as a constraints file) to give
    the same verdict later."""

    indexes: tuple[str, ...]  #: the package index(es) asked; empty: none
    resolved_at: str  #: when (RFC 3339, UTC): the index as it was then
    exclude_newer: str | None  #: files uploaded after this were ignored (RFC 3339, UTC); None: not set
    constraints: tuple[str, ...]  #: where the constraints came from (files, the configuration, a report)
    offline: bool  #: the index only through the on-disk cache
    projects: tuple[ResolvedProject, ...]  #: every project -> version, sorted by name
    undated: tuple[str, ...] = ()  #: projects --exclude-newer could not apply to (no upload time)

    @property
    def line(self) -> str:
        """``resolution: 3 projects from https://pypi.org/simple as of 2026-12-05T02:30:00Z; ...``: the short
        line of the text and markdown reports."""
        where = ", ".join(self.indexes) if self.indexes else "no index"
        text = (
            f"resolution: {words.count(len(self.projects), 'project')} from {where}"
            + (" (offline: cache only)" if self.offline else "")
            + f" as of {self.resolved_at}"
        )
        if self.exclude_newer:
            text += f", uploads after {self.exclude_newer} ignored"
        if self.constraints:
            text += f", constrained by {', '.join(self.constraints)}"
        if self.undated:
            text += (
                f"; --exclude-newer could not apply to {', '.join(self.undated)} (the index gives no upload "
                "time)"
            )
        return text


@dataclass(frozen=True)
class AuditReport:
    """The whole audit: one entry per wheel, in the order given."""

    wheels: tuple[WheelAudit, ...]
    policy_source: str | None  #: file the policy came from; None for the built-in default
    policy_default: bool = False
    notes: tuple[str, ...] = field(default=())
    #: one line per wheel that could not be read at all (not a zip, no dist-info): not in ``wheels``
    errors: tuple[str, ...] = field(default=())
    #: with ``--load``: the report's first line, saying that the wheels' code ran
    ran_code: str | None = None
    #: what the requirements were resolved against and to (the CLI sets it); None: not recorded
    resolution: Resolution | None = None

    @property
    def checks(self) -> tuple[CheckResult, ...]:
        return tuple(c for w in self.wheels for c in w.checks)

    @property
    def summary(self) -> Summary:
        return Summary.of(self.checks)

    def summary_line(self) -> str:
        """The summary's line, saying which wheels carry no CUDA code at all (``6 checks: 6 passed, 0 failed,
        0 skipped · no CUDA code in the wheel``)."""
        line = self.summary.line()
        without = [w.facts.filename for w in self.wheels if not w.facts.cuda_code]
        if not without:
            return line
        if len(without) == len(self.wheels):
            where = "the wheel" if len(without) == 1 else f"any of the {words.count(len(without), 'wheel')}"
        else:
            where = ", ".join(without)
        return f"{line} · no CUDA code in {where}"

    @property
    def ok(self) -> bool:
        """No check failed with severity error (warnings and notes do not fail the audit)."""
        return self.summary.failed == 0

    @property
    def damaged(self) -> tuple[str, ...]:
        """One ``wheel!member: cannot be read: reason`` line per member a wheel could not give back."""
        return tuple(
            f"{w.path}!{member}: cannot be read: {reason}"
            for w in self.wheels
            for member, reason in w.unreadable
        )
