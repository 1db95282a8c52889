"""Hostile inputs around the readers: JSON and TOML nested thousands deep, FIFOs and devices given as files,
manifests with impossible sizes or that never end, a mirror that streams forever, directory trees deeper
than Python 3.11's recursion limit, policy typos, and wheel metadata of absurd size. Each must end in one
line and exit 2 (never 70, never a hang); work is bounded by counting, never by timing.
"""

from __future__ import annotations

import http.server
import io
import json
import os
import threading
import zipfile
from collections.abc import Iterator
from pathlib import Path

import pytest

from cudaship.cli.main import main
from cudaship.errors import PolicyError, ToolkitError, UsageError, WheelError
from cudaship.loaders import MAX_DEPTH, depth_of, load_json, load_toml
from cudaship.toolkit import download
from cudaship.toolkit.install import parse_redist_manifest
from cudaship.toolkit.records import Observer, Platform
from cudaship.wheel import metadata

EXAMPLE = Path(__file__).resolve().parents[2] / "examples" / "libvecadd.so"


def _one_line_exit_2(args: list[str], capsys: pytest.CaptureFixture[str]) -> str:
    code = main(args)
    err = capsys.readouterr().err.strip().splitlines()
    assert code == 2, (code, err)
    assert len(err) == 1 and err[0].startswith("cudaship: error: "), err
    return err[0]


# -- nesting -------------------------------------------------------------------------------------------------


@pytest.mark.parametrize("depth", [100, 5000, 200_000])
def test_deep_json_is_an_error(depth: int) -> None:
    with pytest.raises(UsageError, match="nested"):
        load_json("[" * depth + "]" * depth, error=UsageError)


@pytest.mark.parametrize(
    "text",
    [
        pytest.param("a = " + "[" * 5000 + "]" * 5000, id="arrays"),
        pytest.param("a = " + "{b = " * 5000 + "1" + "}" * 5000, id="inline-tables"),
        pytest.param(".".join(f"k{i}" for i in range(100_000)) + " = 1", id="dotted-key-100k"),
        pytest.param("[" + ".".join(f"k{i}" for i in range(70)) + "]\nx = 1", id="table-header-70"),
    ],
)
def test_deep_toml_is_an_error(text: str) -> None:
    with pytest.raises(PolicyError, match="nested"):
        load_toml(text, error=PolicyError)


def test_depth_is_counted_without_recursion() -> None:
    value: object = 1
    for _ in range(100_000):
        value = [value]
    assert depth_of(value) == MAX_DEPTH + 1  # stops counting past the limit
    assert depth_of({"a": [1, {"b": 2}]}) == 3


