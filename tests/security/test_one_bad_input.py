"""Class 4 of issue 25, one bad input hides the rest: an input that cannot be read (a FIFO or a device named
``*.whl``, a missing file, a native library given to ``audit``) gets its line, in the report and on standard
error, and every other input is still reported, in every format; the exit status is 2 (bad input) whenever
one input was bad, even though the others were reported (docs/cli.md).

Also the two audit input messages of issue 23: a library given to ``audit`` and a directory with nothing
``audit`` reads say what ``audit`` takes.
"""

from __future__ import annotations

import json
import os
import xml.etree.ElementTree as ET
import zipfile
from pathlib import Path

import pytest

from cudaship.cli.main import main
from cudaship.render.table import formats

EXAMPLE = Path(__file__).resolve().parents[2] / "examples" / "libvecadd.so"


def _wheel(directory: Path, index: int) -> Path:
    """A small real wheel: dist-info and one native library (the example's), named after ``index``."""
    name = f"good{index:02d}"
    path = directory / f"{name}-1.0-py3-none-manylinux_2_17_x86_64.whl"
    dist = f"{name}-1.0.dist-info"
    members = {
        f"{name}/libvecadd.so": EXAMPLE.read_bytes(),
        f"{dist}/METADATA": f"Metadata-Version: 2.1\nName: {name}\nVersion: 1.0\n".encode(),
        f"{dist}/WHEEL": b"Wheel-Version: 1.0\nGenerator: t\nRoot-Is-Purelib: false\n"
        b"Tag: py3-none-manylinux_2_17_x86_64\n",
    }
    record = "".join(f"{n},,\n" for n in members) + f"{dist}/RECORD,,\n"
    with zipfile.ZipFile(path, "w", zipfile.ZIP_DEFLATED) as z:
        for member, data in members.items():
            z.writestr(member, data)
        z.writestr(f"{dist}/RECORD", record)
    return path


@pytest.fixture(scope="module")
def forty(tmp_path_factory: pytest.TempPathFactory) -> tuple[list[Path], Path]:
    """39 good wheels and, in the middle of them, a FIFO named like a wheel: 40 inputs."""
    directory = tmp_path_factory.mktemp("forty")
    good = [_wheel(directory, i) for i in range(39)]
    fifo = directory / "fifo-1.0-py3-none-any.whl"
    os.mkfifo(fifo)
    return good, fifo


@pytest.mark.parametrize("fmt", list(formats("audit")))
def test_audit_of_forty_inputs_reports_the_39_good_and_names_the_fifo(
    forty: tuple[list[Path], Path], fmt: str, capsys: pytest.CaptureFixture[str]
) -> None:
    good, fifo = forty
    paths = [str(p) for p in good[:20]] + [str(fifo)] + [str(p) for p in good[20:]]
    code = main(["audit", "-j", "4", "--offline", "--no-progress", "--format", fmt, *paths])
    out, err = capsys.readouterr()
    assert code == 2  # one input was bad: bad input, though the others are reported
    errors = err.strip().splitlines()
    assert errors == [f"cudaship: error: {fifo}: not a regular file (a FIFO)"]
    if fmt == "json":
        import jsonschema

        doc = json.loads(out)
        schema = Path(__file__).resolve().parents[2] / "src/cudaship/render/schemas/audit.schema.json"
        jsonschema.Draft202012Validator(json.loads(schema.read_text())).validate(doc)
        assert [w["filename"] for w in doc["wheels"]] == [p.name for p in good]
        assert doc["errors"] == [f"{fifo}: not a regular file (a FIFO)"]
    elif fmt == "junit":
        root = ET.fromstring(out)
        suites = [s.get("name") for s in root.iter("testsuite")]
        assert suites == [p.name for p in good] + [str(fifo)]
        (error,) = root.iter("error")
        assert error.get("message") == f"{fifo}: not a regular file (a FIFO)"
        assert root.get("errors") == "1"
    else:
        for p in good:
            assert p.name in out
        assert f"{fifo}: not a regular file (a FIFO)" in out


