"""``cudaship variant make``: a plain CUDA wheel made a variant wheel (PEP 825) whose ``nvidia`` properties
are the ones its binaries justify (:func:`cudaship.checks.variant_props.justified`): the same members, copied
as their compressed bytes, a ``.dist-info/variant.json`` added, RECORD rewritten with its row, the label added
to the file name. Written deterministically through :mod:`cudaship.repair.zipwrite`, atomically into ``-w``.
"""

from __future__ import annotations

import hashlib
from dataclasses import replace
from pathlib import Path

from cudaship import safe_write
from cudaship.archive.zip import ZipFile
from cudaship.checks.context import AuditContext
from cudaship.checks.table import default_policy
from cudaship.checks.variant_props import PropertiesReport, properties_report
from cudaship.errors import ArchiveError, WheelError
from cudaship.inspection.scan import scan
from cudaship.knowledge.variant_provider import nvidia
from cudaship.records.files import ContainerKind
from cudaship.repair.zipwrite import DEFLATED, STORED, Entry, write_zip
from cudaship.wheel.metadata import b64_digest
from cudaship.wheel.records import VariantProvider
from cudaship.wheel.variant import LABEL, VARIANT_JSON, split_label, variant_json_bytes
from cudaship.wheel.write import record_bytes


def default_label(ctx: AuditContext) -> str:
    """``cu128`` for a wheel of CUDA train 12.8 (its tag, ``--train`` or inferred), else ``cuda``."""
    train = ctx.train
    return train.tag if train is not None else "cuda"


def make_variant(
    path: Path, directory: Path, label: str | None = None, *, workers: int | None = None
) -> tuple[Path, PropertiesReport]:
    """Write the variant of the wheel at ``path`` into ``directory``; its path and the properties written."""
    scanned = scan(path, workers=workers)
    if scanned.kind is not ContainerKind.WHEEL:
        raise WheelError("not a wheel", path=str(path))
    if scanned.dist.variant is not None:
        raise WheelError(f"already a variant wheel (label {scanned.dist.variant.label!r})", path=str(path))
    if scanned.record_problems or scanned.unreadable:
        why = scanned.record_problems[0].message if scanned.record_problems else scanned.unreadable[0][1]
        raise WheelError(f"RECORD disagrees with the wheel ({why}): not rewritten", path=str(path))
    ctx = AuditContext(scan=scanned, policy=default_policy(), platform=scanned.platform)
    chosen = label or default_label(ctx)
    if not LABEL.fullmatch(chosen) or chosen == "null":
        raise WheelError(f"variant label {chosen!r}: a label is made of 0-9, a-z, _ and . (and not 'null')")
    report = properties_report(ctx)
    if not report.justified:
        raise WheelError(
            "no CUDA runtime and no device code: nothing to declare (this is a null variant)", path=str(path)
        )
    p = nvidia()
    # no ``enable-if``: uv 0.13.9, the one installer on PyPI that implements variants, refuses a provider
    # entry with one ("data did not match any variant of untagged enum ProviderKind", docs/variants.md); the
    # provider plugin itself answers nothing on a platform it does not serve
    provider = VariantProvider(p.namespace, (p.requires,), None, p.plugin_api)
    data = variant_json_bytes(chosen, tuple(j.property for j in report.justified), (provider,))
    base, _ = split_label(path.name)
    target = directory / f"{base[: -len('.whl')]}-{chosen}.whl"
    dist = scanned.dist.directory
    directory.mkdir(parents=True, exist_ok=True)
    with safe_write.new_file(target, error=WheelError) as out:
        try:
            with ZipFile(path) as archive:
                entries: list[Entry] = []
                rows: list[tuple[str, str, str | int]] = []
                skip = {
                    f"{dist}/RECORD",
                    f"{dist}/RECORD.jws",
                    f"{dist}/RECORD.p7s",
                    f"{dist}/{VARIANT_JSON}",
                }
                for m in archive.files():
                    if m.name in skip:
                        continue
                    archive.check(m)
                    digest = hashlib.sha256()
                    if m.method in (STORED, DEFLATED):
                        for chunk in archive.chunks(m):
                            digest.update(chunk)
                        raw = memoryview(archive.buf)[m.data_offset : m.data_offset + m.compressed_size]
                        entries.append(
                            Entry(m.name, m.mode, raw=raw, method=m.method, crc=m.crc, size=m.size)
                        )
                    else:
                        whole = b"".join(archive.chunks(m))
                        digest.update(whole)
                        entries.append(Entry(m.name, m.mode, data=whole))
                    rows.append((m.name, "sha256=" + b64_digest(digest.digest()), m.size))
                name = f"{dist}/{VARIANT_JSON}"
                entries.append(Entry(name, 0o644, data=data))
                rows.append((name, "sha256=" + b64_digest(hashlib.sha256(data).digest()), len(data)))
                rows.append((f"{dist}/RECORD", "", ""))
                entries.append(Entry(f"{dist}/RECORD", 0o644, data=record_bytes(rows)))
                write_zip(out.file, entries)
        except ArchiveError as e:
            raise WheelError(e.message, path=str(path)) from None
        out.place()
    declared = tuple(j.property.text for j in report.justified)
    return target, replace(report, wheel=target.name, label=chosen, declared=declared)
