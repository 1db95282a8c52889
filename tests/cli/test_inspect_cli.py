"""``cudaship inspect`` end to end: real libraries, real wheels, bad input, JSON schema, exit codes."""

from __future__ import annotations

import json
import re
import shutil
import struct
import zipfile
from pathlib import Path
from typing import Any

import jsonschema
import pytest

from cudaship.cli.main import main
from cudaship.exitcodes import ExitCode

REPO = Path(__file__).resolve().parents[2]
EXAMPLE = REPO / "examples" / "libvecadd.so"
BUILD_SCRIPT = REPO / "examples" / "build_example.sh"
SCHEMA = REPO / "src" / "cudaship" / "render" / "schemas" / "inspect.schema.json"


def run(args: list[str], capsys: pytest.CaptureFixture[str]) -> tuple[int, str, str]:
    code = main(["inspect", "--no-progress", *args])
    out, err = capsys.readouterr()
    return code, out, err


def run_json(args: list[str], capsys: pytest.CaptureFixture[str]) -> tuple[int, dict[str, Any], str]:
    code, out, err = run(["--format", "json", *args], capsys)
    data = json.loads(out)
    jsonschema.validate(data, json.loads(SCHEMA.read_text()))
    return code, data, err


def by_path(data: dict[str, Any]) -> dict[str, dict[str, Any]]:
    return {f["path"]: f for f in data["files"]}


def gencode_targets(script: Path) -> tuple[set[str], set[str]]:
    """The SASS and PTX targets a build script asks nvcc for (``code=sm_XY`` / ``code=compute_XY``)."""
    codes = re.findall(r"code=(\w+)", script.read_text())
    return {c for c in codes if c.startswith("sm_")}, {c for c in codes if c.startswith("compute_")}


# -- the README example --


def test_example_summary_matches_its_build(capsys: pytest.CaptureFixture[str]) -> None:
    sass, ptx = gencode_targets(BUILD_SCRIPT)
    code, data, err = run_json([str(EXAMPLE)], capsys)
    assert code == ExitCode.OK, err
    (f,) = data["files"]
    assert f["path"] == str(EXAMPLE)
    assert f["format"] == "elf"
    assert set(f["sass"]) == sass
    assert set(f["ptx"]) == ptx
    assert "libcudart.so.13" in f["imports"]
    assert f["linkage"]["runtime"] == "dynamic" and f["linkage"]["cudart_major"] == 13
    assert f["summary"] == f"{' '.join(f['sass'])} | PTX {' '.join(f['ptx'])} | cudart 13 dynamic"
    ptx_entries = [e for e in f["device_code"] if e["kind"] == "ptx"]
    assert ptx_entries and all(e["ptx_isa"] and e["cuda_release"] for e in ptx_entries)


def test_example_text_report(capsys: pytest.CaptureFixture[str]) -> None:
    code, data, _ = run_json([str(EXAMPLE)], capsys)
    summary = data["files"][0]["summary"]
    code, out, err = run([str(EXAMPLE)], capsys)
    assert code == ExitCode.OK, err
    assert f"summary: {summary}" in out
    assert "libcudart.so.13" in out
    assert ".nv_fatbin" in out
    assert err == ""


