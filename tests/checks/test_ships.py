"""ships family on hand-built records: required globs, import libraries paired with their DLLs."""

from __future__ import annotations

from cudaship.records.binary import FileFormat, Import, ImportKind
from cudaship.records.files import FileReport
from cudaship.records.findings import Status
from tests.checks.handmade import by_name, context, host, library, run


def _implib(path: str, dll: str) -> FileReport:
    binary = host(FileFormat.COFF_IMPORT_LIBRARY, imports=[Import(dll, ImportKind.IMPORT)])
    return FileReport(path=path, format=FileFormat.COFF_IMPORT_LIBRARY, size=10, host=binary)


def test_required_globs() -> None:
    policy = {"ships": {"required": ["pkg/lib/*.dll", "pkg/missing.pyd"]}}
    ctx = context([library("pkg/lib/a.dll", host(FileFormat.PE))], platform="windows", policy=policy)
    results = by_name(run(ctx, "ships"))
    assert results["ships: pkg/lib/*.dll"].status is Status.PASS
    missing = results["ships: pkg/missing.pyd"]
    assert missing.status is Status.FAIL and missing.evidence[0].file == "pkg/missing.pyd"


def test_import_library_pairs() -> None:
    ctx = context(
        [
            library("pkg/a.dll", host(FileFormat.PE)),
            _implib("pkg/a.lib", "a.dll"),
            _implib("pkg/b.lib", "b.dll"),
            library("pkg/c.dll", host(FileFormat.PE)),
            _implib("pkg/c.lib", "other.dll"),
        ],
        platform="windows",
        policy={"ships": {"required": []}},
    )
    results = by_name(run(ctx, "ships"))
    assert results["ships: import library pkg/a.lib"].status is Status.PASS
    assert results["ships: import library pkg/b.lib"].reason == "pkg/b.lib ships without its DLL pkg/b.dll"
    wrong = results["ships: import library pkg/c.lib"]
    assert wrong.status is Status.FAIL and "names other.dll, not c.dll" in wrong.reason
