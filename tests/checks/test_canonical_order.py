"""Reports do not depend on incidental order (issue 35): the order in which a binary lists its imports and
exports, a zip its members, a scan its native files or a fat binary its entries is not the report's order.

Each test reads a real wheel once, then audits it twice: as read, and with every such sequence reversed
(members, native files, each library's imports, exports and device-code entries). Every renderer's output
must be the same, byte for byte. The second test builds the same DLL twice with its import libraries given to
the linker in the two orders (GNU ld writes a PE's import table in that order) and compares the reports of
two wheels that differ only in that.
"""

from __future__ import annotations

import dataclasses
import shutil
from collections.abc import Callable
from pathlib import Path

import pytest

from cudaship.binary.pe import read_pe
from cudaship.checks.engine import audit_scanned
from cudaship.checks.records import AuditReport, WheelAudit
from cudaship.checks.table import default_policy, load_policy
from cudaship.config import load_config
from cudaship.inspection.scan import ScannedWheel, scan
from cudaship.records.files import FileReport
from cudaship.render import audit_json, audit_junit, audit_markdown, audit_sarif, audit_text
from cudaship.render.style import Style
from tests.fixtures import mingw

REPO = Path(__file__).resolve().parents[2]

pytestmark = pytest.mark.slow

RENDERERS = (
    audit_text.render,
    audit_markdown.render,
    audit_junit.render,
    audit_json.render,
    audit_sarif.render,
)


def _reversed_report(report: FileReport) -> FileReport:
    host = report.host
    if host is not None:
        host = dataclasses.replace(
            host,
            imports=tuple(reversed(host.imports)),
            exports=tuple(reversed(host.exports)),
            undefined_symbols=tuple(reversed(host.undefined_symbols)),
        )
    return dataclasses.replace(report, host=host, device_code=tuple(reversed(report.device_code)))


def _reversed(scanned: ScannedWheel) -> ScannedWheel:
    reports = {k: _reversed_report(v) for k, v in reversed(list(scanned.reports.items()))}
    return dataclasses.replace(scanned, members=tuple(reversed(scanned.members)), reports=reports)


def _render(audit: WheelAudit) -> list[str]:
    report = AuditReport(wheels=(audit,), policy_source="policy.toml")
    return [render(report, Style()) for render in RENDERERS]


def _policy(platform: str):  # type: ignore[no-untyped-def]
    return load_policy(load_config(REPO / "examples" / "policies" / f"{platform}.toml"))


@pytest.mark.parametrize(
    "variant",
    [
        "windows",
        "win_arch_missing",
        "win_missing_export",
        "linux",
        "linux_unused_needed",
        "linux_no_requirement",
    ],
)
def test_reversed_sequences_give_the_same_report(
    variant: str, synthetic_wheel: Callable[[str], Path], monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.chdir(REPO)
    policy = _policy("windows" if variant.startswith("win") else "linux")
    scanned = scan(synthetic_wheel(variant))
    assert any(r.host is not None and len(r.host.imports) > 1 for r in scanned.reports.values())
    as_read = _render(audit_scanned(scanned, policy))
    permuted = _render(audit_scanned(_reversed(scanned), policy))
    for a, b in zip(as_read, permuted, strict=True):
        assert a == b


def test_import_order_of_the_linker_does_not_change_the_report(
    tmp_path: Path, synthetic_wheel: Callable[[str], Path], monkeypatch: pytest.MonkeyPatch
) -> None:
    """The golden tests' failure on a fresh machine: GNU ld orders a DLL's imports by where its import
    libraries lie, so the report's counts followed the test cache's path."""
    monkeypatch.chdir(REPO)
    if shutil.which(mingw.MINGW_GCC) is None or shutil.which(mingw.MINGW_DLLTOOL) is None:
        pytest.skip("mingw-w64 is not installed")
    dlls = [_link(tmp_path / f"order{i}", reverse=bool(i)) for i in (0, 1)]
    orders = [_import_order(d) for d in dlls]
    assert orders[0] == list(reversed(orders[1])) and len(orders[0]) == 2
    # the same synthetic wheel with its shim DLL replaced by each build
    base = scan(synthetic_wheel("windows"))
    shim = "executorch/backends/cuda/aoti_cuda_shims.dll"
    texts = []
    for dll in dlls:
        imports = read_pe(dll.read_bytes()).imports
        reports = dict(base.reports)
        old = reports[shim].host
        assert old is not None
        reports[shim] = dataclasses.replace(reports[shim], host=dataclasses.replace(old, imports=imports))
        texts.append(_render(audit_scanned(dataclasses.replace(base, reports=reports), _policy("windows"))))
    assert texts[0] == texts[1]


def _link(work: Path, *, reverse: bool) -> Path:
    work.mkdir()
    (work / "nvcuda.def").write_text(mingw.NVCUDA_DEF)
    mingw._run([mingw.MINGW_DLLTOOL, "-d", "nvcuda.def", "-l", "libnvcuda.a"], work)
    (work / "src.c").write_text(
        "#include <windows.h>\nint cuInit(unsigned);\n"
        "__declspec(dllexport) int run(void) { Sleep(0); return cuInit(0); }\n"
    )
    # GNU ld orders the import table by the import libraries' paths as given: "./libnvcuda.a" sorts before
    # the toolchain's "/usr/.../libkernel32.a", "libnvcuda.a" after it
    implib = "libnvcuda.a" if reverse else "./libnvcuda.a"
    mingw._run([mingw.MINGW_GCC, "-shared", "-nostdlib", "-o", "x.dll", "src.c", implib, "-lkernel32"], work)
    return work / "x.dll"


def _import_order(dll: Path) -> list[str]:
    return [i.library.lower() for i in read_pe(dll.read_bytes()).imports]


@pytest.mark.parametrize(
    "fixture", ["bitsandbytes_linux_wheel", "bitsandbytes_windows_wheel", "ctranslate2_vendoring_wheel"]
)
def test_real_wheels_reversed_give_the_same_report(fixture: str, request: pytest.FixtureRequest) -> None:
    scanned = scan(request.getfixturevalue(fixture))
    policy = default_policy()
    assert _render(audit_scanned(scanned, policy)) == _render(audit_scanned(_reversed(scanned), policy))