def test_output_file(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    target = tmp_path / "report.json"
    code, out, err = run(["--format", "json", "-o", str(target), str(EXAMPLE)], capsys)
    assert code == ExitCode.OK, err
    assert out == ""
    data = json.loads(target.read_text())
    jsonschema.validate(data, json.loads(SCHEMA.read_text()))
    assert data["schema"] == 1 and data["ok"] is True


def test_details_reads_toolkit_versions(capsys: pytest.CaptureFixture[str]) -> None:
    _, plain, _ = run_json([str(EXAMPLE)], capsys)
    code, detailed, err = run_json(["--details", str(EXAMPLE)], capsys)
    assert code == ExitCode.OK, err
    assert all(e["toolkit_version"] is None for e in plain["files"][0]["device_code"])
    sass = [e for e in detailed["files"][0]["device_code"] if e["kind"] == "sass"]
    assert sass and all(e["toolkit_version"] for e in sass)
    assert len({e["toolkit_version"] for e in sass}) == 1


@pytest.mark.skipif(not (shutil.which("c++filt") or shutil.which("llvm-cxxfilt")), reason="no demangler")
def test_demangle_and_no_exports(capsys: pytest.CaptureFixture[str]) -> None:
    _, data, _ = run_json([str(EXAMPLE)], capsys)
    raw = data["files"][0]["exports"]
    assert "vecadd_launch" in raw and "_ZN10vecadd_lib11abi_versionEv" in raw
    _, data, _ = run_json(["--demangle", str(EXAMPLE)], capsys)
    demangled = data["files"][0]["exports"]
    assert "vecadd_lib::abi_version()" in demangled and "vecadd_launch" in demangled
    assert len(demangled) == len(raw)
    code, out, _ = run(["--demangle", str(EXAMPLE)], capsys)
    assert code == ExitCode.OK and "vecadd_lib::abi_version()" in out
    _, data, _ = run_json(["--no-exports", str(EXAMPLE)], capsys)
    assert "exports" not in data["files"][0]


# -- real wheels --


@pytest.mark.network
def test_wheels_report_members_and_wheel_facts(
    bitsandbytes_linux_wheel: Path, bitsandbytes_windows_wheel: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    code, data, err = run_json([str(bitsandbytes_linux_wheel), str(bitsandbytes_windows_wheel)], capsys)
    assert code == ExitCode.OK, err
    wheels = {w["path"]: w for w in data["wheels"]}
    assert set(wheels) == {str(bitsandbytes_linux_wheel), str(bitsandbytes_windows_wheel)}
    for path, wheel in wheels.items():
        assert wheel["name"] == "bitsandbytes"
        assert wheel["filename"] == Path(path).name
        assert wheel["version"] in Path(path).name
        with zipfile.ZipFile(path) as z:
            libraries = {n for n in z.namelist() if n.endswith((".so", ".dll"))}
        assert set(wheel["files"]) == libraries
    members = [f for f in data["files"] if f["wheel"] is not None]
    assert all("/" in f["path"] and "\\" not in f["path"] for f in members)
    linux = {Path(f["path"]).stem: f for f in members if f["format"] == "elf"}
    windows = {Path(f["path"]).stem: f for f in members if f["format"] == "pe"}
    cuda = sorted(name for name in linux if "cuda" in name and name in windows)
    assert cuda, "both wheels ship CUDA builds"
    for name in cuda:
        # the same sources built for both OSes: the device code read from the DLL on Linux must agree
        assert windows[name]["sass"] == linux[name]["sass"], name
        assert windows[name]["ptx"] == linux[name]["ptx"], name
        assert linux[name]["sass"], name


@pytest.mark.network
def test_cudart_wheels(
    cudart_linux_wheel: Path, cudart_windows_wheel: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    code, data, err = run_json([str(cudart_linux_wheel), str(cudart_windows_wheel)], capsys)
    assert code == ExitCode.OK, err
    files = by_path(data)
    linux = next(f for p, f in files.items() if p.endswith("/libcudart.so.13"))
    windows = next(f for p, f in files.items() if p.endswith("/cudart64_13.dll"))
    assert linux["soname"] == "libcudart.so.13"
    assert linux["format"] == "elf" and windows["format"] == "pe"
    # the runtime itself reaches the driver by name, never by import
    for f in (linux, windows):
        assert f["linkage"]["driver"] == "dlopen", f["path"]
        assert not any(i.lower() in ("libcuda.so.1", "nvcuda.dll") for i in f["imports"])
    # CUDA 13's .lib files in this wheel are archives of objects (driver and runtime loaders), not import
    # libraries: each is read, and reported as a static library (it names no DLL)
    libs = [f for f in data["files"] if f["path"].endswith(".lib")]
    assert libs and all(f["error"] is None for f in libs)
    for f in libs:
        expected = ("coff-import-library", "import-library") if f["imports"] else ("static-library",) * 2
        assert (f["format"], f["kind"]) == expected, f["path"]


# -- directories and explicit files --


def test_directory_walk_skips_non_binaries_quietly(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    (tmp_path / "pkg").mkdir()
    shutil.copy(EXAMPLE, tmp_path / "pkg" / "libvecadd.so")
    shutil.copy(EXAMPLE, tmp_path / "pkg" / "renamed_without_suffix")
    (tmp_path / "pkg" / "README.md").write_text("# hello\n")
    (tmp_path / "pkg" / "module.py").write_text("x = 1\n")
    code, data, err = run_json([str(tmp_path)], capsys)
    assert code == ExitCode.OK, err
    paths = sorted(Path(f["path"]).name for f in data["files"])
    assert paths == ["libvecadd.so", "renamed_without_suffix"]
    assert all(f["format"] == "elf" for f in data["files"])


def test_named_non_binary_is_an_error(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    text = tmp_path / "notes.txt"
    text.write_text("not a binary\n")
    code, _, err = run([str(text), str(EXAMPLE)], capsys)
    assert code == ExitCode.BAD_INPUT
    assert err.count("\n") == 1 and str(text) in err and "not a binary" in err


# -- bad input --


def _corrupt_fatbin(tmp_path: Path) -> Path:
    """A standalone fatbin made from the example's first container, with an entry claiming 2**63 bytes."""
    data = EXAMPLE.read_bytes()
    start = data.find(struct.pack("<I", 0xBA55ED50))
    (fat_size,) = struct.unpack_from("<Q", data, start + 8)
    blob = bytearray(data[start : start + 16 + fat_size])
    struct.pack_into("<Q", blob, 16 + 8, 1 << 63)
    path = tmp_path / "corrupt.fatbin"
    path.write_bytes(bytes(blob))
    return path


def _bomb_wheel(tmp_path: Path) -> Path:
    path = tmp_path / "bomb-1.0-py3-none-any.whl"
    with zipfile.ZipFile(path, "w", compression=zipfile.ZIP_DEFLATED) as z:
        z.writestr("bomb/libok.so", EXAMPLE.read_bytes())
        with z.open("bomb/libbomb.so", "w") as f:
            f.write(b"\x7fELF")
            zeros = bytes(1 << 20)
            for _ in range(40):
                f.write(zeros)
    return path


def _truncated_pe(tmp_path: Path, wheel: Path) -> Path:
    with zipfile.ZipFile(wheel) as z:
        name = next(n for n in z.namelist() if n.endswith(".dll") and "cuda" in n)
        data = z.read(name)
    path = tmp_path / "truncated.dll"
    path.write_bytes(data[:4096])
    return path


@pytest.mark.network
def test_bad_inputs_each_one_line_others_still_reported(
    tmp_path: Path, bitsandbytes_windows_wheel: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    text_so = tmp_path / "libtext.so"
    text_so.write_text("this is a text file named like a library\n")
    empty = tmp_path / "libempty.so"
    empty.write_bytes(b"")
    bad = {
        "text named .so": text_so,
        "empty": empty,
        "truncated PE": _truncated_pe(tmp_path, bitsandbytes_windows_wheel),
        "corrupt fatbin": _corrupt_fatbin(tmp_path),
        "missing": tmp_path / "missing.so",
    }
    bomb = _bomb_wheel(tmp_path)
    args = [str(EXAMPLE), *map(str, bad.values()), str(bomb)]
    code, data, err = run_json(args, capsys)
    assert code == ExitCode.BAD_INPUT
    assert "Traceback" not in err
    lines = err.strip().splitlines()
    assert len(lines) == len(bad) + 1, err
    files = by_path(data)
    for why, path in bad.items():
        assert files[str(path)]["error"], why
        assert sum(str(path) in line for line in lines) == 1, why
    assert any("libbomb.so" in line and "zip bomb" in line for line in lines)
    assert files[str(EXAMPLE)]["error"] is None and files[str(EXAMPLE)]["sass"]
    assert files["bomb/libok.so"]["error"] is None and files["bomb/libok.so"]["sass"]
    assert data["ok"] is False


def test_not_a_wheel_is_reported(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    fake = tmp_path / "fake-1.0-py3-none-any.whl"
    fake.write_text("PK but not really\n")
    code, data, err = run_json([str(fake), str(EXAMPLE)], capsys)
    assert code == ExitCode.BAD_INPUT
    assert str(fake) in err and "zip" in err
    assert by_path(data)[str(EXAMPLE)]["error"] is None


@pytest.mark.parametrize("keep", [64, 1024, 20000, 40000], ids=["64B", "1KiB", "20KB", "40KB"])
def test_truncated_example_never_a_traceback(
    keep: int, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    cut = tmp_path / "libcut.so"
    cut.write_bytes(EXAMPLE.read_bytes()[:keep])
    code, data, err = run_json([str(cut)], capsys)
    assert "Traceback" not in err and "internal error" not in err
    (f,) = data["files"]
    if code == ExitCode.BAD_INPUT:
        assert f["error"] and len(err.strip().splitlines()) == 1
    else:
        assert code == ExitCode.OK and f["error"] is None


def test_no_paths_is_usage_error(capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["inspect"]) == ExitCode.BAD_INPUT


def test_text_report_in_input_order_with_empty_wheel(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    pure = tmp_path / "purepy-1.0-py3-none-any.whl"
    with zipfile.ZipFile(pure, "w") as z:
        z.writestr("purepy/__init__.py", "x = 1\n")
        z.writestr("purepy-1.0.dist-info/METADATA", "Metadata-Version: 2.1\nName: purepy\nVersion: 1.0\n")
    code, out, err = run([str(pure), str(EXAMPLE)], capsys)
    assert code == ExitCode.OK, err
    assert (
        out.index(f"wheel {pure}") < out.index("(no native or device-code files)") < out.index(str(EXAMPLE))
    )
    assert "purepy 1.0" in out


def test_corrupt_container_inside_a_library(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    """An entry claiming 2**63 bytes inside .nv_fatbin: one line naming the file, the other container kept."""
    data = bytearray(EXAMPLE.read_bytes())
    first = data.find(struct.pack("<I", 0xBA55ED50))
    struct.pack_into("<Q", data, first + 16 + 8, 1 << 63)
    broken = tmp_path / "libbroken.so"
    broken.write_bytes(bytes(data))
    _, clean, _ = run_json([str(EXAMPLE)], capsys)
    code, report, err = run_json([str(broken)], capsys)
    assert code == ExitCode.BAD_INPUT
    (line,) = err.strip().splitlines()
    assert str(broken) in line and "corrupt fatbin container in .nv_fatbin" in line and "Traceback" not in err
    (f,) = report["files"]
    assert 0 < f["counts"]["entries"] < clean["files"][0]["counts"]["entries"]
    assert f["imports"] == clean["files"][0]["imports"]


def test_user_guide_example_is_current(
    capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    """docs/inspect.md shows the text report of the shipped example: it must be what the command prints."""
    guide = (REPO / "docs" / "inspect.md").read_text()
    shown = guide.split("$ cudaship inspect examples/libvecadd.so\n", 1)[1].split("```", 1)[0]
    monkeypatch.chdir(REPO)
    code, out, err = run(["examples/libvecadd.so"], capsys)
    assert code == ExitCode.OK, err
    assert out == shown
