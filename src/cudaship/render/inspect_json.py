"""``cudaship inspect --format json``: the stable, versioned report (schema in schemas/inspect.schema.json).

See docs/json-schema.md. Bump :data:`SCHEMA_VERSION` on any change that removes or renames a field or changes
its meaning; adding a field is not a change of version.
"""

from __future__ import annotations

import json
from collections.abc import Callable
from typing import Any

from cudaship import __version__
from cudaship.inspection.report import (
    ArchIndex,
    InspectReport,
    WheelReport,
    summary_line,
)
from cudaship.knowledge.releases import cuda_release_for_ptx
from cudaship.records.binary import (
    Compression,
    DeviceCode,
    DeviceCodeKind,
    FatbinContainer,
    HostBinary,
    ImportedSymbol,
)
from cudaship.records.files import CudaLinkage, FileReport, WheelInfo
from cudaship.render.jsonify import fields, pick
from cudaship.render.style import Style

SCHEMA_VERSION = 1

#: Turns an exported symbol into what a user reads (identity unless ``--demangle``).
Demangler = Callable[[list[str]], list[str]]


def render(report: InspectReport, style: Style) -> str:
    """The report as JSON text: keys in a fixed order, on one line (``jq .`` indents it); layout from
    ``style``: ``exports`` (list exported symbols) and ``demangle``.

    Exactly ``json.dumps(to_json(report, exports=..., demangle=...), ensure_ascii=False)`` and a newline,
    written faster: each file's device-code entries, containers and exported names (thousands of them in a
    large library, most of its bytes) are written by :func:`_entries`, :func:`_containers` and
    :func:`_strings`, everything else by the standard library's C encoder (used only without ``indent``: not
    indented on purpose).
    """
    head, files, wheels = _report_parts(report)
    parts = [_ENCODER.encode(head)[:-1], ', "files": [']
    for i, f in enumerate(files):
        if i:
            parts.append(", ")
        _encode_file(parts, f, exports=style.exports, demangle=style.demangle)
    parts += ('], "wheels": ', _ENCODER.encode(wheels), "}\n")
    return "".join(parts)


def to_json(
    report: InspectReport, *, exports: bool = True, demangle: Demangler | None = None
) -> dict[str, Any]:
    head, files, wheels = _report_parts(report)
    return {
        **head,
        "files": [_file(f, exports=exports, demangle=demangle) for f in files],
        "wheels": wheels,
    }


#: ``json.dumps(x, ensure_ascii=False)`` is ``_ENCODER.encode(x)`` (same options; one encoder, not one a call)
_ENCODER = json.JSONEncoder(ensure_ascii=False)


def _report_parts(
    report: InspectReport,
) -> tuple[dict[str, Any], tuple[FileReport, ...], list[dict[str, Any]]]:
    """The keys before ``files``, the files, and the value of ``wheels`` (the last key)."""
    head = {
        "schema": SCHEMA_VERSION,
        "tool": {"name": "cudaship", "version": __version__},
        "inputs": list(report.inputs),
        "ok": not report.failed,
    }
    return head, tuple(report.files), [_wheel(w) for w in report.wheels]


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
    return fields(info)


def _file(f: FileReport, *, exports: bool, demangle: Demangler | None) -> dict[str, Any]:
    head, tail = _file_parts(f, exports=exports, demangle=demangle)
    return {
        **head,
        "containers": [_container(c) for c in f.containers],
        "device_code": [_entry(d) for d in f.device_code],
        **tail,
    }


def _encode_file(parts: list[str], f: FileReport, *, exports: bool, demangle: Demangler | None) -> None:
    """Append the pieces of ``json.dumps(_file(f, ...), ensure_ascii=False)`` to ``parts``."""
    head, tail = _file_parts(f, exports=exports, demangle=demangle)
    parts += (
        _ENCODER.encode(head)[:-1],
        ', "containers": ',
        _containers(f.containers),
        ', "device_code": ',
        _entries(f.device_code),
    )
    for key, value in tail.items():
        parts += (", ", _ENCODER.encode(key), ": ")
        _strings(parts, value)
    parts.append("}")


def _file_parts(
    f: FileReport, *, exports: bool, demangle: Demangler | None
) -> tuple[dict[str, Any], dict[str, list[str]]]:
    """A file's keys before ``containers``, and those after ``device_code`` (lists of strings)."""
    host = f.host
    archs = ArchIndex(f.device_code)
    head: dict[str, Any] = {
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
        "summary": summary_line(f, archs),
        "sass": list(archs.names(DeviceCodeKind.SASS)),
        "ptx": list(archs.names(DeviceCodeKind.PTX)),
        "ltoir": list(archs.names(DeviceCodeKind.LTOIR)),
        "relocatable": {
            "sass": list(archs.names(DeviceCodeKind.SASS, relocatable=True)),
            "ptx": list(archs.names(DeviceCodeKind.PTX, relocatable=True)),
        },
        "counts": _counts(f.device_code),
    }
    tail = {"notes": list(f.notes)}
    if exports:
        names = list(host.exports) if host else []
        tail["exports"] = demangle(names) if demangle and names else names
    return head, tail


#: Bytes of a UTF-8 string that ``json.dumps`` would escape, but for the quote (counted apart): control
#: characters and the backslash map to 1, every other byte to 0.
_MUST_ESCAPE = bytes(1 if b < 0x20 or b == 0x5C else 0 for b in range(256))


