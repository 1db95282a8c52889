"""``torch_cuda.lib`` made from torch's own declarations (issue 33): the C shim names the headers of the torch
the tests download declare for ``torch_cuda``, checked against that torch's ``libtorch_cuda.so`` (``nm -D``
judges), written by MinGW's dlltool and read back (``x86_64-w64-mingw32-nm`` judges); a mismatch is one line
naming the name; the Windows toolchain links the made library when ``--windows-torch`` has none and
``provenance.json`` records how it was made; ``program check`` fails a wrapper importing a name the made
library does not provide."""

from __future__ import annotations

import shutil
import subprocess
import zipfile
from collections.abc import Callable
from pathlib import Path

import pytest

from cudaship.errors import ProgramError, UsageError
from cudaship.inspection.provenance import read_provenance
from cudaship.program.check import check_program
from cudaship.program.import_libs import (
    SHIM_HEADERS,
    checked_declarations,
    declared_in,
    made_torch_cuda,
)
from cudaship.program.records import outcome
from cudaship.program.toolchain import windows_toolchain
from tests.program.builders import make_export_dir, make_pt2

HEADERS = f"torch/{SHIM_HEADERS}/"


def _tool(name: str) -> str:
    path = shutil.which(name)
    if path is None:
        pytest.skip(f"{name} is needed (scripts/test installs mingw-w64 and binutils)")
    return path


@pytest.fixture(scope="module")
def torch_dir(torch_linux_wheel: Path, tmp_path_factory: pytest.TempPathFactory) -> Path:
    """The shim headers and ``lib/libtorch_cuda.so`` of the real torch wheel, unpacked as installed."""
    root = tmp_path_factory.mktemp("torch-shims")
    with zipfile.ZipFile(torch_linux_wheel) as z:
        for name in z.namelist():
            if name.startswith(HEADERS) or name == "torch/lib/libtorch_cuda.so":
                z.extract(name, root)
    return root / "torch"


def _copy_with(torch_dir: Path, target: Path, edit: Callable[[str], str]) -> Path:
    """A torch directory like ``torch_dir`` whose generated ``c_shim_cuda.h`` is ``edit``-ed."""
    shutil.copytree(torch_dir / "include", target / "include")
    (target / "lib").mkdir()
    (target / "lib" / "libtorch_cuda.so").symlink_to(torch_dir / "lib" / "libtorch_cuda.so")
    header = target / SHIM_HEADERS / "generated" / "c_shim_cuda.h"
    header.write_text(edit(header.read_text()))
    return target


def test_declarations_in_cuda_blocks_and_cuda_headers() -> None:
    text = """
#include "macros.h"
#define AOTI_TORCH_EXPORT __declspec(dllimport)
AOTI_TORCH_EXPORT int32_t aoti_torch_device_type_cpu();  // torch_cpu's
/* AOTI_TORCH_EXPORT int aoti_commented_out(); */
#ifdef USE_CUDA
AOTI_TORCH_EXPORT AOTITorchError aoti_torch_create_cuda_guard(
    int32_t device_index, // a comment ( with a parenthesis
    CUDAGuardHandle* ret_guard);
AOTI_TORCH_EXPORT AOTITorchError
aoti_torch_delete_cuda_guard(CUDAGuardHandle guard);
#ifdef _WIN32
AOTI_TORCH_EXPORT void aoti_nested_in_cuda();
#endif
#else
AOTI_TORCH_EXPORT void aoti_not_cuda_else_branch();
#endif // USE_CUDA
#if defined(USE_CUDA)
AOTI_TORCH_EXPORT const char* aoti_torch_cuda_name();
#endif
"""
    assert declared_in(text, whole_file_is_cuda=False) == [
        "aoti_torch_create_cuda_guard",
        "aoti_torch_delete_cuda_guard",
        "aoti_nested_in_cuda",
        "aoti_torch_cuda_name",
    ]
    every = declared_in(text, whole_file_is_cuda=True)
    assert "aoti_torch_device_type_cpu" in every and "aoti_not_cuda_else_branch" in every
    assert "aoti_commented_out" not in every


