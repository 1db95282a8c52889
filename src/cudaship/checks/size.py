"""size: what the wheel weighs, per native library (SASS per arch, PTX, host code; compressed and not), what
of it is CUDA libraries an NVIDIA wheel would provide (what ``cudaship repair`` removes), the wheel against
PyPI's default file-size limit, and the policy's budgets (``[audit.size]``: total, per library, per arch).

Counted from the records: a library's device code is the stored bytes of its fatbin entries (``stored_size``,
compressed where the entry is), its host code the rest of the file."""

from __future__ import annotations

import posixpath
from dataclasses import dataclass

from packaging.utils import canonicalize_name

from cudaship.checks.context import AuditContext
from cudaship.knowledge.repair import provision, pypi_file_limit
from cudaship.records.binary import DeviceCodeKind, FileFormat
from cudaship.records.findings import CheckResult, Finding, passed, verdict
from cudaship.words import count, size

FAMILY = "size"


@dataclass(frozen=True)
class LibrarySize:
    path: str  #: installed path
    size: int  #: uncompressed bytes
    compressed: int
    sass: tuple[tuple[str, int], ...]  #: (arch, stored bytes), by arch
    ptx: int
    host: int
    provider: str | None  #: the NVIDIA project that would provide it, when one does


def library_sizes(ctx: AuditContext) -> list[LibrarySize]:
    """Every native file's weight, by installed path."""
    facts = {m.name: m for m in ctx.scan.members}
    member_of = {installed: member for member, installed in ctx.installed.items()}
    train = ctx.train
    machine = ctx.platform.machine
    own = canonicalize_name(ctx.scan.dist.metadata.name or "")
    out: list[LibrarySize] = []
    for path, report in sorted(ctx.reports.items()):
        member = facts.get(member_of.get(path, path))
        size = member.size if member else report.size
        compressed = member.compressed_size if member else size
        sass: dict[str, int] = {}
        ptx = 0
        for d in report.device_code:
            if d.kind is DeviceCodeKind.SASS:
                sass[d.arch] = sass.get(d.arch, 0) + d.stored_size
            elif d.kind is DeviceCodeKind.PTX:
                ptx += d.stored_size
        device = sum(sass.values()) + ptx
        provider = None
        major, minor = (train.major, train.minor) if train else (None, None)
        p = None
        if report.format is FileFormat.ELF and report.host is not None:
            name = report.host.soname or posixpath.basename(path)
            p = provision(name, "linux", major, minor, machine) or provision(
                posixpath.basename(path), "linux", major, minor, machine
            )
        elif report.format is FileFormat.PE:
            p = provision(posixpath.basename(path), "windows", major, minor, machine)
        # the provider's own wheel ships it: that is where it belongs
        if p is not None and p.project != own and posixpath.dirname(path) != p.directory:
            provider = p.project
        out.append(
            LibrarySize(
                path, size, compressed, tuple(sorted(sass.items())), ptx, max(size - device, 0), provider
            )
        )
    return out


def _describe(lib: LibrarySize) -> str:
    parts = [f"{size(lib.size)} ({size(lib.compressed)} compressed)", f"host {size(lib.host)}"]
    if lib.sass:
        parts.append("SASS " + ", ".join(f"{arch} {size(n)}" for arch, n in lib.sass))
    if lib.ptx:
        parts.append(f"PTX {size(lib.ptx)}")
    return "; ".join(parts)


def run(ctx: AuditContext) -> list[CheckResult]:
    libs = library_sizes(ctx)
    wheel = sum(m.compressed_size for m in ctx.scan.members)
    uncompressed = ctx.scan.uncompressed_size
    vendored = [lib for lib in libs if lib.provider]
    saved = sum(lib.compressed for lib in vendored)
    evidence = tuple(Finding(_describe(lib), file=lib.path) for lib in libs)
    results = [
        passed(
            FAMILY,
            "size: what the wheel weighs",
            f"members {size(wheel)} compressed, {size(uncompressed)} uncompressed; "
            f"{count(len(libs), 'native file')}"
            + (f"; about {size(wheel - saved)} after cudaship repair" if vendored else ""),
            evidence,
        )
    ]
    results.append(
        verdict(
            FAMILY,
            "size: CUDA libraries an NVIDIA wheel provides",
            [
                Finding(
                    f"{size(lib.size)} ({size(lib.compressed)} compressed) that {lib.provider} installs: "
                    "cudaship repair removes it and declares that wheel",
                    file=lib.path,
                )
                for lib in vendored
            ],
            "none shipped",
            f"{len(vendored)} shipped, {size(saved)} compressed",
            rule="vendored",
        )
    )
    limit = pypi_file_limit()
    results.append(
        verdict(
            FAMILY,
            "size: PyPI's file-size limit",
            [Finding(f"the wheel's members take {size(wheel)} compressed, over PyPI's default {size(limit)}")]
            if wheel > limit
            else [],
            f"{size(wheel)}, under PyPI's default {size(limit)} per file",
            f"over PyPI's default {size(limit)} per file: the upload needs a limit increase for the project",
            rule="pypi_limit",
        )
    )
    budget = ctx.policy.size
    if budget.total is not None:
        over = [Finding(f"{size(wheel)} compressed, over the budget of {size(budget.total)}")]
        results.append(
            verdict(
                FAMILY,
                "size: budget for the wheel",
                over if wheel > budget.total else [],
                f"{size(wheel)}, within {size(budget.total)}",
                rule="budget",
            )
        )
    if budget.library is not None:
        cap = budget.library
        findings = [
            Finding(f"{size(lib.size)} uncompressed, over the budget of {size(cap)}", file=lib.path)
            for lib in libs
            if lib.size > cap
        ]
        results.append(
            verdict(
                FAMILY,
                "size: budget per library",
                findings,
                f"every library within {size(cap)}",
                rule="budget",
            )
        )
    if budget.arch is not None:
        cap = budget.arch
        per_arch: dict[str, int] = {}
        for lib in libs:
            for arch, n in lib.sass:
                per_arch[arch] = per_arch.get(arch, 0) + n
        findings = [
            Finding(f"SASS for {arch}: {size(n)} over the wheel, over the budget of {size(cap)}", arch=arch)
            for arch, n in sorted(per_arch.items())
            if n > cap
        ]
        results.append(
            verdict(
                FAMILY,
                "size: budget per arch",
                findings,
                f"{count(len(per_arch), 'arch', 'archs')}, each within {size(cap)}",
                rule="budget",
            )
        )
    return results
