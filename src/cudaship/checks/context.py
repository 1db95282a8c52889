"""What every check reads: the scanned wheel seen as installed, its target platform, train, variants and
requirements.

The train (the CUDA release line the wheel is built for) is, in order: ``--train`` (the caller's word); the
local version tag (``+cu132``); else inferred, and the report says from what: an exact ``cuda-toolkit==X.Y.Z``
requirement; an exact pin of an NVIDIA component (``nvidia-cuda-runtime==13.0.96``); the major of
``nvidia-*-cuNN`` requirements, the CUDA runtime imported, with the minor from the newest PTX ISA or cubin
toolkit of that major; else the PTX ISA and cubin toolkits alone. Libraries that are variants (alternatives,
one per CUDA version) are left out of the inference and judged against their own trains.
"""

from __future__ import annotations

import posixpath
import re
from dataclasses import dataclass, field
from functools import cached_property

from cudaship.checks.policy import Policy, any_match
from cudaship.checks.providers import RequirementsAhead, WheelProviders, wheel_providers
from cudaship.checks.records import StaticImport
from cudaship.errors import CudashipError, WheelError
from cudaship.inspection.scan import ScannedWheel
from cudaship.knowledge.hosts import Host
from cudaship.knowledge.releases import release_for_ptx_isa
from cudaship.knowledge.trains import Train, parse_train
from cudaship.knowledge.variants import Variant, declared, recognise
from cudaship.providers.options import ProviderOptions
from cudaship.records.binary import DeviceCodeKind, FileFormat, Import
from cudaship.records.files import ContainerKind, FileReport
from cudaship.records.platform import TargetPlatform
from cudaship.wheel.records import DeclaredRequirement

HOST_FORMATS = (FileFormat.ELF, FileFormat.PE, FileFormat.MACHO)


def canonical_imports(report: FileReport) -> tuple[Import, ...]:
    """A library's imports in the audit's canonical order, by name as written (docs/json-schema.md, "Order"):
    the order in the binary is the linker's (GNU ld writes a PE's import table in the order of its import
    libraries' paths), so nothing a report prints may follow it."""
    return tuple(sorted(report.host.imports, key=lambda i: i.library)) if report.host is not None else ()