def test_torch_cuda_lib_from_the_real_torch(torch_dir: Path, tmp_path: Path) -> None:
    nm = _tool("nm")
    mingw_nm = _tool("x86_64-w64-mingw32-nm")
    dlltool = _tool("x86_64-w64-mingw32-dlltool")
    made = made_torch_cuda(torch_dir, "2.14.1", dlltool, tmp_path)
    # nm judges the library: its defined dynamic aoti_* symbols are exactly the names declared for torch_cuda
    listed = subprocess.run(
        [nm, "-D", "--defined-only", str(torch_dir / "lib" / "libtorch_cuda.so")],
        capture_output=True,
        text=True,
        check=True,
    ).stdout
    exported = {line.split()[-1] for line in listed.splitlines() if line.split()[-1].startswith("aoti_")}
    assert set(made.names) == exported
    assert {"aoti_torch_cuda_mm_out", "aoti_torch_create_cuda_stream_guard"} <= set(made.names)
    # MinGW's nm judges the import library: one __imp_ symbol per name
    symbols = subprocess.run(
        [mingw_nm, str(tmp_path / "torch_cuda.lib")], capture_output=True, text=True, check=True
    ).stdout
    imported = {
        line.split()[-1].removeprefix("__imp_") for line in symbols.splitlines() if "__imp_aoti" in line
    }
    assert imported == set(made.names)
    assert (made.library, made.dll, made.how) == ("torch_cuda.lib", "torch_cuda.dll", "made")
    assert made.source.startswith("torch 2.14.1: include/torch/csrc/inductor/aoti_torch/{")
    assert "generated/c_shim_cuda.h" in made.source and "c/shim.h" in made.source


def test_a_declared_name_the_library_does_not_export(torch_dir: Path, tmp_path: Path) -> None:
    extra = "AOTI_TORCH_EXPORT AOTITorchError aoti_torch_cuda_made_up(AtenTensorHandle self);\n"
    lying = _copy_with(torch_dir, tmp_path / "torch", lambda text: text + extra)
    with pytest.raises(ProgramError) as e:
        checked_declarations(lying)
    message = str(e.value)
    assert "\n" not in message
    assert (
        "aoti_torch_cuda_made_up is declared for torch_cuda in the shim headers but not exported by "
        in message
    )


def test_an_exported_name_no_header_declares(torch_dir: Path, tmp_path: Path) -> None:
    def drop(text: str) -> str:
        return "\n".join(line for line in text.splitlines() if "aoti_torch_cuda_mm_out(" not in line)

    partial = _copy_with(torch_dir, tmp_path / "torch", drop)
    with pytest.raises(ProgramError) as e:
        checked_declarations(partial)
    assert "aoti_torch_cuda_mm_out is exported by libtorch_cuda.so but declared in no shim header" in str(
        e.value
    )


def _windows_cuda_or_skip(tmp_path: Path) -> Path:
    from tests.program.test_toolchain import _windows_cuda

    return _windows_cuda(tmp_path)


def test_the_windows_toolchain_makes_torch_cuda_lib(torch_dir: Path, tmp_path: Path) -> None:
    from tests.program.test_toolchain import _posix_mingw

    cuda = _windows_cuda_or_skip(tmp_path)
    cpu_libs = tmp_path / "torch-cpu-lib"  # as PyPI's win_amd64 torch (CPU) has them: no torch_cuda.lib
    cpu_libs.mkdir()
    for name in ("torch.lib", "torch_cpu.lib"):
        (cpu_libs / name).write_bytes(b"!<arch>\n")
    with pytest.raises(UsageError) as e:
        windows_toolchain(_posix_mingw(), cuda, cpu_libs, "13.0", tmp_path / "w0", {"PATH": "/usr/bin"})
    assert "no torch_cuda.lib, and no torch to make it from" in e.value.message
    chain = windows_toolchain(
        _posix_mingw(),
        cuda,
        cpu_libs,
        "13.0",
        tmp_path / "work",
        {"PATH": "/usr/bin"},
        torch_dir=torch_dir,
        torch_version="2.14.1",
    )
    shims = Path(str(chain.config["aot_inductor.aoti_shim_library_path"]))
    assert sorted(p.name for p in shims.glob("*.lib")) == ["torch.lib", "torch_cpu.lib", "torch_cuda.lib"]
    (made,) = chain.import_libraries
    assert made.how == "made" and len(made.names) > 100
    assert any("torch_cuda.lib made from torch 2.14.1" in n for n in chain.notes)
    # a torch_cuda.lib the user gives is used as given, and recorded so
    (cpu_libs / "torch_cuda.lib").write_bytes((shims / "torch_cuda.lib").read_bytes())
    given = windows_toolchain(_posix_mingw(), cuda, cpu_libs, "13.0", tmp_path / "w2", {"PATH": "/usr/bin"})
    assert given.config["aot_inductor.aoti_shim_library_path"] == str(cpu_libs)
    (record,) = given.import_libraries
    assert (record.how, record.source, record.names) == (
        "given",
        str(cpu_libs / "torch_cuda.lib"),
        made.names,
    )


