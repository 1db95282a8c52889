"""inspect on mingw-w64 / lld-link DLLs and import libraries, read on Linux (where cuobjdump reads no PE)."""

from __future__ import annotations

import json
import re
from collections.abc import Callable
from pathlib import Path
from typing import Any

import jsonschema
import pytest

from cudaship.cli.main import main
from cudaship.exitcodes import ExitCode
from tests.fixtures.mingw import FATBIN_CARRIER_GENCODE, IMPORT_LIBRARIES, MINGW_BUILDS, PeExpect

SCHEMA = (
    Path(__file__).resolve().parents[2] / "src" / "cudaship" / "render" / "schemas" / "inspect.schema.json"
)
DLLS = sorted(MINGW_BUILDS)
LIBS = sorted(IMPORT_LIBRARIES)


def inspect_json(path: Path, capsys: pytest.CaptureFixture[str], *extra: str) -> dict[str, Any]:
    code = main(["inspect", "--no-progress", "--format", "json", *extra, str(path)])
    out, err = capsys.readouterr()
    assert code == ExitCode.OK, err
    data = json.loads(out)
    jsonschema.validate(data, json.loads(SCHEMA.read_text()))
    (f,) = data["files"]
    assert f["error"] is None
    return dict(f)


def _symbol_names(detail: dict[str, Any]) -> set[str | int]:
    return {s["name"] if s["name"] is not None else s["ordinal"] for s in detail["symbols"]}


@pytest.mark.parametrize("name", DLLS, ids=DLLS)
def test_dll_imports_exports_and_machine(
    name: str, mingw_build: Callable[[str], Path], capsys: pytest.CaptureFixture[str]
) -> None:
    expect: PeExpect = MINGW_BUILDS[name]
    f = inspect_json(mingw_build(name), capsys)
    assert f["format"] == "pe"
    assert f["machine"] == expect.machine
    details = {(d["library"].lower(), d["kind"]): d for d in f["import_details"]}
    for library, symbols in expect.imports.items():
        assert library in f["imports"]
        assert set(symbols) <= _symbol_names(details[(library.lower(), "import")])
    for library, symbols in expect.delay_imports.items():
        assert library in f["imports"], "delay-load imports are imports too"
        assert set(symbols) <= _symbol_names(details[(library.lower(), "delay")])
    assert set(expect.exports) <= set(f["exports"])
    assert set(expect.embedded_library_names) <= set(f["embedded_library_names"])
    for fragment in expect.no_import_matching:
        assert not any(fragment in i.lower() for i in f["imports"])


def test_fatbin_in_a_dll(mingw_build: Callable[[str], Path], capsys: pytest.CaptureFixture[str]) -> None:
    codes = re.findall(r"code=(\w+)", " ".join(FATBIN_CARRIER_GENCODE))
    f = inspect_json(mingw_build("fatbin_carrier.dll"), capsys)
    assert set(f["sass"]) == {c for c in codes if c.startswith("sm_")}
    assert set(f["ptx"]) == {c for c in codes if c.startswith("compute_")}
    assert {e["section"] for e in f["device_code"]} == {".nv_fatb"}
    assert f["linkage"]["runtime"] == "dynamic" and f["linkage"]["cudart_major"] == 13
    assert f["summary"].endswith("cudart 13 dynamic")


def test_driver_by_import_and_by_name(
    mingw_build: Callable[[str], Path], capsys: pytest.CaptureFixture[str]
) -> None:
    assert inspect_json(mingw_build("cuda_consumer.dll"), capsys)["linkage"]["driver"] == "import"
    assert inspect_json(mingw_build("driver_loader.dll"), capsys)["linkage"]["driver"] == "dlopen"


@pytest.mark.parametrize("name", LIBS, ids=LIBS)
def test_import_library(
    name: str, mingw_build: Callable[[str], Path], capsys: pytest.CaptureFixture[str]
) -> None:
    expect = IMPORT_LIBRARIES[name]
    f = inspect_json(mingw_build(name), capsys)
    assert f["format"] == "coff-import-library"
    assert f["kind"] == "import-library"
    assert f["imports"] == [expect.dll]
    (detail,) = f["import_details"]
    assert set(expect.symbols) <= _symbol_names(detail)


@pytest.mark.parametrize("keep", [2, 64, 512, 4096], ids=["2B", "64B", "512B", "4KiB"])
def test_truncated_dll_one_line(
    keep: int, mingw_build: Callable[[str], Path], tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    cut = tmp_path / "cut.dll"
    cut.write_bytes(mingw_build("fatbin_carrier.dll").read_bytes()[:keep])
    code = main(["inspect", "--no-progress", "--format", "json", str(cut)])
    out, err = capsys.readouterr()
    assert code == ExitCode.BAD_INPUT
    assert err.count("\n") == 1 and str(cut) in err and "Traceback" not in err
    assert json.loads(out)["files"][0]["error"]
