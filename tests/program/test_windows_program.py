"""A program exported for Windows, read and judged on Linux (issue 24, item 2): a PE wrapper built here with
MinGW-w64 (C++ with ``std::regex`` as AOTInductor's wrapper, importing ``cudart64_13.dll`` and ``nvcuda.dll``
through import libraries made with dlltool) beside a real nvcc ``sm_90a`` cubin, in AOTInductor's layout.

``program inspect`` shows the PE wrapper, its imports and the device code; ``program check --platform
windows-x86_64`` passes against a Windows cu130 runtime and fails against cu126 (the wrapper imports
cudart64_13.dll) or an old driver, each naming the reason; a wrapper that imports MinGW's own runtime DLLs
(built without ``-static-libstdc++``) fails, and so does export's own check of it.
"""

from __future__ import annotations

import json
import shutil
import subprocess
from collections.abc import Callable
from pathlib import Path

import pytest

from cudaship.cli.main import main
from cudaship.inspection.program import read_program
from cudaship.program.check import check_program
from cudaship.program.export import self_check
from cudaship.program.records import CheckReport, outcome
from tests.program.builders import make_export_dir, make_pt2

WRAPPER_SOURCE = r"""
#include <regex>
#include <string>
extern "C" int cudaMalloc(void** ptr, unsigned long long size);
extern "C" int cuInit(unsigned flags);
extern "C" __declspec(dllexport) int AOTInductorModelContainerCreateWithDevice(const char* device) {
    static const std::regex pattern("^(cpu|cuda)(:([0-9]+))?$");
    if (!std::regex_match(std::string(device), pattern)) return -1;
    void* p = nullptr;
    cuInit(0);
    return cudaMalloc(&p, 16);
}
"""
DEFS = {
    "cudart": "LIBRARY cudart64_13.dll\nEXPORTS\ncudaMalloc\n",
    "nvcuda": "LIBRARY nvcuda.dll\nEXPORTS\ncuInit\n",
}
METADATA = {"AOTI_DEVICE_KEY": "cuda", "AOTI_PLATFORM": "windows", "AOTI_MACHINE": "x86_64"}


def _mingw() -> tuple[str, str]:
    cxx = shutil.which("x86_64-w64-mingw32-g++-posix") or shutil.which("x86_64-w64-mingw32-g++")
    dlltool = shutil.which("x86_64-w64-mingw32-dlltool")
    if cxx is None or dlltool is None:
        pytest.skip("MinGW-w64 g++ and dlltool are needed")
    return cxx, dlltool


def pe_wrapper(directory: Path, *, static_runtime: bool) -> Path:
    """A Windows wrapper DLL; ``static_runtime`` links libstdc++, libgcc and winpthread into it, as torch's
    cross compile does (else it imports libstdc++-6.dll and libgcc_s_seh-1.dll, and the posix flavour
    libwinpthread-1.dll even with -static-libstdc++)."""
    cxx, dlltool = _mingw()
    directory.mkdir(parents=True, exist_ok=True)
    for name, text in DEFS.items():
        (directory / f"{name}.def").write_text(text)
        subprocess.run(
            [dlltool, "-d", str(directory / f"{name}.def"), "-l", str(directory / f"lib{name}.a")],
            check=True,
            capture_output=True,
        )
    src = directory / "wrapper.cpp"
    src.write_text(WRAPPER_SOURCE)
    out = directory / "wrapper.dll"
    command = [
        cxx,
        "-shared",
        "-O1",
        "-s",
        "-o",
        str(out),
        str(src),
        f"-L{directory}",
        "-lcudart",
        "-lnvcuda",
    ]
    if static_runtime:
        # -static-libstdc++ -static-libgcc (torch's flags) still leave the posix flavour's libstdc++.a
        # importing libwinpthread-1.dll (gcc appends -lpthread after the user's -Wl,-Bstatic -lwinpthread);
        # -static links all three, and the CUDA import libraries still import their DLLs
        command += ["-static"]
    subprocess.run(command, check=True, capture_output=True)
    return out


