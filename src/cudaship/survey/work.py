"""One wheel surveyed: :func:`survey_wheel` reads it (:mod:`cudaship.survey.remote`: only what the rows
need), builds the scan's own record from the pieces (:func:`cudaship.inspection.scan.assemble`, as a scan
for :attr:`~cudaship.inspection.scan.Purpose.AUDIT` builds it), runs the audit on it
(:func:`cudaship.checks.engine.audit_scanned`, the default policy) and turns what they found into rows, one
per native library (:data:`cudaship.survey.records.ROW_FIELDS`).

Every engine calls :func:`survey_wheel` (a top-level function: it pickles for process pools, Dask and Ray).
It never raises for bad input: a wheel that cannot be read gives one row whose ``error`` says why.

What the audit reads is what ``cudaship audit`` reads, but for RECORD: the members the survey did not fetch
(and the native members whose facts came from the member cache) are not verified against RECORD, and the
``record`` family's result says so (a skip, never a pass nor a failure; docs/survey.md, "RECORD").
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

from cudaship.analysis.gpus import combine, file_verdicts
from cudaship.checks.context import AuditContext
from cudaship.checks.cuda_content import cuda_evidence
from cudaship.checks.engine import audit_scanned
from cudaship.checks.judgement import vendored_copies
from cudaship.checks.records import WheelAudit
from cudaship.checks.requirements import nvidia_requirements
from cudaship.checks.table import default_policy
from cudaship.errors import CudashipError
from cudaship.http import Unavailable
from cudaship.inspection.report import ArchIndex
from cudaship.inspection.scan import ScannedWheel, assemble, target_platform
from cudaship.knowledge.gpus import default_capabilities
from cudaship.knowledge.platforms import platforms_of_tags
from cudaship.providers.options import ProviderOptions
from cudaship.records.binary import Compression, DeviceCodeKind, FileFormat
from cudaship.records.files import FileReport
from cudaship.survey.records import SurveyOptions, WheelOutcome, WheelRef, empty_row
from cudaship.survey.remote import WheelRead, read_wheel
from cudaship.wheel.metadata import tags_from_filename

__all__ = ["library_columns", "scanned_wheel", "survey_wheel"]

#: formats whose code runs on Linux, on Windows (device code alone: on either, whatever host loads it)
_RUNS_ON: dict[FileFormat | None, tuple[str, ...]] = {
    FileFormat.ELF: ("linux",),
    FileFormat.PE: ("windows",),
    FileFormat.CUBIN: ("linux", "windows"),
    FileFormat.FATBIN: ("linux", "windows"),
    FileFormat.PTX: ("linux", "windows"),
}


def survey_wheel(ref: WheelRef, options: SurveyOptions) -> WheelOutcome:
    """The rows of one wheel, or one error row naming why it could not be read (never raises for bad input:
    an unreachable URL, a truncated file, no zip, no dist-info)."""
    try:
        read = read_wheel(ref, options)
    except CudashipError as e:
        transient = isinstance(e, Unavailable) and bool(e.transient)
        return _failed(ref, e.message, fetched=getattr(e, "fetched_bytes", 0), transient=transient)
    except OSError as e:
        return _failed(ref, f"{ref.url}: {e.strerror or e}")
    except Exception as e:  # a reader's bug must not end a survey of thousands of wheels: this wheel's row
        return _failed(ref, f"{ref.url}: internal error: {type(e).__name__}: {e}")
    try:
        rows = _rows(ref, options, read)
    except CudashipError as e:
        return _failed(ref, e.message, read)
    except Exception as e:
        return _failed(ref, f"{ref.url}: internal error: {type(e).__name__}: {e}", read)
    return WheelOutcome(
        ref,
        rows,
        error=None,
        fetched_bytes=read.fetched_bytes,
        cached_members=len(read.cached),
        read_members=sum(1 for r in read.results if r.report is not None),
    )


def scanned_wheel(read: WheelRead) -> ScannedWheel:
    """The scan's record of the wheel read: what a scan for the audit gives, with the members not read
    named as ``unfetched`` and the cached native members' reports taken as read."""
    platform, notes = target_platform(read.dist, read.ref.filename)
    return assemble(
        read.ref.filename,
        read.ref.filename,
        read.dist,
        read.dist_dir,
        read.members,
        read.verifier,
        read.results,
        platform,
        notes,
        unfetched=read.unfetched,
        known=read.cached,
    )


def _providers(options: SurveyOptions) -> ProviderOptions:
    if options.requirements_index:
        return ProviderOptions(
            index_url=options.requirements_index, cache_dir=Path(options.cache_dir) / "index"
        )
    return ProviderOptions()


def _rows(ref: WheelRef, options: SurveyOptions, read: WheelRead) -> list[dict[str, Any]]:
    scanned = scanned_wheel(read)
    policy = default_policy()
    providers = _providers(options)
    audit: WheelAudit | None = None
    audit_error: str | None = None
    if options.audit:
        try:
            audit = audit_scanned(scanned, policy, providers)
        except CudashipError as e:
            audit_error = e.message
    ctx = AuditContext(scan=scanned, policy=policy, platform=scanned.platform, provider_options=providers)
    wheel = _wheel_columns(ref, read, scanned, ctx, audit, audit_error, options.audit)
    if not scanned.reports:
        return [wheel]
    vendored = {copy.member: copy.provision.project for copy in vendored_copies(ctx)}
    rows = []
    for name, report in scanned.reports.items():
        row = dict(wheel)
        row.update(library_columns(report, scanned.platform.machine))
        row["library"] = name
        row["library_sha256"] = read.sha256.get(name)
        row["vendored_nvidia"] = vendored.get(name)
        row["error"] = read.hash_errors.get(name) or report.error
        rows.append(row)
    return rows


