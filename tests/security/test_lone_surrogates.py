"""Class 8 of issue 30, text that is not valid Unicode: a lone surrogate (``"\\ud800"``, legal in JSON) in a
toolkit manifest, an index's file URL, ``.pt2`` metadata or ``provenance.json``.

It used to be exit 70 (``UnicodeEncodeError`` writing the report), to lose the report of a good input beside
it in ``program inspect``, to make ``toolkit list`` of such an install exit 70 forever after, and to stop the
index from answering. Now every renderer escapes it as it escapes control characters (``\\ud800`` in text,
markdown, XML; a ``\\ud800`` escape in JSON, which parses back to the same string); a report is written in its
stream's encoding with whatever that encoding cannot write escaped; the index leaves out the one file whose
entry holds it, with a note; ``provenance.json`` naming its package with one is bad input (exit 2).
"""

from __future__ import annotations

import hashlib
import http.server
import io
import json
import os
import re
import subprocess
import sys
import threading
import xml.etree.ElementTree as ET
import zipfile
from collections.abc import Iterator
from pathlib import Path

import pytest

from cudaship.cli.main import main
from cudaship.render.escape import record, report, stray
from tests.security.builders import M, zip_bytes
from tests.toolkit.builders import LINUX, build_redist, serve

BAD = "\ud800"
BASE = "model/data/aotinductor/model"
ELF = b"\x7fELF\x02\x01\x01" + bytes(57)
ROOT = Path(__file__).resolve().parents[2]


def _encodes(text: str) -> bool:
    try:
        text.encode("utf-8")
    except UnicodeEncodeError:
        return False
    return True


def _pt2(path: Path, meta: dict[str, str]) -> Path:
    member = M(f"{BASE}/x.wrapper_metadata.json", json.dumps(meta).encode())
    path.write_bytes(zip_bytes([M("model/archive_format", b"pt2"), member, M(f"{BASE}/x.wrapper.so", ELF)]))
    return path


# -- every renderer --------------------------------------------------------------------------------------


@pytest.mark.parametrize("kind", ["text", "markdown", "xml", "html", "json"])
def test_every_kind_escapes_a_lone_surrogate(kind: str) -> None:
    value: dict[str, object] = {"name": f"lib{BAD}x.so", "items": (f"a{BAD}", "\udfff")}
    escaped = record(value, kind)  # type: ignore[arg-type]
    if kind == "json":
        shown = json.dumps(escaped, ensure_ascii=False)
    else:  # as a renderer lays the strings out (str() of the dict would show them with repr)
        shown = "\n".join([str(escaped["name"]), *(str(i) for i in escaped["items"])])  # type: ignore[attr-defined]
    out = report(shown, kind)  # type: ignore[arg-type]
    assert _encodes(out), out
    assert "\\ud800" in out
    assert stray(out) == []
    if kind == "json":
        assert json.loads(out) == {"name": f"lib{BAD}x.so", "items": [f"a{BAD}", "\udfff"]}


# -- .pt2 metadata, and program inspect with a good input beside -------------------------------------------


@pytest.mark.parametrize("fmt", ["text", "json"])
def test_pt2_metadata(tmp_path: Path, fmt: str, capsys: pytest.CaptureFixture[str]) -> None:
    good = _pt2(tmp_path / "good.pt2", {"AOTI_DEVICE_KEY": "cuda"})
    bad = _pt2(tmp_path / "bad.pt2", {"AOTI_DEVICE_KEY": f"cuda{BAD}", f"key{BAD}": "v"})
    code = main(["program", "inspect", "-f", fmt, str(bad), str(good)])
    captured = capsys.readouterr()
    assert code == 0, captured.err
    assert _encodes(captured.out) and _encodes(captured.err)
    if fmt == "json":
        programs = json.loads(captured.out)["programs"]
        assert [Path(p["path"]).name for p in programs] == ["bad.pt2", "good.pt2"]
        assert programs[0]["device"] == f"cuda{BAD}"  # the input's value, parsed back
    else:
        assert "good.pt2" in captured.out and "cuda\\ud800" in captured.out