@pytest.fixture
def windows_export(tmp_path: Path, nvcc_build: Callable[[str], Path]) -> Path:
    wrapper = pe_wrapper(tmp_path / "build", static_runtime=True)
    package = make_pt2(tmp_path / "win.pt2", wrapper, [nvcc_build("cubin_sm90a")], METADATA)
    assert package.stat().st_size < 5 << 20  # a committed or built test program stays small
    return make_export_dir(tmp_path / "win", package, platform="windows-x86_64")


def item(report: CheckReport, name: str) -> tuple[str, str]:
    return next((outcome(i), i.reason) for i in report.items if i.name == name)


def test_inspect_shows_the_pe_wrapper(windows_export: Path, capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["program", "inspect", str(windows_export)]) == 0
    out = capsys.readouterr().out
    assert "  target        windows-x86_64, device cuda\n" in out
    assert "  cudart        cudart 13 (dynamic)\n" in out
    assert "  CUDA train    13.0, from provenance.json (torch 2.11.0+cu130)\n" in out
    imports = next(line for line in out.splitlines() if line.strip().startswith("imports"))
    assert "cudart64_13.dll" in imports and "nvcuda.dll" in imports
    assert "libstdc++-6.dll" not in imports
    assert "sm_90a       sass" in out
    assert main(["program", "inspect", str(windows_export), "--format", "json"]) == 0
    (program,) = json.loads(capsys.readouterr().out)["programs"]
    wrapper = next(m for m in program["members"] if m["role"] == "wrapper-library")
    assert wrapper["format"] == "pe" and program["sass"] == ["sm_90a"]


def test_check_against_a_windows_cu130_runtime_passes(windows_export: Path) -> None:
    report = check_program(
        windows_export, platform="windows-x86_64", train="cu130", gpu="9.0", driver="581.42"
    )
    assert report.passed, report.items
    assert item(report, "platform") == ("pass", "program and runtime are windows-x86_64")
    assert item(report, "train")[0] == "pass"
    assert item(report, "arch")[0] == "warn"  # sm_90a: one GPU generation
    assert item(report, "driver")[0] == "pass"
    assert item(report, "libstdc++")[0] == "pass"


def test_check_against_cu126_names_the_dll(windows_export: Path) -> None:
    report = check_program(windows_export, platform="windows-x86_64", train="cu126", gpu="9.0")
    status, message = item(report, "train")
    assert status == "fail"
    assert (
        "its wrapper imports cudart64_13.dll, which a cu126 runtime does not provide (load fails)" in message
    )


def test_check_against_an_old_driver_names_it(windows_export: Path) -> None:
    report = check_program(
        windows_export, platform="windows-x86_64", train="cu130", gpu="9.0", driver="566.36"
    )
    status, message = item(report, "driver")
    assert status == "fail" and "566.36" in message and "13" in message


def test_check_against_linux_fails_platform(windows_export: Path) -> None:
    report = check_program(windows_export, platform="linux-x86_64", train="cu130")
    status, message = item(report, "platform")
    assert status == "fail"
    assert "compiled for windows-x86_64" in message and "is linux-x86_64" in message


def test_wrapper_needing_mingw_runtime_fails_check_and_export_self_check(
    tmp_path: Path, nvcc_build: Callable[[str], Path]
) -> None:
    wrapper = pe_wrapper(tmp_path / "build", static_runtime=False)
    package = make_pt2(tmp_path / "win.pt2", wrapper, [nvcc_build("cubin_sm90a")], METADATA)
    export = make_export_dir(tmp_path / "win", package, platform="windows-x86_64")
    report = check_program(export, platform="windows-x86_64", train="cu130", gpu="9.0")
    status, message = item(report, "libstdc++")
    assert status == "fail" and "libstdc++-6.dll" in message and "-static" in message
    (problem,) = self_check(read_program(export), "windows-x86_64", "x86_64-w64-mingw32-g++")
    assert "libstdc++-6.dll" in problem and "(compiler x86_64-w64-mingw32-g++)" in problem