def _wheel_columns(
    ref: WheelRef,
    read: WheelRead | None,
    scanned: ScannedWheel | None,
    ctx: AuditContext | None,
    audit: WheelAudit | None,
    audit_error: str | None,
    audited: bool,
) -> dict[str, Any]:
    row = empty_row()
    row.update(
        wheel_key=ref.key,
        project=ref.project,
        version=ref.version,
        filename=ref.filename,
        url=ref.url,
        wheel_sha256=ref.sha256,
        wheel_size=ref.size if ref.size is not None else (read.size if read is not None else None),
        upload_time=ref.upload_time,
    )
    try:
        tags = tags_from_filename(ref.filename)
    except CudashipError:
        tags = ()
    if tags:
        row["python_tag"] = ref.filename.removesuffix(".whl").split("-")[-3]
        platforms = platforms_of_tags(tags)
        specific = [p for p in platforms if p.os not in ("any", "other")] or list(platforms)
        if specific:
            row["os"], row["machine"] = specific[0].os, specific[0].machine
    if scanned is None or ctx is None:
        return row
    row["os"], row["machine"] = scanned.platform.os, scanned.platform.machine
    row["native_libraries"] = len(scanned.reports)
    own = scanned.declared[0] if scanned.declared else None
    if own is not None and own.error is None:
        prefixes = ctx.policy.requirements.prefixes
        row["declared_nvidia"] = sorted(r.text for r in nvidia_requirements(own.requirements, prefixes))
    if audit is not None:
        facts = audit.facts
        row["train"], row["train_source"], row["cuda_code"] = facts.train, facts.train_source, facts.cuda_code
        summary = audit.summary
        row["audit_errors"], row["audit_warnings"] = summary.failed, summary.warnings
        row["audit_failed"] = sorted({c.name for c in audit.checks if c.is_error})
        row["audit_verdict"] = "fail" if summary.failed else "warn" if summary.warnings else "pass"
        if audit.unreadable:  # damaged members: cudaship audit exits 2 for such a wheel
            row["audit_verdict"] = "error"
    else:
        train = ctx.train
        row["train"], row["train_source"] = (train.version if train else None), ctx.train_source
        row["cuda_code"] = cuda_evidence(ctx) is not None
        if audited:
            row["audit_verdict"] = "error"
            row["audit_failed"] = [f"error: {audit_error}"] if audit_error else []
    return row


def library_columns(report: FileReport, machine: str | None) -> dict[str, Any]:
    """The library columns of one native member's report (all but ``library``, its hash, ``vendored_nvidia``
    and ``error``): linkage, device code per arch, sizes and the minimum drivers ``cudaship gpus`` gives for
    the default GPUs of the wheel's machine."""
    code = [d for d in report.device_code if d.kind in (DeviceCodeKind.SASS, DeviceCodeKind.PTX)]
    archs = ArchIndex(code)
    per_arch: dict[tuple[str, str], int] = {}
    for d in code:
        key = (d.arch, d.kind.value)
        per_arch[key] = per_arch.get(key, 0) + d.stored_size
    order = {
        name: i for i, name in enumerate(archs.names(DeviceCodeKind.SASS) + archs.names(DeviceCodeKind.PTX))
    }
    linkage = report.linkage
    out: dict[str, Any] = {
        "library_size": report.size,
        "format": report.format.value if report.format is not None else None,
        "runtime_linkage": linkage.runtime.value if linkage is not None else None,
        "cudart_major": linkage.cudart_major if linkage is not None else None,
        "sass": list(archs.names(DeviceCodeKind.SASS)),
        "ptx": list(archs.names(DeviceCodeKind.PTX)),
        "ptx_isa": sorted(
            {d.version for d in code if d.kind is DeviceCodeKind.PTX and d.version},
            key=lambda v: tuple(int(p) if p.isdigit() else 0 for p in v.split(".")),
        ),
        "arch_bytes": [
            {"arch": arch, "kind": kind, "bytes": n}
            for (arch, kind), n in sorted(per_arch.items(), key=lambda item: order.get(item[0][0], 0))
        ],
        "compressed": any(d.compression is not Compression.NONE for d in report.device_code),
    }
    capabilities = default_capabilities([machine])
    for platform in ("linux", "windows"):
        minimum = None
        if platform in _RUNS_ON.get(report.format, ()) and report.device_code:
            verdicts = file_verdicts(report, capabilities, platform=platform)
            minimum = combine(None, [verdicts], capabilities).min_driver
        out[f"min_driver_{platform}"] = minimum
    return out


def _failed(
    ref: WheelRef, message: str, read: WheelRead | None = None, *, fetched: int = 0, transient: bool = False
) -> WheelOutcome:
    """The one row of a wheel that could not be read (``fetched``: bytes received before it failed;
    ``transient``: it failed on the network in a way worth one more try, which the engines give it)."""
    row = _wheel_columns(ref, read, None, None, None, None, False)
    row["error"] = message.splitlines()[0] if message else "unreadable"
    received = read.fetched_bytes if read is not None else fetched
    return WheelOutcome(ref, [row], error=row["error"], fetched_bytes=received, transient=transient)
