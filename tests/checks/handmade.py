"""Hand-built audit inputs: an :class:`AuditContext` made from records written in the test, no wheel, no
reader. Each check family's unit tests (tests/checks/test_<family>.py) build exactly the facts they need.

    ctx = context(libs={"pkg/lib/libfoo.so": elf(imports=["libcudart.so.13"], exports=["foo"])},
                  version="1.0+cu130", requires=["nvidia-cuda-runtime>=13,<14"])
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from typing import Any

from cudaship.checks.context import AuditContext
from cudaship.checks.engine import with_severity
from cudaship.checks.policy import Policy
from cudaship.checks.table import FAMILIES, default_policy, parse_audit_table
from cudaship.checks.variants import mark_alternatives
from cudaship.inspection.scan import MemberFacts, ScannedWheel, declared_requirements, target_platform
from cudaship.knowledge.trains import Train
from cudaship.records.binary import (
    Compression,
    DeviceCode,
    DeviceCodeKind,
    FileFormat,
    HostBinary,
    Import,
    ImportedSymbol,
    ImportKind,
    Machine,
)
from cudaship.records.files import CudaLinkage, DriverAccess, FileReport, RuntimeLinkage
from cudaship.records.findings import CheckResult
from cudaship.wheel.metadata import install_path
from cudaship.wheel.records import (
    DistInfo,
    Metadata,
    PythonLoads,
    RecordEntry,
    RecordProblem,
    WheelFile,
    WheelVariant,
)

TAGS = {
    "linux": "cp312-cp312-manylinux_2_28_x86_64",
    "windows": "cp312-cp312-win_amd64",
    "aarch64": "cp312-cp312-manylinux_2_28_aarch64",
    "macos": "cp312-cp312-macosx_14_0_arm64",
}


def sass(
    arch: str, *, relocatable: bool = False, toolkit: str | None = None, kernels: int | None = None
) -> DeviceCode:
    number = int(arch.split("_")[1].rstrip("af"))
    return DeviceCode(
        DeviceCodeKind.SASS,
        arch,
        number,
        arch[-1] if arch[-1] in "af" else "",
        ".nv_fatbin" if not relocatable else "__nv_relfatbin",
        relocatable,
        Compression.NONE,
        100,
        100,
        0,
        toolkit_version=toolkit,
        kernels=kernels,
    )


def ptx(arch: str, *, relocatable: bool = False, isa: str | None = None) -> DeviceCode:
    number = int(arch.split("_")[1].rstrip("af"))
    return DeviceCode(
        DeviceCodeKind.PTX,
        arch,
        number,
        "",
        ".nv_fatbin" if not relocatable else "__nv_relfatbin",
        relocatable,
        Compression.NONE,
        100,
        100,
        0,
        version=isa,
    )


def host(
    fmt: FileFormat = FileFormat.ELF,
    *,
    imports: Iterable[str | Import] = (),
    exports: Iterable[str] = (),
    undefined: Iterable[str] = (),
    soname: str | None = None,
    runpath: Iterable[str] = (),
    embedded: Iterable[str] = (),
) -> HostBinary:
    kind = ImportKind.NEEDED if fmt is FileFormat.ELF else ImportKind.IMPORT
    return HostBinary(
        format=fmt,
        machine=Machine.X86_64,
        bits=64,
        kind="shared-library",
        soname=soname,
        runpath=tuple(runpath),
        imports=tuple(i if isinstance(i, Import) else Import(i, kind) for i in imports),
        exports=tuple(exports),
        undefined_symbols=tuple(ImportedSymbol(s) for s in undefined),
        embedded_library_names=tuple(embedded),
    )


def library(
    path: str,
    binary: HostBinary | None = None,
    *,
    device: Iterable[DeviceCode] = (),
    cudart: int | None = None,
    error: str | None = None,
) -> FileReport:
    binary = binary or host()
    linkage = None
    if cudart is not None:
        linkage = CudaLinkage(
            RuntimeLinkage.DYNAMIC, cudart, (f"imports cudart {cudart}",), DriverAccess.NONE, ()
        )
    return FileReport(
        path=path,
        format=binary.format,
        size=1000,
        container="pkg.whl",
        host=binary,
        linkage=linkage,
        device_code=tuple(device),
        error=error,
    )


def context(
    libs: Mapping[str, FileReport] | Iterable[FileReport] = (),
    *,
    files: Iterable[str] = (),
    name: str = "pkg",
    version: str = "1.0",
    requires: Iterable[str] = (),
    platform: str = "linux",
    policy: Policy | Mapping[str, Any] | None = None,
    record_problems: Iterable[RecordProblem] = (),
    unreadable: Iterable[tuple[str, str]] = (),
    train: Train | None = None,
    variant: WheelVariant | None = None,
    python: Iterable[PythonLoads] = (),
) -> AuditContext:
    """A context for one hand-built wheel: ``libs`` (native files by path in the wheel), other ``files``,
    METADATA fields and a policy (a :class:`Policy`, an ``[audit]`` mapping, or None for the default)."""
    reports = dict(libs) if isinstance(libs, Mapping) else {r.path: r for r in libs}
    local = version.split("+", 1)[1] if "+" in version else None
    dist_dir = f"{name}-{version}.dist-info"
    tag = TAGS[platform]
    dist = DistInfo(
        directory=dist_dir,
        metadata=Metadata(name, version, local, tuple(requires)),
        wheel=WheelFile("1.0", False, (tag,)),
        # one digest per path: hand-made files are not byte copies of each other (the closure family merges
        # copies, which it finds by RECORD's digest)
        record=tuple(RecordEntry(p, "sha256", f"x-{p}", 1) for p in [*reports, *files]),
        record_path=f"{dist_dir}/RECORD",
        variant=variant,
    )
    members = tuple(
        MemberFacts(p, 1000, 500, install_path(p, dist_dir) or p)
        for p in [*reports, *files, f"{dist_dir}/METADATA"]
    )
    filename = f"{name}-{version}-{tag}{'-' + variant.label if variant else ''}.whl"
    target, notes = target_platform(dist, filename)
    scan = ScannedWheel(
        path=f"/tmp/{filename}",
        filename=filename,
        dist=dist,
        members=members,
        reports=reports,
        record_problems=tuple(record_problems),
        unreadable=tuple(unreadable),
        platform=target,
        platform_notes=notes,
        declared=declared_requirements(dist, target),
        python_loads=tuple(python),
    )
    if policy is None:
        policy = default_policy()
    elif not isinstance(policy, Policy):
        policy = parse_audit_table(policy, "test.toml")
    return AuditContext(
        scan=scan,
        policy=policy,
        platform=scan.platform,
        notes=list(scan.platform_notes),
        train_override=train,
    )


def run(ctx: AuditContext, family: str) -> list[CheckResult]:
    """One family's results, with rules and severities as the engine sets them."""
    (row,) = [f for f in FAMILIES if f.name == family]
    return [with_severity(r, ctx.policy) for r in mark_alternatives(ctx, row.run(ctx))]


def by_name(results: Iterable[CheckResult]) -> dict[str, CheckResult]:
    out: dict[str, CheckResult] = {}
    for r in results:
        assert r.name not in out, f"duplicate check name {r.name}"
        out[r.name] = r
    return out
