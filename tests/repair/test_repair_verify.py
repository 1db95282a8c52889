"""Repair's output is verified (issue 30): the written wheel is read back before it is placed, and a writer
that does not do what the report says (a member dropped, a removal skipped, a requirement left out, a bad
RECORD row, an edit not applied, a bootstrap not added) gives one line naming the wheel and the claim,
exit 70, and nothing in ``-w``.

The writers are broken by monkeypatching ``cudaship.repair.run``'s own steps on real wheels (the nvcc-built
extension auditwheel vendored libcudart into, and the mingw-built Windows wheel delvewheel-style); the
wheels that are written are read back with zipfile and csv in the other repair tests."""

from __future__ import annotations

import base64
import csv
import dataclasses
import hashlib
import io
import json
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import jsonschema
import pytest

from cudaship.cli.main import main
from cudaship.exitcodes import ExitCode
from cudaship.repair import run
from cudaship.repair.zipwrite import Entry

pytestmark = pytest.mark.slow

SCHEMA = json.loads(
    (Path(__file__).resolve().parents[2] / "src/cudaship/render/schemas/repair.schema.json").read_text()
)
DIST = "cudemo-1.0.dist-info"
INIT = "cudemo/__init__.py"


def _repair_json(
    wheel: Path, out: Path, capsys: pytest.CaptureFixture[str]
) -> tuple[int, dict[str, Any], str]:
    code = main(["repair", str(wheel), "-w", str(out), "-f", "json"])
    captured = capsys.readouterr()
    doc = json.loads(captured.out)
    jsonschema.validate(doc, SCHEMA)
    (result,) = doc["wheels"]
    return code, result, captured.err


def _refused(wheel: Path, out: Path, capsys: pytest.CaptureFixture[str], claim: str) -> dict[str, Any]:
    """The repair of ``wheel`` is refused for ``claim``: exit 70, one line naming the wheel and the claim,
    nothing in ``out`` (neither the wheel nor a temporary file)."""
    code, result, err = _repair_json(wheel, out, capsys)
    assert code == ExitCode.INTERNAL, (code, err)
    lines = [line for line in err.splitlines() if line.strip()]
    assert len(lines) == 1, err
    assert lines[0].startswith(f"cudaship: error: {wheel}: the repaired wheel does not match its report"), err
    assert claim in lines[0], err
    assert "Traceback" not in err
    assert (sorted(p.name for p in out.iterdir()) if out.exists() else []) == []
    assert result["output"] is None
    assert result["verification"]["failed"] and claim in result["verification"]["failed"][0]
    return result


def _b64(data: bytes) -> str:
    return base64.urlsafe_b64encode(hashlib.sha256(data).digest()).rstrip(b"=").decode()


def _with_member(entries: list[Entry], name: str, data: bytes | None) -> list[Entry]:
    """``entries`` with ``name``'s bytes replaced by ``data`` (None: left out), and RECORD rewritten to
    agree: only the claim about that member can catch it."""
    out = [e for e in entries if e.name != name]
    if data is not None:
        old = next(e for e in entries if e.name == name)
        out.insert(entries.index(old), Entry(name, old.mode, data=data))
    record = next(e for e in out if e.name == f"{DIST}/RECORD")
    assert record.data is not None
    rows = [r for r in csv.reader(io.StringIO(record.data.decode())) if r[0] != name]
    if data is not None:
        rows.insert(0, [name, "sha256=" + _b64(data), str(len(data))])
    text = io.StringIO()
    csv.writer(text, lineterminator="\n").writerows(rows)
    return [Entry(e.name, e.mode, data=text.getvalue().encode()) if e is record else e for e in out]


def _tamper_entries(monkeypatch: pytest.MonkeyPatch, change: Callable[[list[Entry]], list[Entry]]) -> None:
    original = run._entries

    def entries(archive: Any, plan: Any, work: Any) -> tuple[list[Entry], int]:
        got, total = original(archive, plan, work)
        return change(got), total

    monkeypatch.setattr(run, "_entries", entries)