def test_export_self_check_on_linux_and_windows_wrappers(windows_export: Path, tmp_path: Path) -> None:
    info = read_program(windows_export)
    assert self_check(info, "windows-x86_64", "x86_64-w64-mingw32-g++") == ()
    (problem,) = self_check(info, "linux-x86_64", "g++")
    assert "is PE, not a linux library (ELF)" in problem


def test_static_libstdcxx_linux_wrapper_fails_export_self_check(
    tmp_path: Path, nvcc_build: Callable[[str], Path]
) -> None:
    from tests.program.builders import gxx_library

    static = gxx_library(tmp_path / "lib", "wrapper", static_libstdcxx=True)
    info = read_program(make_pt2(tmp_path / "s.pt2", static, [nvcc_build("cubin_sm90a")]))
    (problem,) = self_check(info, "linux-x86_64", "/opt/gcc/bin/g++")
    assert "links libstdc++ statically (compiler /opt/gcc/bin/g++)" in problem
    dynamic = gxx_library(tmp_path / "lib2", "wrapper")
    assert self_check(read_program(make_pt2(tmp_path / "d.pt2", dynamic)), "linux-x86_64", "g++") == ()


def test_unreadable_member_is_not_a_pass(tmp_path: Path) -> None:
    import zipfile

    from tests.program.builders import aoti_metadata

    package = tmp_path / "broken.pt2"
    with zipfile.ZipFile(package, "w") as z:
        z.writestr("model/data/aotinductor/model/c.wrapper.so", b"\x7fELF" + b"\0" * 12)
        z.writestr("model/data/aotinductor/model/c.wrapper_metadata.json", json.dumps(aoti_metadata()))
    problems = self_check(read_program(package), "linux-x86_64", "g++")
    assert any(p.startswith("cannot check model/data/aotinductor/model/c.wrapper.so") for p in problems)


def test_audit_and_gpus_read_the_windows_program(
    windows_export: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    package = str(windows_export / "model.pt2")
    main(["audit", package, "--format", "json"])
    audit = json.loads(capsys.readouterr().out)
    assert "windows" in json.dumps(audit)
    assert main(["gpus", package]) == 0
    out = capsys.readouterr().out
    assert "sm_90a" in out or "9.0" in out


def test_export_report_with_problems(windows_export: Path, capsys: pytest.CaptureFixture[str]) -> None:
    """The export report says what export's own check found, in text and in JSON (schema-valid)."""
    import jsonschema

    from cudaship.inspection.provenance import read_provenance
    from cudaship.program.export import ExportResult
    from cudaship.render.program_json import JSON_SCHEMA
    from cudaship.render.table import PROGRAM_EXPORT, render

    info = read_program(windows_export)
    problems = self_check(info, "linux-x86_64", "g++")
    result = ExportResult(
        windows_export, read_provenance(windows_export), info, 1.0, (), problems, ("compiler g++",)
    )
    text = render(PROGRAM_EXPORT, "text", result)
    assert "\nnote: compiler g++\n" in text
    assert "\nFAILED: cwrapperhash.wrapper.dll is PE, not a linux library (ELF)\n" in text
    data = json.loads(render(PROGRAM_EXPORT, "json", result))
    jsonschema.Draft202012Validator(JSON_SCHEMA).validate(data)
    assert data["passed"] is False and data["problems"] == list(problems)
    assert data["provenance"]["target_platform"] == "windows-x86_64"


def test_the_wrapper_decides_the_platform_over_aoti_platform(
    tmp_path: Path, nvcc_build: Callable[[str], Path]
) -> None:
    """torch 2.11's cross compile on the H200 wrote AOTI_PLATFORM "linux" beside its PE wrapper (issue 33):
    the program is for Windows, and the note says why the metadata is not taken."""
    wrapper = pe_wrapper(tmp_path / "build", static_runtime=True)
    metadata = {**METADATA, "AOTI_PLATFORM": "linux"}
    info = read_program(make_pt2(tmp_path / "x.pt2", wrapper, [nvcc_build("cubin_sm90a")], metadata))
    assert info.platform == "windows"
    assert any(n.startswith("AOTI_PLATFORM says linux, but the wrapper is a PE DLL") for n in info.notes)