def _export(tmp_path: Path, name: str, **fields: object) -> Path:
    export = tmp_path / name
    export.mkdir()
    package = _pt2(export / "model.pt2", {"AOTI_DEVICE_KEY": "cuda"})
    prov = {
        "schema": 1,
        "package": "model.pt2",
        "package_sha256": hashlib.sha256(package.read_bytes()).hexdigest(),
        "torch_version": "2.11.0+cu130",
        "cuda_train": "13.0",
        "device": "cuda",
        "target_platform": "linux-x86_64",
        **fields,
    }
    (export / "provenance.json").write_text(json.dumps(prov))
    return export


@pytest.mark.parametrize("fmt", ["text", "json"])
def test_provenance_values(tmp_path: Path, fmt: str, capsys: pytest.CaptureFixture[str]) -> None:
    export = _export(tmp_path, "export", torch_version=f"2.11.0+cu130{BAD}", gpu_name=f"H{BAD}")
    good = _pt2(tmp_path / "good.pt2", {"AOTI_DEVICE_KEY": "cuda"})
    code = main(["program", "inspect", "-f", fmt, str(export), str(good)])
    captured = capsys.readouterr()
    assert code == 0, captured.err
    assert _encodes(captured.out) and "good.pt2" in captured.out
    for check_fmt in ("text", "json", "markdown"):
        code = main(["program", "check", "-f", check_fmt, str(export)])
        captured = capsys.readouterr()
        assert code in (0, 1), captured.err
        assert _encodes(captured.out) and "\\ud800" in captured.out