# --- real wheels: written, read back, every claim holds -----------------------------------------------------


def test_linux_repair_is_read_back_and_holds(
    auditwheel_vendored: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    code, result, _ = _repair_json(auditwheel_vendored, tmp_path, capsys)
    assert code == 0
    verification = result["verification"]
    # 1 dist-info, 1 RECORD, 1 removed, the kept members, 3 DT_NEEDED/RPATH, 1 requirement, 2 METADATA
    assert verification["failed"] == [] and verification["checked"] >= 9
    assert Path(result["output"]).is_file()


def test_windows_repair_is_read_back_and_holds(
    windows_vendored_wheel: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    code, result, _ = _repair_json(windows_vendored_wheel, tmp_path, capsys)
    assert code == 0
    assert result["verification"]["failed"] == [] and result["verification"]["checked"] >= 8


def test_unchanged_copy_is_read_back(
    auditwheel_vendored: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    _, first, _ = _repair_json(auditwheel_vendored, tmp_path / "a", capsys)
    code, again, _ = _repair_json(Path(first["output"]), tmp_path / "b", capsys)
    assert code == 0 and again["unchanged_copy"] is True
    assert again["verification"]["failed"] == []


def test_dry_run_has_no_verification(
    auditwheel_vendored: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    code = main(["repair", str(auditwheel_vendored), "--dry-run", "-f", "json"])
    (result,) = json.loads(capsys.readouterr().out)["wheels"]
    assert code == 0 and result["verification"] is None


# --- broken writers: refused, nothing placed ---------------------------------------------------------------


def test_dropped_member_is_refused(
    auditwheel_vendored: Path,
    tmp_path: Path,
    capsys: pytest.CaptureFixture[str],
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    _tamper_entries(monkeypatch, lambda entries: _with_member(entries, INIT, None))
    _refused(auditwheel_vendored, tmp_path / "out", capsys, f"member {INIT} is missing")


def test_changed_kept_member_is_refused(
    auditwheel_vendored: Path,
    tmp_path: Path,
    capsys: pytest.CaptureFixture[str],
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    _tamper_entries(monkeypatch, lambda entries: _with_member(entries, INIT, b"import os\n"))
    _refused(
        auditwheel_vendored, tmp_path / "out", capsys, f"member {INIT} is reported kept but its bytes changed"
    )


def test_added_member_is_refused(
    auditwheel_vendored: Path,
    tmp_path: Path,
    capsys: pytest.CaptureFixture[str],
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    def add(entries: list[Entry]) -> list[Entry]:
        return _with_member(
            [Entry("cudemo/extra.py", 0o644, data=b""), *entries], "cudemo/extra.py", b"x = 1\n"
        )

    _tamper_entries(monkeypatch, add)
    _refused(
        auditwheel_vendored, tmp_path / "out", capsys, "member cudemo/extra.py is in the wheel, but neither"
    )


def test_skipped_removal_is_refused(
    auditwheel_vendored: Path,
    tmp_path: Path,
    capsys: pytest.CaptureFixture[str],
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    original = run._entries
    monkeypatch.setattr(
        run,
        "_entries",
        lambda archive, plan, work: original(archive, dataclasses.replace(plan, removed=()), work),
    )
    _refused(auditwheel_vendored, tmp_path / "out", capsys, "is reported removed but is in the wheel")


def test_skipped_requirement_is_refused(
    auditwheel_vendored: Path,
    tmp_path: Path,
    capsys: pytest.CaptureFixture[str],
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.setattr(run, "with_requirements", lambda metadata, requirements: metadata)
    _refused(
        auditwheel_vendored,
        tmp_path / "out",
        capsys,
        'requirement cuda-toolkit[cudart]>=13.0,<14; sys_platform == "linux" is not in METADATA',
    )


def test_requirement_after_the_headers_is_refused(
    auditwheel_vendored: Path,
    tmp_path: Path,
    capsys: pytest.CaptureFixture[str],
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """Written where no METADATA parser reads it (after the blank line, in the body): the claim fails."""
    monkeypatch.setattr(
        run,
        "with_requirements",
        lambda metadata, requirements: (
            metadata + b"".join(b"\nRequires-Dist: " + r.encode() for r in requirements)
        ),
    )
    _refused(auditwheel_vendored, tmp_path / "out", capsys, "is not in METADATA's Requires-Dist")


def test_forged_metadata_header_is_refused(
    auditwheel_vendored: Path,
    tmp_path: Path,
    capsys: pytest.CaptureFixture[str],
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    original = run.with_requirements
    monkeypatch.setattr(
        run,
        "with_requirements",
        lambda metadata, requirements: original(metadata, (*requirements, "evil>=1")),
    )
    _refused(auditwheel_vendored, tmp_path / "out", capsys, "METADATA's header fields are not the input's")


def test_bad_record_row_is_refused(
    auditwheel_vendored: Path,
    tmp_path: Path,
    capsys: pytest.CaptureFixture[str],
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    original = run.record_bytes

    def bad_rows(rows: Any) -> bytes:
        def forged() -> Iterator[tuple[str, str, str | int]]:
            for path, digest, size in rows:
                yield (path, digest, size + 1) if path == INIT else (path, digest, size)

        return original(forged())

    monkeypatch.setattr(run, "record_bytes", bad_rows)
    _refused(auditwheel_vendored, tmp_path / "out", capsys, "RECORD does not match the members")


def test_unlisted_member_is_refused(
    auditwheel_vendored: Path,
    tmp_path: Path,
    capsys: pytest.CaptureFixture[str],
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    original = run.record_bytes
    monkeypatch.setattr(run, "record_bytes", lambda rows: original(r for r in rows if r[0] != INIT))
    _refused(auditwheel_vendored, tmp_path / "out", capsys, f"{INIT} is in the wheel but not in RECORD")


def test_skipped_elf_edit_is_refused(
    auditwheel_vendored: Path,
    tmp_path: Path,
    capsys: pytest.CaptureFixture[str],
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.setattr(run.elfedit, "edit_file", lambda path, *args, **kwargs: "in place")
    _refused(
        auditwheel_vendored, tmp_path / "out", capsys, "DT_NEEDED libcudart.so.13 is reported but absent"
    )


def test_skipped_bootstrap_is_refused(
    windows_vendored_wheel: Path,
    tmp_path: Path,
    capsys: pytest.CaptureFixture[str],
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.setattr(run.windows, "with_bootstrap", lambda data, directories, label: data)
    _refused(
        windows_vendored_wheel,
        tmp_path / "out",
        capsys,
        f"{INIT}: no bootstrap adds ../nvidia/cu13/bin/x86_64",
    )


def test_skipped_import_rename_is_refused(
    windows_vendored_wheel: Path,
    tmp_path: Path,
    capsys: pytest.CaptureFixture[str],
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.setattr(run.windows, "rename_imports_file", lambda path, replace: None)
    _refused(
        windows_vendored_wheel, tmp_path / "out", capsys, "import cudart64_13.dll is reported but absent"
    )


def test_a_refused_wheel_leaves_what_was_in_w_alone(
    auditwheel_vendored: Path,
    tmp_path: Path,
    capsys: pytest.CaptureFixture[str],
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """A previous output at the name stays as it was: the refused one never replaces it."""
    out = tmp_path / "out"
    out.mkdir()
    previous = out / auditwheel_vendored.name
    previous.write_bytes(b"an earlier repair")
    monkeypatch.setattr(run, "with_requirements", lambda metadata, requirements: metadata)
    code, _, _ = _repair_json(auditwheel_vendored, out, capsys)
    assert code == ExitCode.INTERNAL
    assert sorted(p.name for p in out.iterdir()) == [previous.name]
    assert previous.read_bytes() == b"an earlier repair"
