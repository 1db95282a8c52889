"""``cudaship inspect --format json``: the stable, versioned report (schema in schemas/inspect.schema.json).

See docs/json-schema.md. Bump :data:`SCHEMA_VERSION` on any change that removes or renames a field or changes
its meaning; adding a field is not a change of version.
"""

from __future__ import annotations

import json
from collections.abc import Callable
from typing import Any

from cudaship.binary.records import (
    Compression,
    DeviceCode,
    DeviceCodeKind,
    FatbinContainer,
    HostBinary,
    ImportedSymbol,
)
from cudaship.inspection.records import CudaLinkage, FileReport, WheelInfo
from cudaship.inspection.report import (
    InspectReport,
    WheelReport,
    arch_names,
    cuda_release_for_ptx,
    summary_line,
)

SCHEMA_VERSION = 1

#: Turns an exported symbol into what a user reads (identity unless ``--demangle``).
Demangler = Callable[[list[str]], list[str]]


def render(report: InspectReport, *, exports: bool = True, demangle: Demangler | None = None) -> str:
    """The report as JSON text: keys in a fixed order, on one line (``jq .`` indents it).

    Not indented on purpose: the standard library's C encoder is used only without ``indent``, and a large
    library's report (thousands of device-code entries) encodes 4x faster that way.
    """
    return json.dumps(to_json(report, exports=exports, demangle=demangle), ensure_ascii=False) + "\n"


def to_json(
    report: InspectReport, *, exports: bool = True, demangle: Demangler | None = None
) -> dict[str, Any]:
    from cudaship import __version__

    return {
        "schema": SCHEMA_VERSION,
        "tool": {"name": "cudaship", "version": __version__},
        "inputs": list(report.inputs),
        "ok": not report.failed,
        "files": [_file(f, exports=exports, demangle=demangle) for f in report.files],
        "wheels": [_wheel(w) for w in report.wheels],
    }


def _wheel(wheel: WheelReport) -> dict[str, Any]:
    return {
        "path": wheel.path,
        **(
            _wheel_info(wheel.info)
            if wheel.info
            else {"filename": None, "name": None, "version": None, "local": None, "tags": []}
        ),
        "error": wheel.error,
        "files": [f.path for f in wheel.files if f.container == wheel.path],
        "kind": wheel.kind.value,
        "cuda_train": wheel.cuda_train,
        "train_evidence": wheel.train_evidence,
        "notes": list(wheel.notes),
    }


def _wheel_info(info: WheelInfo) -> dict[str, Any]:
    return {
        "filename": info.filename,
        "name": info.name,
        "version": info.version,
        "local": info.local,
        "tags": list(info.tags),
    }


def _file(f: FileReport, *, exports: bool, demangle: Demangler | None) -> dict[str, Any]:
    host = f.host
    out: dict[str, Any] = {
        "path": f.path,
        "wheel": f.container,
        "format": f.format.value if f.format is not None else None,
        "size": f.size,
        "error": f.error,
        "machine": host.machine.value if host else None,
        "bits": host.bits if host else None,
        "kind": host.kind if host else None,
        "soname": host.soname if host else None,
        "rpath": list(host.rpath) if host else [],
        "runpath": list(host.runpath) if host else [],
        "imports": [i.library for i in host.imports] if host else [],
        "import_details": _imports(host) if host else [],
        "embedded_library_names": list(host.embedded_library_names) if host else [],
        "linkage": _linkage(f.linkage) if f.linkage else None,
        "summary": summary_line(f),
        "sass": list(arch_names(f.device_code, DeviceCodeKind.SASS)),
        "ptx": list(arch_names(f.device_code, DeviceCodeKind.PTX)),
        "ltoir": list(arch_names(f.device_code, DeviceCodeKind.LTOIR)),
        "relocatable": {
            "sass": list(arch_names(f.device_code, DeviceCodeKind.SASS, relocatable=True)),
            "ptx": list(arch_names(f.device_code, DeviceCodeKind.PTX, relocatable=True)),
        },
        "counts": _counts(f.device_code),
        "containers": [_container(c) for c in f.containers],
        "device_code": [_entry(d) for d in f.device_code],
        "notes": list(f.notes),
    }
    if exports:
        names = list(host.exports) if host else []
        out["exports"] = demangle(names) if demangle and names else names
    return out


def _symbol(s: ImportedSymbol) -> dict[str, Any]:
    return {"name": s.name, "ordinal": s.ordinal, "version": s.version}


def _imports(host: HostBinary) -> list[dict[str, Any]]:
    return [
        {"library": i.library, "kind": i.kind.value, "symbols": [_symbol(s) for s in i.symbols]}
        for i in host.imports
    ]


def _linkage(linkage: CudaLinkage) -> dict[str, Any]:
    return {
        "runtime": linkage.runtime.value,
        "cudart_major": linkage.cudart_major,
        "runtime_evidence": list(linkage.runtime_evidence),
        "driver": linkage.driver.value,
        "driver_evidence": list(linkage.driver_evidence),
    }


def _counts(code: tuple[DeviceCode, ...]) -> dict[str, Any]:
    # ``_value_`` is the member's value without going through Enum's ``value`` property: this runs for
    # every entry (thousands in a large library), where the property was a tenth of the rendering time.
    counts: dict[str, int] = {}
    for d in code:
        counts[d.kind._value_] = counts.get(d.kind._value_, 0) + 1
    return {
        "entries": len(code),
        "by_kind": counts,
        "relocatable": sum(1 for d in code if d.relocatable),
        "compressed": sum(1 for d in code if d.compression is not Compression.NONE),
    }


def _container(c: FatbinContainer) -> dict[str, Any]:
    return {
        "offset": c.offset,
        "size": c.size,
        "section": c.section,
        "relocatable": c.relocatable,
        "entries": len(c.entries),
    }


def _entry(d: DeviceCode) -> dict[str, Any]:
    is_ptx = d.kind is DeviceCodeKind.PTX
    return {
        "kind": d.kind._value_,
        "arch": d.arch,
        "sm": d.sm,
        "variant": d.variant,
        "section": d.section,
        "relocatable": d.relocatable,
        "compression": d.compression._value_,
        "stored_size": d.stored_size,
        "uncompressed_size": d.uncompressed_size,
        "offset": d.offset,
        "container_offset": d.container_offset,
        "ptx_isa": d.version if is_ptx else None,
        "cuda_release": cuda_release_for_ptx(d.version) if is_ptx else None,
        "code_version": None if is_ptx else d.version,
        "toolkit_version": d.toolkit_version,
        "host": d.host,
        "debug": d.debug,
        "flags": d.flags,
        "name": d.name,
        "ptxas_options": d.ptxas_options,
    }
