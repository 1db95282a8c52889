"""``inspect --format json`` writes the bytes of ``json.dumps(to_json(report), ensure_ascii=False)``.

The renderer writes device-code entries, containers and exported names itself (faster than the C encoder on
a large library), so it is checked against the plain encoding: on real nvcc builds, and on reports carrying
every string a JSON encoder has to escape (quotes, backslashes, control characters, non-ASCII, a lone
surrogate), ``None`` where a value may be missing, and values shared or not between entries.
"""

from __future__ import annotations

import dataclasses
import json
from collections.abc import Callable, Iterable
from pathlib import Path

import pytest

from cudaship.inspection.report import ArchIndex, InspectReport
from cudaship.inspection.walk import inspect_paths
from cudaship.knowledge.archs import sort_arch_names
from cudaship.records.binary import Compression, DeviceCode, DeviceCodeKind
from cudaship.render import inspect_json
from cudaship.render.style import Style

Build = Callable[[str], Path]

BUILDS = ["multi_arch", "ptx_only", "relocatable", "fatbin_debug", "fatbin_ptxas_options", "static_lib_rdc"]
AWKWARD = ['say "hi"', "back\\slash", "tab\there", "nul\0", "line\nfeed", "é ü 中", "\x7f", "\ud800", ""]


def plain(report: InspectReport, **options: object) -> str:
    return json.dumps(inspect_json.to_json(report, **options), ensure_ascii=False) + "\n"  # type: ignore[arg-type]


def check(report: InspectReport) -> None:
    def shout(names: list[str]) -> list[str]:
        return [n.upper() for n in names]

    for options in ({}, {"exports": False}, {"demangle": shout}):
        style = Style(**options)  # type: ignore[arg-type]
        assert inspect_json.render(report, style) == plain(report, **options)  # type: ignore[arg-type]


@pytest.fixture(scope="module")
def real(nvcc_builds: dict[str, Path]) -> InspectReport:
    return inspect_paths([str(nvcc_builds[name]) for name in BUILDS])


def test_real_builds_render_as_the_plain_encoding(real: InspectReport) -> None:
    assert sum(len(f.device_code) for f in real.files) > 10
    assert any(e.name for f in real.files for e in f.device_code), "fatbin_debug names its entries"
    assert any(e.ptxas_options for f in real.files for e in f.device_code)
    assert any(e.relocatable for f in real.files for e in f.device_code)
    check(real)


def test_awkward_strings_render_as_the_plain_encoding(real: InspectReport) -> None:
    files = []
    for i, f in enumerate(real.files):
        code = tuple(
            dataclasses.replace(
                e,
                name=AWKWARD[j % len(AWKWARD)] if j % 3 else e.name,
                ptxas_options=AWKWARD[(j + 1) % len(AWKWARD)] if j % 2 else None,
                section=AWKWARD[j % len(AWKWARD)] if j % 5 == 1 else e.section if j % 5 else None,
                toolkit_version="13.0" if j % 4 == 0 else None,
                uncompressed_size=None if j % 2 else 4096 + j,
                container_offset=None if j % 3 == 2 else e.container_offset,
                compression=Compression.ZSTD if j % 2 == 0 else e.compression,
                host=AWKWARD[j % len(AWKWARD)] if j % 7 == 3 else e.host,
            )
            for j, e in enumerate(f.device_code)
        )
        containers = tuple(
            dataclasses.replace(c, section=AWKWARD[j % len(AWKWARD)] if j % 2 else None)
            for j, c in enumerate(f.containers)
        )
        host = f.host
        if host is not None:
            exports = (*host.exports, *AWKWARD) if i % 2 else tuple(f"clean_{n}" for n in range(500))
            host = dataclasses.replace(host, exports=exports)
        notes = (*AWKWARD, "note") if i % 2 else ()
        files.append(dataclasses.replace(f, device_code=code, containers=containers, host=host, notes=notes))
    awkward = dataclasses.replace(real, files=tuple(files), inputs=(*real.inputs, 'in "put"'))
    check(awkward)
    for name in AWKWARD:  # each string alone, where the fast path for lists of names sees it
        f = files[0]
        assert f.host is not None
        lonely = dataclasses.replace(f, host=dataclasses.replace(f.host, exports=("a", name, "b")))
        check(dataclasses.replace(real, files=(lonely,)))


def test_empty_report() -> None:
    check(InspectReport(inputs=(), files=()))


def arch_names(
    device_code: Iterable[DeviceCode], kind: DeviceCodeKind, *, relocatable: bool | None = None
) -> tuple[str, ...]:
    """The plain definition the one-pass index must agree with: sorted unique arch names of one kind."""
    return tuple(
        sort_arch_names(
            {
                d.arch
                for d in device_code
                if d.kind is kind and (relocatable is None or d.relocatable is relocatable)
            }
        )
    )


def test_arch_index_is_arch_names(real: InspectReport) -> None:
    for f in real.files:
        table = ArchIndex(f.device_code)
        for kind in DeviceCodeKind:
            for relocatable in (None, False, True):
                assert table.names(kind, relocatable=relocatable) == arch_names(
                    f.device_code, kind, relocatable=relocatable
                )
