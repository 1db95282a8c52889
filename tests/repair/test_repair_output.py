"""The repaired wheel is what the report says (issue 30, class 4): hostile member names, METADATA and
``__init__.py`` files, and native members repair cannot read, each planted in a real wheel (rebuilt with
zipfile and csv, :mod:`tests.repair.rebuild`). Every assertion reads the written wheel back with zipfile and
csv, never with cudaship's reader."""

from __future__ import annotations

import csv
import email.parser
import io
import json
import shutil
import subprocess
import zipfile
from pathlib import Path

import jsonschema
import pytest

from cudaship.cli.main import main
from tests.repair.helpers import record_matches
from tests.repair.rebuild import rebuild

pytestmark = pytest.mark.slow

DIST = "cudemo-1.0.dist-info"


def _one_error_line(err: str, path: Path) -> str:
    lines = [line for line in err.splitlines() if line.strip()]
    assert len(lines) == 1, err
    assert lines[0].startswith(f"cudaship: error: {path}: "), err
    assert "Traceback" not in err
    return lines[0]


def _outputs(directory: Path) -> list[str]:
    return sorted(p.name for p in directory.iterdir()) if directory.exists() else []


def _record_rows(wheel: Path) -> list[list[str]]:
    with zipfile.ZipFile(wheel) as zf:
        return list(csv.reader(io.StringIO(zf.read(f"{DIST}/RECORD").decode("utf-8"))))


# --- member names that are not wheel paths ------------------------------------------------------------------

BAD_NAMES = {
    "dotdot": "cudemo/../../../evil.py",
    "absolute": "/tmp/cudaship-evil.py",
    "drive": "C:/evil.py",
    "backslash": "cudemo\\..\\..\\evil.py",
    "empty-component": "cudemo//evil.py",
    "dot-component": "cudemo/./evil.py",
    # a quote and line breaks: written by string joins, this forged a ../../../evil.py row in RECORD
    "quote-newlines": 'cudemo/x.py",sha256=AAAA,1\n../../../evil.py,sha256=BBBB,5\n"y.py',
    "carriage-return": "cudemo/evil\r.py",
    "c1-control": "cudemo/evil\x9b.py",
}


@pytest.mark.parametrize("name", list(BAD_NAMES.values()), ids=list(BAD_NAMES))
def test_member_name_that_is_no_wheel_path_is_refused_and_flagged(
    auditwheel_vendored: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str], name: str
) -> None:
    bad = rebuild(auditwheel_vendored, tmp_path, add={name: b"x = 1\n"})
    out = tmp_path / "out"
    assert main(["repair", str(bad), "-w", str(out)]) == 2
    line = _one_error_line(capsys.readouterr().err, bad)
    assert "not a valid wheel path" in line
    assert _outputs(out) == []

    report = tmp_path / "audit.json"
    assert main(["audit", str(bad), "-f", "json", "-o", str(report)]) == 1
    doc = json.loads(report.read_text())
    (record,) = [c for c in doc["checks"] if c["name"] == "record: hashes and sizes"]
    assert record["status"] == "fail"
    assert [e["file"] for e in record["evidence"] if "not a valid wheel path" in e["message"]] == [name]