def _strings(parts: list[str], items: list[str]) -> None:
    """Append the pieces of ``json.dumps(items, ensure_ascii=False)`` for a list of strings (21,000 exported
    names in libtorch_cuda.so) to ``parts``. A string with nothing to escape is written as it is, between
    quotes; the C encoder checks every character one at a time, this checks all the names at once (quotes
    counted, the rest looked up in :data:`_MUST_ESCAPE`), and leaves lists that need escaping, or hold
    anything but strings, to the encoder."""
    try:
        joined = '", "'.join(items)
    except TypeError:
        joined = None
    if (
        items
        and joined is not None
        and joined.count('"') == 2 * (len(items) - 1)
        and 1 not in joined.encode("utf-8", "surrogatepass").translate(_MUST_ESCAPE)
    ):
        parts += ('["', joined, '"]')
    else:
        parts.append(_ENCODER.encode(items))


def _containers(containers: tuple[FatbinContainer, ...]) -> str:
    """``json.dumps([_container(c) for c in containers], ensure_ascii=False)``."""
    sections: dict[str | None, str] = {}
    parts = []
    for c in containers:
        section = sections.get(c.section)
        if section is None:
            section = sections[c.section] = _ENCODER.encode(c.section)
        parts.append(
            f'{{"offset": {c.offset:d}, "size": {c.size:d}, "section": {section}, '
            f'"relocatable": {"true" if c.relocatable else "false"}, "entries": {len(c.entries):d}}}'
        )
    return f"[{', '.join(parts)}]"


def _entries(code: tuple[DeviceCode, ...]) -> str:
    """``json.dumps([_entry(d) for d in code], ensure_ascii=False)``.

    The keys before ``stored_size`` and those after ``container_offset`` take few distinct values in a
    library (kind, arch, section, version, flags, ...): each distinct run of them is encoded once by the C
    encoder and reused; only the sizes and offsets are written for every entry.
    """
    heads: dict[tuple[Any, ...], str] = {}
    tails: dict[tuple[Any, ...], str] = {}
    parts = []
    for d in code:
        head_key = (d.kind, d.arch, d.sm, d.variant, d.section, d.relocatable, d.compression)
        head = heads.get(head_key)
        if head is None:
            head = heads[head_key] = _ENCODER.encode(_entry_head(d))[:-1] + ', "stored_size": '
        tail_key = (
            d.kind,
            d.version,
            d.toolkit_version,
            d.host,
            d.debug,
            d.flags,
            d.name,
            d.ptxas_options,
            d.kernels,
        )
        tail = tails.get(tail_key)
        if tail is None:
            tail = tails[tail_key] = ", " + _ENCODER.encode(_entry_tail(d))[1:]
        size = d.uncompressed_size
        container = d.container_offset
        parts.append(
            f"{head}{d.stored_size:d}, "
            f'"uncompressed_size": {"null" if size is None else format(size, "d")}, '
            f'"offset": {d.offset:d}, '
            f'"container_offset": {"null" if container is None else format(container, "d")}{tail}'
        )
    return f"[{', '.join(parts)}]"


def _symbol(s: ImportedSymbol) -> dict[str, Any]:
    return {"name": s.name, "ordinal": s.ordinal, "version": s.version}


def _imports(host: HostBinary) -> list[dict[str, Any]]:
    return [
        {"library": i.library, "kind": i.kind.value, "symbols": [_symbol(s) for s in i.symbols]}
        for i in host.imports
    ]


def _linkage(linkage: CudaLinkage) -> dict[str, Any]:
    return fields(linkage)


def _counts(code: tuple[DeviceCode, ...]) -> dict[str, Any]:
    # ``_value_`` is the member's value without going through Enum's ``value`` property: this runs for
    # every entry (thousands in a large library), where the property was a tenth of the rendering time.
    # One pass over the entries for all four counts.
    counts: dict[str, int] = {}
    relocatable = compressed = 0
    uncompressed = Compression.NONE
    for d in code:
        kind = d.kind._value_
        counts[kind] = counts.get(kind, 0) + 1
        if d.relocatable:
            relocatable += 1
        if d.compression is not uncompressed:
            compressed += 1
    by_kind = {
        kind.value: counts[kind.value] for kind in DeviceCodeKind if kind.value in counts
    }  # fixed order
    return {"entries": len(code), "by_kind": by_kind, "relocatable": relocatable, "compressed": compressed}


def _container(c: FatbinContainer) -> dict[str, Any]:
    return {**pick(c, "offset", "size", "section", "relocatable"), "entries": len(c.entries)}


def _entry(d: DeviceCode) -> dict[str, Any]:
    return {
        **_entry_head(d),
        **pick(d, "stored_size", "uncompressed_size", "offset", "container_offset"),
        **_entry_tail(d),
    }


def _entry_head(d: DeviceCode) -> dict[str, Any]:
    """An entry's keys before ``stored_size``."""
    return pick(d, "kind", "arch", "sm", "variant", "section", "relocatable", "compression")


def _entry_tail(d: DeviceCode) -> dict[str, Any]:
    """An entry's keys after ``container_offset``."""
    is_ptx = d.kind is DeviceCodeKind.PTX
    return {
        "ptx_isa": d.version if is_ptx else None,
        "cuda_release": cuda_release_for_ptx(d.version) if is_ptx else None,
        "code_version": None if is_ptx else d.version,
        **pick(d, "toolkit_version", "host", "debug", "flags", "name", "ptxas_options", "kernels"),
    }