@dataclass
class AuditContext:
    """One wheel under audit. Paths are as installed (relative to site-packages, ``/``-separated)."""

    scan: ScannedWheel
    policy: Policy
    platform: TargetPlatform
    notes: list[str] = field(default_factory=list)
    train_override: Train | None = None  #: ``--train``
    #: where declared requirements are looked up (see :mod:`cudaship.checks.providers`)
    provider_options: ProviderOptions = field(default_factory=ProviderOptions)
    #: the requirements' closure, resolved while the members were read (None: resolved when first needed)
    requirements_ahead: RequirementsAhead | None = None
    #: every import's static verdict, as the closure family resolved it (``WheelAudit.imports``)
    static_imports: list[StaticImport] = field(default_factory=list)

    # --- the wheel's files ------------------------------------------------------------------------------

    @cached_property
    def installed(self) -> dict[str, str]:
        """member path in the zip -> installed path (members of other ``.data`` schemes keep their path)."""
        return {m.name: m.installed for m in self.scan.members}

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
    def linked(self) -> dict[str, str]:
        """Installed path where a link the wheel makes at install time (wheel-axle-runtime's ``symlinks.txt``,
        :attr:`DistInfo.links`) puts a shipped library -> that library's installed path. A link to a file
        names one library; a link to a directory names every library under it; links to links are followed
        (as many rounds as there are links, no more). Links leaving site-packages are left out."""
        links = self.scan.dist.links
        if not links:
            return {}
        placed: list[tuple[str, str, bool]] = []
        for link in links:
            spot = link.place(self.scan.dist.directory)  # purelib/platlib land in site-packages
            if spot is not None:
                placed.append((*spot, link.directory))
        found: dict[str, str] = {}
        for _round in range(len(placed)):
            before = len(found)
            for where, target, directory in placed:
                if not directory:
                    real = target if target in self.libraries else found.get(target)
                    if real is not None and where not in self.libraries:
                        found.setdefault(where, real)
                    continue
                prefix = target.rstrip("/") + "/"
                for path in [*self.libraries, *found]:
                    if path.startswith(prefix):
                        alias = f"{where}/{path[len(prefix) :]}"
                        if alias not in self.libraries:
                            found.setdefault(alias, found.get(path, path))
            if len(found) == before:
                break
        return found

    @cached_property
    def linked_by_name(self) -> dict[str, list[str]]:
        """Lower-cased base name -> installed paths of :attr:`linked` (the links' own paths)."""
        out: dict[str, list[str]] = {}
        for path in sorted(self.linked):
            out.setdefault(posixpath.basename(path).lower(), []).append(path)
        return out

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

    @cached_property
    def by_soname(self) -> dict[str, list[str]]:
        """ELF SONAME (and, for every host binary, the lower-cased base name) -> installed paths: the names
        under which the loader finds an already loaded library (glibc matches a loaded object's SONAME)."""
        out: dict[str, list[str]] = {}
        for path, report in sorted(self.libraries.items()):
            assert report.host is not None
            names = {posixpath.basename(path).lower()}
            if report.host.soname:
                names.add(report.host.soname.lower())
            for name in names:
                out.setdefault(name, []).append(path)
        return out

    @cached_property
    def needed_by(self) -> dict[str, tuple[str, ...]]:
        """Installed path -> the shipped libraries whose DT_NEEDED / imports name it (by SONAME or file
        name): who loads it, within the wheel (glibc's loading chain, ``l_loader``)."""
        out: dict[str, list[str]] = {}
        for path, report in sorted(self.libraries.items()):
            assert report.host is not None
            for imp in canonical_imports(report):
                for target in self.by_soname.get(posixpath.basename(imp.library).lower(), ()):
                    if target != path and path not in out.setdefault(target, []):
                        out[target].append(path)
        return {k: tuple(v) for k, v in out.items()}

    #: canonical names of host packages the wheel's libraries need but do not declare (filled by the
    #: closure checks, see :mod:`cudaship.checks.resolve`)
    host_packages: set[str] = field(default_factory=set)
    #: computed once per wheel by the load model (see :mod:`cudaship.checks.resolve`): each library's search
    #: path, and the host packages it needs without declaring them (None: not computed yet)
    search_paths: dict[str, tuple[tuple[str, str], ...]] = field(default_factory=dict)
    #: each library's search path as directory → first place (see :func:`cudaship.checks.resolve.resolve`)
    search_positions: dict[str, dict[str, int]] = field(default_factory=dict)
    #: each library's reason for being loaded only by name at run time, or None (see
    #: :func:`cudaship.checks.resolve.loaded_on_demand`)
    on_demand: dict[str, str | None] = field(default_factory=dict)
    #: work of the imports' resolution: directories placed and candidate files probed (a test bounds it by
    #: the number of imports and search-path entries, never their product)
    resolve_probes: int = 0
    undeclared_hosts: tuple[Host, ...] | None = None

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
    def tag_train_or_error(self) -> Train | str:
        """The CUDA train named by ``--train`` or by the local version tag, or a one-line reason why there is
        none (the train the wheel *claims*; :attr:`train_or_error` also infers one)."""
        if self.train_override is not None:
            return self.train_override
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

    @cached_property
    def _train_and_source(self) -> tuple[Train | str, str]:
        claimed = self.tag_train_or_error
        if isinstance(claimed, Train):
            if self.train_override is not None:
                return claimed, f"--train {claimed.version}"
            if self.is_program:
                return claimed, self.scan.train_evidence or "no PTX"
            return claimed, f"local tag +{self.local}"
        inferred = infer_train(self)
        if inferred is not None:
            return inferred
        own = sorted({v.train for v in self.variants.values() if v.train is not None})
        if own:
            trains = ", ".join(t.version for t in own)
            return (
                claimed,
                f"none for the wheel: its CUDA libraries are variants, each with its own train ({trains})",
            )
        return claimed, f"none: {claimed}, and none could be inferred"

    @property
    def train_or_error(self) -> Train | str:
        """The wheel's CUDA train (``--train``, the tag, else inferred; see the module's docstring), or why
        there is none."""
        return self._train_and_source[0]

    @property
    def train_source(self) -> str:
        """Where :attr:`train_or_error` came from, one line: ``local tag +cu130``, ``inferred from
        cuda-toolkit==13.0.3``."""
        return self._train_and_source[1]

    @property
    def train_label(self) -> str:
        """``cu130 (local tag +cu130)``: the train and its source, for messages."""
        train = self.train_or_error
        return f"{train.tag} ({self.train_source})" if isinstance(train, Train) else self.train_source

    @cached_property
    def variants(self) -> dict[str, Variant]:
        """Libraries that are alternatives (one per CUDA version...), by installed path: recognised by name
        unless the policy says not to, plus the policy's groups."""
        paths = sorted(self.libraries)
        found = recognise(paths) if self.policy.variants.by_name else {}
        for group in self.policy.variants.groups:
            for glob, train in group.members:
                for path in paths:
                    if any_match((glob,), path):
                        found[path] = declared(group.name, path, train)
        return found

    def train_of(self, path: str) -> Train | str:
        """The train a library is judged against: its own when it is a CUDA variant, else the wheel's."""
        variant = self.variants.get(path)
        if variant is not None and variant.train is not None:
            return variant.train
        return self.train_or_error

    @property
    def train_named_by(self) -> str:
        """What names the train the wheel claims, short: ``tag +cu132``, ``--train 13.0``, or for a program
        ``PTX ISA 9.0``."""
        if self.train_override is not None:
            return f"--train {self.train_override.version}"
        if self.is_program:
            return self.scan.train_evidence or "no PTX"
        return f"tag +{self.local}"

    @property
    def train_claim(self) -> str:
        """What names the train, for findings that disagree with it: ``the wheel is tagged +cu132``."""
        if self.train_override is not None:
            return f"the wheel is built for CUDA {self.train_override.version} (--train)"
        if self.is_program:
            return f"the program's {self.train_named_by} names CUDA {self.scan.program_train}"
        return f"the wheel is tagged +{self.local}"

    @property
    def train(self) -> Train | None:
        value = self.train_or_error
        return value if isinstance(value, Train) else None

    def declared_for(self, os_name: str, machine: str | None = None) -> tuple[DeclaredRequirement, ...]:
        """The Requires-Dist entries that hold on ``os_name``/``machine`` (default: the wheel's machine), as
        the scan read them (:attr:`ScannedWheel.declared`)."""
        machine = machine or self.machine
        for found in self.scan.declared:
            if (found.os, found.machine) == (os_name, machine):
                if found.error is not None:
                    raise WheelError(found.error)
                return found.requirements
        raise CudashipError(f"the scan did not read the requirements for {os_name} {machine or ''}".rstrip())

    @cached_property
    def providers(self) -> WheelProviders:
        """The installed closure of the declared requirements (computed on first use: it may read the
        index)."""
        return wheel_providers(self)

    @cached_property
    def declared(self) -> tuple[DeclaredRequirement, ...]:
        """Requires-Dist entries that apply on the wheel's own platform."""
        return self.declared_for(self.os, self.machine)