def test_member_name_holding_a_nul_is_refused_and_flagged(
    auditwheel_vendored: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    # zipfile ends a name at its NUL when it reads it: the name was seen as "cudemo/evil" before
    placeholder, name = "cudemo/evil@../../x.py", b"cudemo/evil\0../../x.py"
    bad = rebuild(
        auditwheel_vendored, tmp_path, add={placeholder: b"x = 1\n"}, patch_names={placeholder: name}
    )
    out = tmp_path / "out"
    assert main(["repair", str(bad), "-w", str(out)]) == 2
    line = _one_error_line(capsys.readouterr().err, bad)
    assert "not a valid wheel path" in line and "U+0000" in line
    assert _outputs(out) == []
    report = tmp_path / "audit.json"
    assert main(["audit", str(bad), "-f", "json", "-o", str(report)]) == 1
    (record,) = [
        c for c in json.loads(report.read_text())["checks"] if c["name"] == "record: hashes and sizes"
    ]
    assert any("U+0000" in e["message"] for e in record["evidence"])


# --- RECORD written by the csv module -----------------------------------------------------------------------

QUOTED_NAMES = ['cudemo/a "quoted" name.py', "cudemo/comma,name.py", 'cudemo/both",".py']


def test_record_rows_of_quoted_names_read_back_by_csv(auditwheel_vendored: Path, tmp_path: Path) -> None:
    """Valid names holding quotes and commas: string joins wrote ``"cudemo/a "quoted" name.py"``, which csv
    reads as another path (the member's row lost, RECORD no longer matching the wheel)."""
    src = rebuild(auditwheel_vendored, tmp_path, add={n: n.encode() for n in QUOTED_NAMES})
    out = tmp_path / "out"
    assert main(["repair", str(src), "-w", str(out), "-o", str(tmp_path / "report.txt")]) == 0
    written = out / src.name
    rows = _record_rows(written)
    assert all(len(r) == 3 for r in rows), rows
    with zipfile.ZipFile(written) as zf:
        names = [i.filename for i in zf.infolist()]
        assert record_matches({n: zf.read(n) for n in names}) == []
    assert set(QUOTED_NAMES) <= {r[0] for r in rows}
    assert rows[-1] == [f"{DIST}/RECORD", "", ""]


# --- METADATA edited through the email-header parser --------------------------------------------------------


def _requires_dist(metadata: bytes) -> list[str]:
    """Requires-Dist as the parser pip and packaging use reads it (headers only)."""
    message = email.parser.BytesHeaderParser().parsebytes(metadata)
    return [str(v) for v in message.get_all("Requires-Dist") or ()]


def _inserted(before: bytes, after: bytes, at: int) -> bytes:
    """What ``after`` adds to ``before`` at offset ``at`` (asserting that the rest is byte for byte)."""
    added = len(after) - len(before)
    assert added > 0
    assert after[:at] == before[:at] and after[at + added :] == before[at:], (before, after)
    return after[at : at + added]


METADATA_CASES = {
    # a line that is no header ends the headers: the body starts there (and with it the old insertion point)
    "no-header-line": b"Metadata-Version: 2.4\nName: cudemo\nVersion: 1.0\nThis line is no header\n\nbody\n",
    "crlf-body": b"Metadata-Version: 2.4\r\nName: cudemo\r\nVersion: 1.0\r\n\r\nline one\r\n\r\nline two\n\n",
    "no-final-newline": b"Metadata-Version: 2.4\nName: cudemo\nVersion: 1.0",
    "continuation": b"Metadata-Version: 2.4\nName: cudemo\nVersion: 1.0\nSummary: one\n  two\n\nbody\n",
}
#: where the new lines go: the end of the headers as the parser reads them
METADATA_AT = {
    "no-header-line": b"This line",
    "crlf-body": b"\r\nline one",
    "no-final-newline": None,
    "continuation": b"\nbody",
}


@pytest.mark.parametrize("case", list(METADATA_CASES))
def test_requires_dist_goes_where_the_parser_reads_headers(
    auditwheel_vendored: Path, tmp_path: Path, case: str
) -> None:
    before = METADATA_CASES[case]
    src = rebuild(auditwheel_vendored, tmp_path, replace={f"{DIST}/METADATA": before})
    out = tmp_path / "out"
    assert main(["repair", str(src), "-w", str(out), "-f", "json", "-o", str(tmp_path / "r.json")]) == 0
    (wheel,) = json.loads((tmp_path / "r.json").read_text())["wheels"]
    wanted = [r["text"] for r in wheel["plan"]["requirements"]]
    assert wanted
    with zipfile.ZipFile(out / src.name) as zf:
        after = zf.read(f"{DIST}/METADATA")
    assert _requires_dist(after) == wanted
    marker = METADATA_AT[case]
    at = len(before) if marker is None else before.index(marker)
    added = _inserted(before + (b"\n" if marker is None else b""), after, at + (1 if marker is None else 0))
    newline = b"\r\n" if b"\r\n" in before else b"\n"
    assert added == b"".join(b"Requires-Dist: " + w.encode() + newline for w in wanted)


@pytest.mark.parametrize("member", ["METADATA", "__init__.py"])
def test_latin1_text_to_edit_is_refused_with_one_line(
    windows_vendored_wheel: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str], member: str
) -> None:
    """METADATA (to get Requires-Dist) or __init__.py (to get the bootstrap) that is not UTF-8: exit 70
    (UnicodeDecodeError) before; now exit 2, one line, nothing written."""
    name = f"{DIST}/METADATA" if member == "METADATA" else "cudemo/__init__.py"
    with zipfile.ZipFile(windows_vendored_wheel) as zf:
        data = zf.read(name)
    latin1 = data + ("# caf\u00e9\n" if member == "__init__.py" else "Summary: caf\u00e9\n").encode("latin-1")
    if member == "METADATA":
        latin1 = data.replace(b"Version: 1.0\n", b"Version: 1.0\nSummary: caf\xe9\n")
    src = rebuild(windows_vendored_wheel, tmp_path, replace={name: latin1})
    out = tmp_path / "out"
    code = main(["repair", str(src), "-w", str(out)])
    captured = capsys.readouterr()
    assert code == 2, captured.err
    line = _one_error_line(captured.err, src)
    assert "not UTF-8" in line
    assert _outputs(out) == []


# --- the DLL-directory bootstrap in __init__.py -------------------------------------------------------------

WIN_INIT = b'"""cudemo for Windows."""\n\nfrom __future__ import annotations\n\nfrom cudemo._ext import *\n'
MARKER_LINE = b"# cudaship repair: NVIDIA's CUDA DLLs come from their wheels"