def test_audit_of_only_bad_inputs_is_one_line_each(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    fifo = tmp_path / "only-1.0-py3-none-any.whl"
    os.mkfifo(fifo)
    missing = tmp_path / "missing-1.0-py3-none-any.whl"
    assert main(["audit", "--offline", str(fifo), str(missing)]) == 2
    out, err = capsys.readouterr()
    assert out == ""
    assert err.splitlines() == [
        f"cudaship: error: {fifo}: not a regular file (a FIFO)",
        f"cudaship: error: {missing}: no such file",
    ]


@pytest.fixture
def directory_with_specials(tmp_path: Path) -> tuple[Path, list[str]]:
    """A directory holding two good wheels, the example library, a FIFO named ``*.whl``, a socket named
    ``*.whl`` and a link to a character device named ``*.whl``; returns it and the lines the specials get."""
    import socket

    root = tmp_path / "dir"
    root.mkdir()
    _wheel(root, 1)
    _wheel(root, 2)
    (root / "libvecadd.so").write_bytes(EXAMPLE.read_bytes())
    os.mkfifo(root / "fifo-1.0-py3-none-any.whl")
    sock = socket.socket(socket.AF_UNIX)
    sock.bind(str(root / "sock-1.0-py3-none-any.whl"))
    sock.close()
    (root / "null-1.0-py3-none-any.whl").symlink_to(os.devnull)
    lines = [
        f"{root}/fifo-1.0-py3-none-any.whl: not a regular file (a FIFO)",
        f"{root}/null-1.0-py3-none-any.whl: not a regular file (a character device)",
        f"{root}/sock-1.0-py3-none-any.whl: not a regular file (a socket)",
    ]
    return root, lines


@pytest.mark.parametrize("command", ["inspect", "gpus", "audit"])
def test_specials_named_like_wheels_in_a_directory_get_their_line(
    directory_with_specials: tuple[Path, list[str]], command: str, capsys: pytest.CaptureFixture[str]
) -> None:
    root, lines = directory_with_specials
    extra = ["--offline"] if command == "audit" else []
    for fmt in formats(command):
        code = main([command, "--no-progress", "--format", fmt, *extra, str(root)])
        out, err = capsys.readouterr()
        assert code == 2, (command, fmt, err)
        for line in lines:  # on standard error, and in the report itself
            name = line.split(": ")[0]
            assert any(name in e and "not a regular file" in e for e in err.splitlines()), (fmt, line, err)
            assert Path(name).name in out, (command, fmt)
        assert "good01" in out and "good02" in out  # the good inputs are still reported
        if fmt == "json":
            json.loads(out)
        elif fmt == "junit":
            ET.fromstring(out)


def test_audit_of_a_library_says_what_audit_reads(capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["audit", "--offline", str(EXAMPLE)]) == 2
    (line,) = capsys.readouterr().err.splitlines()
    assert line == (
        f"cudaship: error: {EXAMPLE}: a native binary, not a wheel: audit reads wheels (.whl) and exported "
        f"programs (.pt2, .pte); `cudaship inspect {EXAMPLE}` reads a library"
    )


def test_audit_of_a_directory_without_wheels_or_programs_names_both(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    (tmp_path / "libvecadd.so").write_bytes(EXAMPLE.read_bytes())
    assert main(["audit", "--offline", str(tmp_path)]) == 2
    (line,) = capsys.readouterr().err.splitlines()
    assert line == (
        f"cudaship: error: {tmp_path}: nothing to audit in this directory: audit reads wheels (.whl) and "
        "exported programs (.pt2, .pte), none is under it"
    )


@pytest.mark.parametrize("fmt", list(formats("program inspect")))
def test_program_inspect_reports_the_good_package_and_names_the_bad_ones(
    tmp_path: Path, fmt: str, capsys: pytest.CaptureFixture[str]
) -> None:
    from tests.program.builders import make_pt2

    good = make_pt2(tmp_path / "good.pt2", EXAMPLE)
    fifo = tmp_path / "fifo.pt2"
    os.mkfifo(fifo)
    missing = tmp_path / "missing.pt2"
    code = main(["program", "inspect", "--format", fmt, str(fifo), str(good), str(missing)])
    out, err = capsys.readouterr()
    assert code == 2
    assert str(good) in out
    if fmt == "json":
        assert [p["path"] for p in json.loads(out)["programs"]] == [str(good)]
    assert err.splitlines() == [
        f"cudaship: error: {fifo}: not a regular file (a FIFO)",
        f"cudaship: error: {missing}: no such file",
    ]