def test_provenance_package_name(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    export = _export(tmp_path, "export", package=f"model{BAD}.pt2")
    good = _pt2(tmp_path / "good.pt2", {"AOTI_DEVICE_KEY": "cuda"})
    code = main(["program", "inspect", "-f", "json", str(export), str(good)])
    captured = capsys.readouterr()
    assert code == 2, captured.err
    assert [Path(p["path"]).name for p in json.loads(captured.out)["programs"]] == ["good.pt2"]
    err = captured.err.strip().splitlines()
    assert len(err) == 1 and "key 'package' is not valid Unicode" in err[0] and "model\\ud800.pt2" in err[0]
    assert main(["program", "check", str(export)]) == 2
    assert "not valid Unicode" in capsys.readouterr().err


# -- a toolkit manifest -------------------------------------------------------------------------------------


def test_toolkit_manifest(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    tree = build_redist(tmp_path / "mirror", platforms=(LINUX,), components=("cuda_cudart",))
    manifest = tree.manifest()
    entry = manifest["cuda_cudart"]
    assert isinstance(entry, dict)
    entry["version"] = f"{entry['version']}{BAD}"
    entry["license"] = f"CUDA{BAD}"
    manifest["release_date"] = f"2025{BAD}"
    tree.write_manifest(manifest)
    dest = tmp_path / "cuda"
    code = main(
        [
            "toolkit", "install", "13.0.2", "-c", "cudart", "--platform", "linux-x86_64",
            "--mirror", str(tree.root), "--dest", str(dest), "--cache-dir", str(tmp_path / "cache"),
        ]
    )  # fmt: skip
    captured = capsys.readouterr()
    assert code == 0, captured.err
    assert _encodes(captured.out) and "\\ud800" in captured.out
    for fmt in ("text", "json"):  # every later run too
        code = main(["toolkit", "list", "-f", fmt, str(dest)])
        captured = capsys.readouterr()
        assert code == 0, captured.err
        assert _encodes(captured.out) and "\\ud800" in captured.out
        if fmt == "json":
            assert BAD in json.dumps(json.loads(captured.out), ensure_ascii=False)
    out = tmp_path / "list.json"
    assert main(["toolkit", "list", "-f", "json", "-o", str(out), str(dest)]) == 0
    json.loads(out.read_text(encoding="utf-8"))


@pytest.mark.parametrize("served", [False, True], ids=["directory", "http"])
def test_toolkit_manifest_file_name(tmp_path: Path, served: bool, capsys: pytest.CaptureFixture[str]) -> None:
    """An archive's relative_path holding a lone surrogate names no file and no URL: one line, exit 2."""
    tree = build_redist(tmp_path / "mirror", platforms=(LINUX,), components=("cuda_cudart",))
    manifest = tree.manifest()
    entry = manifest["cuda_cudart"]
    assert isinstance(entry, dict)
    entry[LINUX]["relative_path"] += BAD
    tree.write_manifest(manifest)

    def run(mirror: str) -> int:
        return main(
            [
                "toolkit", "install", "13.0.2", "-c", "cudart", "--platform", "linux-x86_64",
                "--mirror", mirror, "--dest", str(tmp_path / "cuda"), "--cache-dir", str(tmp_path / "cache"),
            ]
        )  # fmt: skip

    if served:
        with serve(tree.root) as (url, _control):
            code = run(url)
    else:
        code = run(str(tree.root))
    err = [x for x in capsys.readouterr().err.splitlines() if x.startswith("cudaship: error")]
    assert code == 2, err
    assert len(err) == 1 and "relative_path" in err[0] and "not valid Unicode" in err[0], err
    assert not (tmp_path / "cuda").exists()


# -- an index's file URL ------------------------------------------------------------------------------------


def _wheel_bytes(name: str, version: str = "1.0") -> bytes:
    buffer = io.BytesIO()
    with zipfile.ZipFile(buffer, "w") as zf:
        zf.writestr(f"{name}/lib/lib{name}.so", b"\x7fELF" + bytes(60))
        zf.writestr(
            f"{name}-{version}.dist-info/WHEEL",
            "Wheel-Version: 1.0\nRoot-Is-Purelib: false\nTag: py3-none-any\n",
        )
        zf.writestr(
            f"{name}-{version}.dist-info/METADATA",
            f"Metadata-Version: 2.1\nName: {name}\nVersion: {version}\n",
        )
        zf.writestr(f"{name}-{version}.dist-info/RECORD", "")
    return buffer.getvalue()


class _Index:
    def __init__(self) -> None:
        self.wheel = _wheel_bytes("good")
        self.requests: list[str] = []
        self.url = ""

    def page(self) -> bytes:
        size = len(self.wheel)
        files = [
            {
                "filename": "good-1.0-py3-none-any.whl",
                "url": "/files/good-1.0-py3-none-any.whl",
                "size": size,
            },
            # newer, so chosen first were it read: its URL holds a lone surrogate
            {"filename": "good-2.0-py3-none-any.whl", "url": f"/files/good-2.0{BAD}.whl", "size": size},
            {"filename": f"good-3.0{BAD}-py3-none-any.whl", "url": "/files/x.whl", "size": size},
        ]
        return json.dumps({"meta": {"api-version": "1.1"}, "name": "good", "files": files}).encode()


@pytest.fixture
def index() -> Iterator[_Index]:
    state = _Index()

    class Handler(http.server.BaseHTTPRequestHandler):
        def log_message(self, format: str, *args: object) -> None:
            pass

        def do_GET(self) -> None:
            state.requests.append(self.path)
            ctype, status, extra = "application/octet-stream", 200, {}
            if self.path == "/simple/good/":
                body, ctype = state.page(), "application/vnd.pypi.simple.v1+json"
            elif self.path == "/files/good-1.0-py3-none-any.whl":
                body = state.wheel
                rng = re.fullmatch(r"bytes=(\d+)-(\d+)", self.headers.get("Range", ""))
                if rng:
                    lo, hi = int(rng.group(1)), min(int(rng.group(2)), len(body) - 1)
                    status, body = 206, body[lo : hi + 1]
                    extra["Content-Range"] = f"bytes {lo}-{hi}/{len(state.wheel)}"
            else:
                status, body = 404, b""
            self.send_response(status)
            self.send_header("Content-Type", ctype)
            self.send_header("Content-Length", str(len(body)))
            for k, v in extra.items():
                self.send_header(k, v)
            self.end_headers()
            self.wfile.write(body)

    server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), Handler)
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    state.url = f"http://127.0.0.1:{server.server_address[1]}/simple"
    try:
        yield state
    finally:
        server.shutdown()
        server.server_close()