WRAPPER = r"""
extern "C" int aoti_torch_cuda_mm_out(void* out, void* self, void* mat2);
extern "C" int aoti_torch_create_cuda_stream_guard(void* stream, int index, void** guard);
extern "C" int %(extra)s;
extern "C" __declspec(dllexport) int AOTInductorModelContainerRun(void* a) {
    void* guard = 0;
    aoti_torch_create_cuda_stream_guard(a, 0, &guard);
    return aoti_torch_cuda_mm_out(a, a, a) + %(call)s;
}
"""


def _wrapper(directory: Path, library: Path, extra_def: str | None) -> Path:
    """A Windows wrapper DLL calling two torch_cuda shims through ``library`` (and one more name through a
    second import library of torch_cuda.dll, when ``extra_def`` names it)."""
    cxx = shutil.which("x86_64-w64-mingw32-g++-posix") or _tool("x86_64-w64-mingw32-g++")
    dlltool = _tool("x86_64-w64-mingw32-dlltool")
    directory.mkdir(parents=True)
    flags = [f"-L{library.parent}", "-ltorch_cuda"]
    extra, call = "aoti_unused(void)", "0"
    if extra_def is not None:
        (directory / "more.def").write_text(f"LIBRARY torch_cuda.dll\nEXPORTS\n{extra_def}\n")
        subprocess.run(
            [dlltool, "-d", str(directory / "more.def"), "-l", str(directory / "libmore.a")],
            check=True,
            capture_output=True,
        )
        flags += [f"-L{directory}", "-lmore"]
        extra, call = f"{extra_def}(void)", f"{extra_def}()"
    (directory / "wrapper.cpp").write_text(WRAPPER % {"extra": extra, "call": call})
    out = directory / "wrapper.dll"
    subprocess.run(
        [cxx, "-shared", "-O1", "-s", "-static", "-o", str(out), str(directory / "wrapper.cpp"), *flags],
        check=True,
        capture_output=True,
    )
    return out


@pytest.mark.parametrize("extra", [None, "aoti_torch_cuda_made_up"])
def test_check_compares_the_wrapper_with_the_made_library(
    torch_dir: Path, tmp_path: Path, extra: str | None
) -> None:
    dlltool = _tool("x86_64-w64-mingw32-dlltool")
    libs = tmp_path / "libs"
    libs.mkdir()
    made = made_torch_cuda(torch_dir, "2.14.1", dlltool, libs)
    wrapper = _wrapper(tmp_path / "build", libs / "torch_cuda.lib", extra)
    metadata = {"AOTI_DEVICE_KEY": "cuda", "AOTI_PLATFORM": "windows", "AOTI_MACHINE": "x86_64"}
    package = make_pt2(tmp_path / "win.pt2", wrapper, [], metadata)
    export = make_export_dir(tmp_path / "win", package, platform="windows-x86_64", import_libraries=(made,))
    assert read_provenance(export).import_libraries == (made,)  # written and read back whole
    report = check_program(export, platform="windows-x86_64", train="cu130")
    status, reason = next((outcome(i), i.reason) for i in report.items if i.name == "import libraries")
    if extra is None:
        assert status == "pass"
        assert reason.startswith(
            "2 names imported from torch_cuda.dll, all in torch_cuda.lib made (torch 2.14.1:"
        )
    else:
        assert status == "fail" and not report.passed
        assert reason.startswith(
            "the wrapper imports aoti_torch_cuda_made_up from torch_cuda.dll, which torch_cuda.lib made "
        )
        assert reason.endswith("does not provide: loading fails on Windows")
