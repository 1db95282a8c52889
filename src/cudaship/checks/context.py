"""What every check reads: the scanned wheel seen as installed, its target platform, train and
requirements."""

from __future__ import annotations

import posixpath
from dataclasses import dataclass, field
from functools import cached_property

from cudaship.binary.records import FileFormat
from cudaship.checks.policy import Policy
from cudaship.checks.wheelscan import ScannedWheel
from cudaship.errors import CudashipError
from cudaship.inspection.records import ContainerKind, FileReport
from cudaship.knowledge.trains import Train, parse_train
from cudaship.wheel.metadata import (
    DeclaredRequirement,
    TargetPlatform,
    install_path,
    platform_from_tag,
    requirements_for,
    tags_from_filename,
)

HOST_FORMATS = (FileFormat.ELF, FileFormat.PE, FileFormat.MACHO)


@dataclass
class AuditContext:
    """One wheel under audit. Paths are as installed (relative to site-packages, ``/``-separated)."""

    scan: ScannedWheel
    policy: Policy
    platform: TargetPlatform
    notes: list[str] = field(default_factory=list)

    # --- the wheel's files ------------------------------------------------------------------------------

    @cached_property
    def installed(self) -> dict[str, str]:
        """member path in the zip -> installed path (members of other ``.data`` schemes keep their path)."""
        if self.is_program:  # a program's members are not installed: they keep their names
            return {m.name: m.name for m in self.scan.members}
        out: dict[str, str] = {}
        for m in self.scan.members:
            out[m.name] = install_path(m.name, self.scan.dist.directory) or m.name
        return out

    @property
    def is_program(self) -> bool:
        """An exported program (.pt2, .pte) read as a container, not a wheel."""
        return self.scan.kind is not ContainerKind.WHEEL

    @cached_property
    def files(self) -> tuple[str, ...]:
        return tuple(sorted(self.installed.values()))

    @cached_property
    def reports(self) -> dict[str, FileReport]:
        """Native files by installed path."""
        return {self.installed.get(k, k): v for k, v in self.scan.reports.items()}

    @cached_property
    def libraries(self) -> dict[str, FileReport]:
        """Host binaries (ELF, PE, Mach-O) that were read, by installed path."""
        return {p: r for p, r in self.reports.items() if r.format in HOST_FORMATS and r.host is not None}

    @cached_property
    def exports(self) -> dict[str, frozenset[str]]:
        """Exported symbol names of each host binary, by installed path (in path order)."""
        return {p: frozenset(r.host.exports) for p, r in sorted(self.libraries.items()) if r.host is not None}

    @cached_property
    def import_libraries(self) -> dict[str, FileReport]:
        return {
            p: r
            for p, r in self.reports.items()
            if r.format is FileFormat.COFF_IMPORT_LIBRARY and r.host is not None
        }

    @cached_property
    def by_name(self) -> dict[str, list[str]]:
        """Lower-cased base name -> installed paths of host binaries with that name."""
        out: dict[str, list[str]] = {}
        for path in self.libraries:
            out.setdefault(posixpath.basename(path).lower(), []).append(path)
        return out

    # --- platform, train, requirements ------------------------------------------------------------------

    @property
    def os(self) -> str:
        return self.platform.os

    @property
    def machine(self) -> str | None:
        return self.platform.machine

    @property
    def local(self) -> str | None:
        return self.scan.dist.metadata.local

    @cached_property
    def train_or_error(self) -> Train | str:
        """The CUDA train named by the local version tag (for a program: by its newest PTX ISA), or a one-line
        reason why there is none."""
        if self.is_program:
            if self.scan.program_train is None:
                return "the program names no CUDA train (no PTX whose ISA version a CUDA release introduced)"
            return parse_train(self.scan.program_train)
        local = self.local
        if not local:
            return (
                f"version {self.scan.dist.metadata.version} has no local tag naming the CUDA train (+cu132)"
            )
        tag = local.split(".")[0]
        try:
            return parse_train(tag)
        except CudashipError as e:
            return f"local tag +{local}: {e.message}"

    @property
    def train_source(self) -> str:
        """Where the train comes from, as reports say it: ``tag +cu132``, or for a program ``PTX ISA 9.0``."""
        if self.is_program:
            return self.scan.train_evidence or "no PTX"
        return f"tag +{self.local}"

    @property
    def train_claim(self) -> str:
        """What names the train, for findings that disagree with it: ``the wheel is tagged +cu132``."""
        if self.is_program:
            return f"the program's {self.train_source} names CUDA {self.scan.program_train}"
        return f"the wheel is tagged +{self.local}"

    @property
    def train(self) -> Train | None:
        value = self.train_or_error
        return value if isinstance(value, Train) else None

    def declared_for(self, os_name: str, machine: str | None = None) -> tuple[DeclaredRequirement, ...]:
        return requirements_for(self.scan.dist.metadata.requires_dist, os_name, machine or self.machine)

    @cached_property
    def declared(self) -> tuple[DeclaredRequirement, ...]:
        """Requires-Dist entries that apply on the wheel's own platform."""
        return self.declared_for(self.os, self.machine)


def wheel_platform(scan: ScannedWheel) -> tuple[TargetPlatform, list[str]]:
    """The wheel's target platform from its WHEEL tags (first specific one), and notes when tags disagree;
    a program's from its metadata or library format."""
    if scan.program_platform is not None:
        return scan.program_platform, []
    platforms = scan.dist.wheel.platforms
    if not platforms:
        platforms = tuple(platform_from_tag(t.rsplit("-", 1)[-1]) for t in tags_from_filename(scan.filename))
    specific = [p for p in platforms if p.os not in ("any", "other")]
    notes: list[str] = []
    if not specific:
        return (platforms[0] if platforms else TargetPlatform("any", None, "any")), notes
    oses = {(p.os, p.machine) for p in specific}
    if len(oses) > 1:
        labels = ", ".join(sorted({p.label for p in specific}))
        notes.append(f"the wheel's tags name several platforms ({labels}); audited for {specific[0].label}")
    return specific[0], notes