def _audited(tmp_path: Path) -> Path:
    wheel = tmp_path / "pkg-1.0-py3-none-linux_x86_64.whl"
    with zipfile.ZipFile(wheel, "w") as zf:
        zf.writestr(
            "pkg-1.0.dist-info/METADATA",
            "Metadata-Version: 2.1\nName: pkg\nVersion: 1.0\nRequires-Dist: good\n",
        )
        zf.writestr(
            "pkg-1.0.dist-info/WHEEL",
            "Wheel-Version: 1.0\nRoot-Is-Purelib: false\nTag: py3-none-linux_x86_64\n",
        )
        zf.writestr("pkg-1.0.dist-info/RECORD", "")
    return wheel


@pytest.mark.parametrize("fmt", ["json", "text", "markdown", "junit"])
def test_index_file_url(index: _Index, tmp_path: Path, fmt: str, capsys: pytest.CaptureFixture[str]) -> None:
    wheel = _audited(tmp_path)
    cache = tmp_path / "cache"
    args = ["audit", "--online", "--index-url", index.url, "--cache-dir", str(cache), "-f", fmt, str(wheel)]
    code = main(args)
    captured = capsys.readouterr()
    assert code in (0, 1), captured.err
    out = captured.out
    assert _encodes(out) and _encodes(captured.err)
    assert "cannot answer" not in out  # the index still answers: the one file is left out
    if fmt == "json":
        notes = " ".join(json.loads(out)["wheels"][0]["notes"])
        assert "1 distribution from index" in notes, notes
        assert "good-3.0\\ud800-py3-none-any.whl: its entry is not valid Unicode" in notes, notes
        assert "good-2.0-py3-none-any.whl: its entry is not valid Unicode" in notes, notes
    elif fmt == "text":
        assert "good-3.0\\ud800-py3-none-any.whl: its entry is not valid Unicode" in out
    elif fmt == "junit":
        ET.fromstring(out)  # (markdown and JUnit show no notes)
    # the good file was read; the file behind the bad URL was never asked for
    assert "/files/good-1.0-py3-none-any.whl" in index.requests
    assert not any("good-2.0" in r or r.startswith("/files/x") for r in index.requests)
    # and again from the cache: the same answer
    assert main(args) in (0, 1)
    assert _encodes(capsys.readouterr().out)


# -- stdout's own encoding ------------------------------------------------------------------------------


def test_report_in_an_encoding_that_cannot_write_it(tmp_path: Path) -> None:
    """A non-ASCII name on a stdout whose encoding is ASCII is written escaped, not exit 70."""
    good = _pt2(tmp_path / "good.pt2", {"AOTI_DEVICE_KEY": "cuda\u2603"})
    env = {**os.environ, "PYTHONIOENCODING": "ascii", "PYTHONPATH": str(ROOT / "src")}
    proc = subprocess.run(
        [sys.executable, "-m", "cudaship", "program", "inspect", str(good)],
        capture_output=True,
        env=env,
        check=False,
    )
    assert proc.returncode == 0, proc.stderr.decode(errors="replace")
    assert b"cuda\\u2603" in proc.stdout
    proc.stdout.decode("ascii")


def test_program_inspect_isolates_a_bug_on_one_input(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    """Whatever one input meets (here a bug planted in the reader for it), the good input's report stays."""
    from cudaship.inspection import program

    good = _pt2(tmp_path / "good.pt2", {"AOTI_DEVICE_KEY": "cuda"})
    bad = _pt2(tmp_path / "bad.pt2", {"AOTI_DEVICE_KEY": "cuda"})
    real = program.read_program

    def planted(path: Path) -> object:
        if Path(path).name == "bad.pt2":
            raise UnicodeEncodeError("utf-8", BAD, 0, 1, "surrogates not allowed")
        return real(path)

    monkeypatch.setattr(program, "read_program", planted)
    code = main(["program", "inspect", "-f", "json", str(bad), str(good)])
    captured = capsys.readouterr()
    assert code == 70
    assert [Path(p["path"]).name for p in json.loads(captured.out)["programs"]] == ["good.pt2"]
    err = captured.err.strip().splitlines()
    assert len(err) == 1 and "bad.pt2: internal error: UnicodeEncodeError" in err[0]