INIT_CASES = {
    # the marker in a comment or a string is no bootstrap: it was taken for one, the DLL removed, none added
    "marker-comment": MARKER_LINE + b"\n" + WIN_INIT,
    "marker-inline": WIN_INIT[:-1] + b"  " + MARKER_LINE + b"\n",
    "marker-string": WIN_INIT + b'NOTE = "' + MARKER_LINE + b'"\n',
    # 200,000 levels: ast.parse raised MemoryError (unary minus) and RecursionError (attributes): exit 70
    "deep-unary": WIN_INIT + b"x = " + b"-" * 200_000 + b"1\n",
    "deep-attribute": WIN_INIT + b"x = a" + b".b" * 200_000 + b"\n",
    # a coding declaration: Python reads it as Latin-1, and so is it kept (was UnicodeDecodeError, exit 70)
    "latin1-declared": b"# -*- coding: latin-1 -*-\n" + WIN_INIT.replace(b"Windows", b"caf\xe9"),
}


@pytest.mark.parametrize("case", list(INIT_CASES))
def test_bootstrap_is_added_and_the_rest_kept(
    windows_vendored_wheel: Path, tmp_path: Path, case: str
) -> None:
    before = INIT_CASES[case]
    at = before.index(b"annotations\n") + len(b"annotations\n")  # after the from __future__ import
    src = rebuild(windows_vendored_wheel, tmp_path, replace={"cudemo/__init__.py": before})
    out = tmp_path / "out"
    assert main(["repair", str(src), "-w", str(out), "-f", "json", "-o", str(tmp_path / "r.json")]) == 0
    (wheel,) = json.loads((tmp_path / "r.json").read_text())["wheels"]
    (boot,) = wheel["plan"]["bootstraps"]
    assert boot["member"] == "cudemo/__init__.py"
    removed = [r["member"] for r in wheel["plan"]["removed"]]
    assert removed
    with zipfile.ZipFile(out / src.name) as zf:
        after = zf.read("cudemo/__init__.py")
        assert not set(removed) & set(zf.namelist())
    added = _inserted(before, after, at)
    assert added.startswith(MARKER_LINE + b"\n")
    assert b"os.add_dll_directory(path)" in added
    assert repr(tuple(boot["directories"])).encode() in added
    compile(added, "bootstrap", "exec")  # the block alone is valid Python


# --- native members repair cannot read ----------------------------------------------------------------------

SCHEMA = json.loads(
    (Path(__file__).resolve().parents[2] / "src/cudaship/render/schemas/repair.schema.json").read_text()
)


def _many_runpath_entries(directory: Path) -> bytes:
    """A real shared library (gcc) whose RUNPATH holds 10,000 entries."""
    gcc = shutil.which("gcc")
    if gcc is None:
        pytest.skip("gcc is needed to build a library with a 10,000-entry RUNPATH")
    (directory / "f.c").write_text("int f(void) { return 1; }\n")
    runpath = ":".join(f"/d{i}" for i in range(10_000))
    lib = directory / "libmany.so"
    done = subprocess.run(
        [gcc, "-shared", "-fPIC", "f.c", "-o", lib.name, f"-Wl,-rpath,{runpath}"],
        cwd=directory,
        capture_output=True,
        check=False,
    )
    assert done.returncode == 0, done.stderr
    return lib.read_bytes()


def test_native_members_repair_cannot_read_are_named(
    auditwheel_vendored: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    with zipfile.ZipFile(auditwheel_vendored) as zf:
        ext = zf.read(next(n for n in zf.namelist() if n.startswith("cudemo/_ext")))
    unread = {
        "cudemo/libtruncated.so": ext[:3000],
        "cudemo/libmany.so": _many_runpath_entries(tmp_path),
    }
    # a GNU ld linker script is read (issue 32, class 5: its own record kind), so it is not "unread"; repair
    # has nothing to change in it and copies it unchanged too
    script = {"cudemo/libscript.so": b"/* GNU ld script */\nINPUT(libfoo.so.1)\n"}
    src = rebuild(auditwheel_vendored, tmp_path, add={**unread, **script})
    out = tmp_path / "out"
    assert main(["repair", str(src), "-w", str(out)]) == 0
    text = capsys.readouterr().out
    for member in unread:
        assert f"  unread     {member}: " in text, text
    assert "libscript.so" not in text
    with zipfile.ZipFile(out / src.name) as zf:
        assert {m: zf.read(m) for m in {**unread, **script}} == {**unread, **script}  # copied unchanged

    report = tmp_path / "r.json"
    assert main(["repair", str(src), "--dry-run", "-f", "json", "-o", str(report)]) == 0
    doc = json.loads(report.read_text())
    jsonschema.validate(doc, SCHEMA)
    (wheel,) = doc["wheels"]
    assert sorted(u["member"] for u in wheel["plan"]["unread"]) == sorted(unread)
    assert all(u["reason"] for u in wheel["plan"]["unread"])
    assert main(["repair", str(src), "--dry-run", "-f", "markdown"]) == 0
    markdown = capsys.readouterr().out
    assert all(f"| unread | `{m}` |" in markdown for m in unread)