def test_deep_policy_and_parent_pyproject(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    deep = "[tool.cudaship]\nx = " + "[" * 3000 + "]" * 3000 + "\n"
    policy = tmp_path / "cudaship.toml"
    policy.write_text("archs = " + "[" * 3000 + "]" * 3000 + "\n")
    assert "nested" in _one_line_exit_2(["arch-list", "--train", "cu130", "--policy", str(policy)], capsys)
    (tmp_path / "pyproject.toml").write_text(deep)
    below = tmp_path / "a" / "b"
    below.mkdir(parents=True)
    monkeypatch.chdir(below)
    assert "nested" in _one_line_exit_2(["arch-list", "--train", "cu130"], capsys)


@pytest.mark.parametrize(
    "body",
    [
        pytest.param("[" * 10_000 + "]" * 10_000, id="deep"),
        pytest.param('{"include": ' + "[" * 70 + "]" * 70 + "}", id="deep-70"),
    ],
)
def test_deep_matrix_from_is_an_error(tmp_path: Path, body: str) -> None:
    from cudaship.ci.matrix import read_build_matrix

    path = tmp_path / "matrix.json"
    path.write_text(body)
    with pytest.raises(UsageError, match="nested"):
        read_build_matrix(path)


def test_deep_provenance_and_toolkit_manifest(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    export = tmp_path / "export"
    export.mkdir()
    (export / "provenance.json").write_text("[" * 10_000 + "]" * 10_000)
    assert "nested" in _one_line_exit_2(["program", "inspect", str(export)], capsys)
    toolkit = tmp_path / "toolkit"
    toolkit.mkdir()
    (toolkit / "cudaship-toolkit.json").write_text('{"a":' * 10_000 + "1" + "}" * 10_000)
    assert "nested" in _one_line_exit_2(["toolkit", "verify", str(toolkit)], capsys)


def test_deep_redist_manifest() -> None:
    with pytest.raises(ToolkitError, match="nested"):
        parse_redist_manifest(
            b"[" * 10_000 + b"]" * 10_000,
            "13.0.2",
            Platform.LINUX_X86_64,
            ("cudart",),
            "/m",
            "redistrib.json",
        )


@pytest.mark.parametrize("size", ['"-1"', "-1", '"1e3"', '"99999999999999999999999999"', "true", '" 12x"'])
def test_manifest_size_that_is_no_byte_count(size: str) -> None:
    manifest = {
        "cuda_cudart": {
            "version": "13.0.96",
            "linux-x86_64": {"relative_path": "cuda_cudart/x.tar.xz", "sha256": "0" * 64, "size": "0"},
        }
    }
    raw = json.dumps(manifest).replace('"size": "0"', f'"size": {size}')
    with pytest.raises(ToolkitError, match="size"):
        parse_redist_manifest(
            raw.encode(), "13.0.2", Platform.LINUX_X86_64, ("cudart",), "/m", "redistrib.json"
        )


# -- non-regular files ---------------------------------------------------------------------------------------


@pytest.fixture
def fifo(tmp_path: Path) -> Path:
    path = tmp_path / "input.fifo"
    os.mkfifo(path)
    return path


def test_fifo_given_to_inspect_is_refused(fifo: Path, capsys: pytest.CaptureFixture[str]) -> None:
    code = main(["inspect", str(fifo), str(EXAMPLE), "--format", "json"])
    out = json.loads(capsys.readouterr().out)
    assert code == 2
    errors = [f["error"] for f in out["files"] if f.get("error")]
    assert errors == ["not a regular file (a FIFO)"]
    assert any(f["path"] == str(EXAMPLE) and not f.get("error") for f in out["files"])


def test_fifo_wheel_given_to_inspect_is_refused(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    wheel = tmp_path / "x-1.0-py3-none-any.whl"
    os.mkfifo(wheel)
    assert main(["inspect", str(wheel)]) == 2


def test_fifo_given_as_policy_is_refused(fifo: Path, capsys: pytest.CaptureFixture[str]) -> None:
    assert "not a regular file (a FIFO)" in _one_line_exit_2(
        ["arch-list", "--train", "cu130", "--policy", str(fifo)], capsys
    )


def test_fifo_given_to_program_inspect_is_refused(fifo: Path, capsys: pytest.CaptureFixture[str]) -> None:
    assert "not a regular file (a FIFO)" in _one_line_exit_2(["program", "inspect", str(fifo)], capsys)


def test_character_device_given_to_inspect_is_refused(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    zero = tmp_path / "zero"
    zero.symlink_to("/dev/zero")
    assert main(["inspect", str(zero)]) == 2
    captured = capsys.readouterr()
    # nothing read: the one error line on stderr, no report that would only say it again (issue 35)
    assert captured.out == ""
    assert captured.err == f"cudaship: error: {zero}: not a regular file (a character device)\n"


@pytest.mark.parametrize("kind", ["fifo", "dev-zero"])
def test_manifest_that_never_ends(tmp_path: Path, kind: str) -> None:
    manifest = tmp_path / "redistrib_13.0.2.json"
    if kind == "fifo":
        os.mkfifo(manifest)
    else:
        manifest.symlink_to("/dev/zero")
    with pytest.raises(ToolkitError, match="not a regular file"):
        download.fetch_manifest(str(manifest), download.Cache(tmp_path / "cache"))


class _Forever(http.server.BaseHTTPRequestHandler):
    """Streams zeros with no Content-Length, until the client goes away; counts what it sent."""

    sent = 0

    def log_message(self, format: str, *args: object) -> None:
        pass

    def do_GET(self) -> None:
        self.protocol_version = "HTTP/1.0"
        self.send_response(200)
        self.end_headers()
        chunk = bytes(1 << 16)
        try:
            while True:
                self.wfile.write(chunk)
                type(self).sent += len(chunk)
        except OSError:
            return


@pytest.fixture
def forever() -> Iterator[str]:
    server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), _Forever)
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    try:
        yield f"http://127.0.0.1:{server.server_address[1]}/x.tar.xz"
    finally:
        server.shutdown()
        server.server_close()


def test_mirror_streaming_forever_is_cut_off(
    forever: str, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(download, "MAX_DOWNLOAD_BYTES", 4 << 20)
    part = tmp_path / "x.part"
    options = download.FetchOptions(retries=0, backoff=0.01, timeout=10)
    with pytest.raises(ToolkitError, match="larger than"):
        download._download(forever, part, "x.tar.xz", None, Observer(), options)
    assert not part.exists()  # cut off at the cap (counted as it streamed) and not kept


# -- trees ---------------------------------------------------------------------------------------------------


def test_directory_tree_1100_levels_deep(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    root = tmp_path / "deep"
    path = root
    fd = os.open(tmp_path, os.O_RDONLY)
    os.mkdir(root)
    here = os.open(root, os.O_RDONLY)
    os.close(fd)
    for _ in range(1100):  # relative to a directory fd: no path ever grows past PATH_MAX
        os.mkdir("d", dir_fd=here)
        nxt = os.open("d", os.O_RDONLY, dir_fd=here)
        os.close(here)
        here = nxt
    with open(os.open("lib.so", os.O_WRONLY | os.O_CREAT, 0o644, dir_fd=here), "wb") as f:
        f.write(EXAMPLE.read_bytes())
    os.close(here)
    del path
    try:
        code = main(["inspect", str(root), "--format", "json"])
        out = json.loads(capsys.readouterr().out)
        assert code == 0, out
        assert len(out["files"]) == 1 and out["files"][0]["path"].endswith("/d/lib.so")
    finally:
        # pytest's own clean-up of old tmp_path sessions recurses per level and fails on this tree
        from cudaship import tree

        tree.remove(root)


def test_tree_walk_and_remove_are_iterative(tmp_path: Path) -> None:
    from cudaship import tree

    root = tmp_path / "t"
    here = root
    here.mkdir()
    rel = Path(*["d"] * 1100)
    fd = os.open(root, os.O_RDONLY)
    for _ in range(1100):
        os.mkdir("d", dir_fd=fd)
        nxt = os.open("d", os.O_RDONLY, dir_fd=fd)
        os.close(fd)
        fd = nxt
    os.close(fd)
    visited = sum(1 for _ in tree.walk(root))
    assert visited == 1101
    tree.remove(root)
    assert not root.exists()
    del rel


# -- policy typos --------------------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("text", "expected"),
    [
        ("[audti.ships]\nrequired = ['a.so']\n", r"\[audti\]: unknown table \(did you mean \[audit\]\?\)"),
        ("[matirx]\n", r"\[matirx\]: unknown table \(did you mean \[matrix\]\?\)"),
        ("[zzz]\n", r"\[zzz\]: unknown table; known: \[archs\], \[audit\], \[matrix\]"),
        ("top = 1\n", r"\[top\]: unknown table"),
    ],
)
def test_unknown_top_level_table_is_an_error(tmp_path: Path, text: str, expected: str) -> None:
    from cudaship.config import load_config

    path = tmp_path / "cudaship.toml"
    path.write_text(text)
    with pytest.raises(PolicyError, match=expected):
        load_config(path)


def test_unknown_table_in_pyproject(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    path = tmp_path / "pyproject.toml"
    path.write_text("[tool.cudaship.audti.ships]\nrequired = []\n")
    message = _one_line_exit_2(["arch-list", "--train", "cu130", "--policy", str(path)], capsys)
    assert "[tool.cudaship.audti]: unknown table (did you mean [tool.cudaship.audit]?)" in message


# -- wheel metadata ------------------------------------------------------------------------------------------


def _metadata(**extra: str) -> bytes:
    return ("Metadata-Version: 2.1\nName: x\nVersion: 1.0\n" + "".join(extra.values())).encode()


def test_version_of_thousands_of_digits() -> None:
    with pytest.raises(WheelError, match="Version is 5004 characters"):
        metadata.parse_metadata(b"Metadata-Version: 2.1\nName: x\nVersion: 1." + b"9" * 5000 + b".0\n")


def test_too_many_requires_dist() -> None:
    body = "".join(f"Requires-Dist: p{i}\n" for i in range(metadata.MAX_REQUIREMENTS + 1))
    with pytest.raises(WheelError, match="Requires-Dist entries"):
        metadata.parse_metadata(_metadata(r=body))


def test_huge_folded_header() -> None:
    folded = "Summary: x\n" + " y\n" * (3 << 20)
    with pytest.raises(WheelError, match="over the"):
        metadata.parse_metadata(_metadata(s=folded))


def test_record_with_too_many_lines() -> None:
    line = b"a,,\n"
    with pytest.raises(WheelError, match="more than"):
        metadata.parse_record(line * (metadata.MAX_RECORD_ROWS + 1))
    with pytest.raises(WheelError, match="over the"):
        metadata.parse_record(b"x" * (metadata.MAX_RECORD_BYTES + 1))


def test_record_size_of_thousands_of_digits() -> None:
    with pytest.raises(WheelError, match="is not a number"):
        metadata.parse_record(b"a,sha256=x," + b"9" * 5000 + b"\n")


def test_audit_of_a_wheel_with_a_huge_record(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    """20 MiB of RECORD deflated to a few KiB: refused by its size before it is parsed."""
    out = io.BytesIO()
    dist = "x-1.0.dist-info"
    with zipfile.ZipFile(out, "w", zipfile.ZIP_DEFLATED) as zf:
        zf.writestr(f"{dist}/METADATA", _metadata())
        zf.writestr(f"{dist}/WHEEL", "Wheel-Version: 1.0\nRoot-Is-Purelib: true\nTag: py3-none-any\n")
        zf.writestr(f"{dist}/RECORD", b"a,,\n" * (5 << 20))
    wheel = tmp_path / "x-1.0-py3-none-any.whl"
    wheel.write_bytes(out.getvalue())
    assert main(["audit", str(wheel)]) == 2
    assert "over the" in capsys.readouterr().err