_CUDA_TOOLKIT = "cuda-toolkit"
_NVIDIA_CU = re.compile(r"^nvidia-.+-cu(\d+)$")
_EXACT = re.compile(r"^==(\d+)\.(\d+)(?:\.\d+)*$")


def _exact_train(specifier: str) -> Train | None:
    m = _EXACT.match(specifier)
    return Train(int(m.group(1)), int(m.group(2))) if m else None


def _device_releases(ctx: AuditContext) -> list[Train]:
    """CUDA releases the non-variant libraries' device code proves: PTX ISA introducers and cubin toolkits."""
    found: list[Train] = []
    for path, report in sorted(ctx.reports.items()):
        if path in ctx.variants:
            continue
        for d in report.device_code:
            try:
                if d.kind is DeviceCodeKind.PTX and d.version:
                    rel = release_for_ptx_isa(d.version)
                    if rel is not None:
                        found.append(Train(rel.train.major, rel.train.minor))
                elif d.kind is DeviceCodeKind.SASS and d.toolkit_version:
                    found.append(parse_train(d.toolkit_version))
            except (CudashipError, ValueError):
                continue
    return found


def infer_train(ctx: AuditContext) -> tuple[Train, str] | None:
    """The train of a wheel without a tag, and a one-line account of the evidence, or None."""
    declared_reqs = ctx.declared
    for req in declared_reqs:
        if req.name == _CUDA_TOOLKIT:
            train = _exact_train(req.specifier)
            if train is not None:
                return train, f"inferred from the requirement {req.name}{req.specifier}"
    for req in declared_reqs:
        if req.name.startswith("nvidia-cuda-runtime") or req.name.startswith("nvidia-cuda-nvrtc"):
            train = _exact_train(req.specifier)
            if train is not None:
                return train, f"inferred from the requirement {req.name}{req.specifier}"
    majors: dict[int, str] = {}
    for req in declared_reqs:
        m = _NVIDIA_CU.match(req.name)
        if m:
            majors.setdefault(int(m.group(1)), f"the requirement {req.name}")
    if not majors:
        for path, report in sorted(ctx.libraries.items()):
            link = report.linkage
            if path not in ctx.variants and link is not None and link.cudart_major is not None:
                majors.setdefault(
                    link.cudart_major,
                    f"{posixpath.basename(path)} importing CUDA runtime {link.cudart_major}",
                )
    releases = _device_releases(ctx)
    if len(majors) > 1:
        return None  # several majors: no one train (variants are judged each against its own)
    if majors:
        ((major, why),) = majors.items()
        same = sorted(t for t in releases if t.major == major)
        if same:
            newest = same[-1]
            return (
                newest,
                f"inferred from {why}, minor from the newest device code of CUDA {major} ({newest.version})",
            )
        return Train(major, 0), f"inferred from {why} (minor unknown: {major}.0 assumed)"
    if releases:
        newest = max(releases)
        if len({t.major for t in releases}) == 1:
            return newest, f"inferred from the device code (PTX ISA / cubin toolkit of CUDA {newest.version})"
    return None
