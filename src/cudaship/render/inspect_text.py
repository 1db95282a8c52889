"""``cudaship inspect --format text``: a readable block per file, ending with its summary line."""

from __future__ import annotations

import io

from rich.console import Console
from rich.table import Table
from rich.text import Text

from cudaship.inspection.report import (
    InspectReport,
    WheelReport,
    group_entries,
    summary_line,
    wheel_summary_line,
)
from cudaship.knowledge.releases import cuda_release_for_ptx
from cudaship.records.binary import DeviceCodeKind, HostBinary, ImportKind
from cudaship.records.files import ContainerKind, FileReport
from cudaship.render.console import text_console
from cudaship.render.style import Style
from cudaship.words import byte_count, count

_KIND = {
    DeviceCodeKind.SASS: "SASS",
    DeviceCodeKind.PTX: "PTX",
    DeviceCodeKind.LTOIR: "LTO-IR",
    DeviceCodeKind.UNKNOWN: "unknown",
}
_IMPORT_KIND = {
    ImportKind.NEEDED: "",
    ImportKind.IMPORT: "",
    ImportKind.DELAY: " (delay-load)",
    ImportKind.DYLIB: "",
}
#: Exports listed before "... and N more" (all with --all-exports).
_EXPORTS_SHOWN = 20


def render(report: InspectReport, style: Style) -> str:
    """Layout from ``style``: ``color``, ``width``, ``exports``, ``export_names``, ``demangle`` and
    ``all_exports``. A wheel's members end with the wheel's arch summary (every SASS and PTX arch of its
    members)."""
    buffer = io.StringIO()
    console = text_console(buffer, color=style.color, width=style.width, markup=False)  # styles are Text's
    for item in report.items:
        if isinstance(item, WheelReport):
            _wheel_header(console, item)
            if not item.files:
                console.print("  (no native or device-code files)")
                console.print()
            for member in item.files:
                _file(console, member, style)
            if item.files:
                console.print(Text("wheel summary: ", style="bold") + Text(wheel_summary_line(item)))
                console.print()
        else:
            _file(console, item, style)
    read = len(report.files) - len(report.failed)
    tail = f"{count(len(report.files), 'file')}, {read} read"
    if report.failed:
        tail += f", {len(report.failed)} could not be read"
    console.print(tail)
    return "\n".join(line.rstrip() for line in buffer.getvalue().splitlines()) + "\n"


def _wheel_header(console: Console, wheel: WheelReport) -> None:
    title = Text(f"{wheel.kind.noun} {wheel.path}", style="bold")
    console.print(title)
    if wheel.info is not None:
        info = wheel.info
        local = f" (local tag {info.local})" if info.local else ""
        console.print(f"  {info.name} {info.version}{local}  tags: {', '.join(info.tags) or '-'}")
    if wheel.kind is not ContainerKind.WHEEL and wheel.error is None:
        train = f"{wheel.cuda_train}, from {wheel.train_evidence}" if wheel.cuda_train else "not recorded"
        console.print(f"  CUDA train: {train}")
        for note in wheel.notes:
            console.print(f"  note: {note}")
    console.print()


def _file(console: Console, f: FileReport, style: Style) -> None:
    # a wheel member is shown under its wheel's header, by its path inside the wheel
    fmt = f.format.value if f.format else "?"
    console.print(Text(f.path, style="bold cyan") + Text(f"  [{fmt}, {byte_count(f.size)}]"))
    if f.error is not None:
        console.print(Text(f"  error: {f.error}", style="bold red"))
    host = f.host
    if host is not None:
        _host(console, host, style)
    if f.linkage is not None:
        link = f.linkage
        evidence = "; ".join(link.runtime_evidence)
        console.print(f"  CUDA runtime: {link.runtime.value}" + (f" ({evidence})" if evidence else ""))
        driver = "; ".join(link.driver_evidence)
        console.print(f"  CUDA driver:  {link.driver.value}" + (f" ({driver})" if driver else ""))
    if f.device_code:
        console.print(_entries_table(f))
        relocatable = sum(1 for d in f.device_code if d.relocatable)
        n, m = len(f.device_code), len(f.containers)
        line = f"  {n} {'entry' if n == 1 else 'entries'}"
        if m:
            line += f" in {m} fatbin container{'' if m == 1 else 's'}"
        if relocatable:
            line += f"; {relocatable} relocatable (linked by nvlink, not loaded at run time)"
        console.print(line)
    for note in f.notes:
        console.print(f"  note: {note}")
    console.print(Text("  summary: ", style="bold") + Text(summary_line(f)))
    console.print()


def _host(console: Console, host: HostBinary, style: Style) -> None:
    if host.bits:
        console.print(f"  {host.machine.value} {host.bits}-bit {host.kind}")
    else:  # an archive: no machine of its own
        console.print(f"  {host.kind}")
    if host.soname:
        console.print(f"  soname: {host.soname}")
    if host.rpath:
        console.print(f"  rpath: {':'.join(host.rpath)}")
    if host.runpath:
        console.print(f"  runpath: {':'.join(host.runpath)}")
    if host.imports:
        console.print("  imports:")
        for imp in host.imports:
            n = len(imp.symbols)
            count = f"  [{n} symbol{'' if n == 1 else 's'}]" if n else ""
            console.print(f"    {imp.library}{_IMPORT_KIND[imp.kind]}{count}", markup=False)
    else:
        console.print("  imports: none")
    if host.embedded_library_names:
        console.print(
            f"  library names stored as strings: {', '.join(host.embedded_library_names)}", markup=False
        )
    if style.exports and host.exports and not (style.export_names or style.all_exports):
        console.print(f"  exports: {len(host.exports):,} (-v lists them)")
    elif style.exports and host.exports:
        names = list(host.exports)
        shown = names if style.all_exports else names[:_EXPORTS_SHOWN]
        if style.demangle is not None:
            shown = style.demangle(shown)
        console.print(f"  exports ({len(names):,}):")
        for name in shown:
            console.print(f"    {name}", markup=False)
        if len(shown) < len(names):
            console.print(
                f"    ... and {len(names) - len(shown):,} more (--all-exports lists all, --format json too)"
            )


def _entries_table(f: FileReport) -> Table:
    table = Table(box=None, pad_edge=False, padding=(0, 1), show_edge=False, header_style="bold")
    for name, justify in (
        ("  kind", "left"),
        ("arch", "left"),
        ("count", "right"),
        ("section", "left"),
        ("fatbin", "left"),
        ("compression", "left"),
        ("stored", "right"),
        ("uncompressed", "right"),
        ("version", "left"),
    ):
        table.add_column(name, justify=justify, no_wrap=True)  # type: ignore[arg-type]
    for g in group_entries(f.device_code):
        if g.kind is DeviceCodeKind.PTX and g.version:
            release = cuda_release_for_ptx(g.version)
            version = f"PTX ISA {g.version}" + (f" (CUDA {release})" if release else "")
        elif g.version:
            version = f"code {g.version}"
        else:
            version = ""
        if g.toolkits:
            version += ("; " if version else "") + "toolkit " + ", ".join(g.toolkits)
        if g.kernel_free == g.count:  # (nvlink's empty cubin beside ptxas' in most libraries is not news)
            version += ("; " if version else "") + "no kernel"
        table.add_row(
            f"  {_KIND[g.kind]}",
            g.arch,
            str(g.count),
            g.section or "-",
            "relocatable" if g.relocatable else "executable",
            g.compression,
            f"{g.stored_size:,}",
            f"{g.uncompressed_size:,}" if g.uncompressed_size is not None else "-",
            version,
        )
    return table
