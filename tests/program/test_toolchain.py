"""``program export``'s toolchain checks, before a minute of compiling: the compiler it hands AOTInductor must
link libstdc++ dynamically (Linux), and a Windows cross compile needs a MinGW-w64 cross compiler that has
``std::mutex``, the Windows CUDA libraries and the Windows torch import libraries: each mistake one line.

The static-libstdc++ compiler is a shell script that runs the real g++ with ``-static-libstdc++``, as
``/opt/gcc/bin/g++`` on the lent H200 did (through ``-B`` to a directory with ``libstdc++.a``).
"""

from __future__ import annotations

import shutil
import subprocess
from pathlib import Path

import pytest

from cudaship.errors import ProgramError, UsageError
from cudaship.program.toolchain import linux_toolchain, static_libstdcxx, windows_toolchain
from tests import fixtures


def _real(name: str) -> str:
    path = shutil.which(name)
    if path is None:
        pytest.skip(f"{name} is needed")
    return path


def _static_gxx(directory: Path) -> Path:
    gxx = _real("g++")
    directory.mkdir(parents=True, exist_ok=True)
    script = directory / "g++"
    script.write_text(f'#!/bin/sh\nexec {gxx} -static-libstdc++ "$@"\n')
    script.chmod(0o755)
    return script


def test_probe_tells_static_from_dynamic(tmp_path: Path) -> None:
    assert static_libstdcxx(_real("g++"), tmp_path / "a") == 0
    assert static_libstdcxx(str(_static_gxx(tmp_path / "bin")), tmp_path / "b")  # std::locale symbols
    assert static_libstdcxx(str(tmp_path / "no-such-compiler"), tmp_path / "c") is None


def test_default_skips_a_static_cxx_for_the_next_on_path(tmp_path: Path) -> None:
    static = _static_gxx(tmp_path / "opt-gcc")
    real_dir = str(Path(_real("g++")).parent)
    env = {"PATH": f"{static.parent}:{real_dir}", "CXX": str(static)}
    chain = linux_toolchain(None, tmp_path / "work", env)
    assert Path(chain.cxx).parent == Path(real_dir)
    assert chain.probes == 2  # $CXX, then the first g++ on PATH: nothing more built
    (note,) = chain.notes
    assert f"skipped {static} (links libstdc++ statically)" in note


def test_cxx_that_links_statically_is_one_line_naming_cxx(tmp_path: Path) -> None:
    static = _static_gxx(tmp_path / "opt-gcc")
    with pytest.raises(ProgramError) as e:
        linux_toolchain(str(static), tmp_path / "work", {"PATH": str(static.parent)})
    message = e.value.message
    assert "\n" not in message
    assert message.startswith(f"--cxx {static} links libstdc++ statically")
    assert "pass --cxx a compiler that links libstdc++ dynamically" in message


def test_no_dynamic_compiler_at_all(tmp_path: Path) -> None:
    static = _static_gxx(tmp_path / "opt-gcc")
    with pytest.raises(ProgramError) as e:
        linux_toolchain(None, tmp_path / "work", {"PATH": str(static.parent), "CXX": str(static)})
    assert "no C++ compiler that links libstdc++ dynamically" in e.value.message
    assert "--cxx" in e.value.message and "\n" not in e.value.message


# -- Windows cross compile -------------------------------------------------------------------------------


def _posix_mingw() -> str:
    for name in ("x86_64-w64-mingw32-g++-posix", "x86_64-w64-mingw32-g++"):
        path = shutil.which(name)
        if path is not None and "posix" in name:
            return path
    pytest.skip("the posix flavour of MinGW-w64 g++ is needed")


def _windows_cuda(tmp_path: Path) -> Path:
    """The Windows CUDA 13.0 libraries as ``cudaship toolkit install --platform windows-x86_64`` makes them
    (from the NVIDIA wheel on PyPI, cached for the suite)."""
    from cudaship.toolkit.install import InstallRequest, install
    from cudaship.toolkit.records import Platform, Source

    dest = tmp_path / "wincuda"
    try:
        install(
            InstallRequest(
                release="13.0.2",
                platform=Platform.WINDOWS_X86_64,
                components=("cudart",),
                dest=dest,
                source=Source.PYPI,
                cache_dir=fixtures.cache_dir() / "toolkit-pypi",
            )
        )
    except Exception as e:  # no network and no cache
        pytest.skip(f"Windows CUDA libraries not available: {e}")
    return dest


def test_windows_without_a_cross_compiler(tmp_path: Path) -> None:
    empty = tmp_path / "empty"
    empty.mkdir()
    with pytest.raises(UsageError) as e:
        windows_toolchain(None, None, None, "13.0", tmp_path / "work", {"PATH": str(empty)})
    assert "no MinGW-w64 cross compiler: x86_64-w64-mingw32-g++ is not on PATH" in e.value.message
    assert "\n" not in e.value.message


def test_windows_with_a_linux_compiler(tmp_path: Path) -> None:
    gxx = _real("g++")
    with pytest.raises(UsageError) as e:
        windows_toolchain(gxx, None, None, "13.0", tmp_path / "work", {"PATH": ""})
    assert "not Windows; pass --cxx a MinGW-w64 cross compiler" in e.value.message


def test_windows_with_the_win32_thread_model_of_gcc_12(tmp_path: Path) -> None:
    win32 = shutil.which("x86_64-w64-mingw32-g++-win32")
    if win32 is None:
        pytest.skip("MinGW-w64 g++ with the win32 thread model is needed")
    import subprocess

    version = subprocess.run([win32, "-dumpversion"], capture_output=True, text=True, check=False).stdout
    if int(version.split(".")[0].split("-")[0]) >= 13:
        pytest.skip("GCC 13 and later have std::mutex with the win32 thread model")
    with pytest.raises(UsageError) as e:
        windows_toolchain(win32, None, None, "13.0", tmp_path / "work", {"PATH": ""})
    assert "has no std::mutex" in e.value.message and "posix flavour" in e.value.message


def test_windows_without_the_windows_cuda_libraries(tmp_path: Path) -> None:
    with pytest.raises(UsageError) as e:
        windows_toolchain(_posix_mingw(), None, None, "13.0", tmp_path / "work", {"PATH": "/usr/bin"})
    message = e.value.message
    assert "needs the Windows CUDA libraries" in message and "\n" not in message
    assert (
        "cudaship toolkit install 13.0 --platform windows-x86_64 --source pypi --components cudart" in message
    )
    with pytest.raises(UsageError) as e:
        windows_toolchain(_posix_mingw(), tmp_path, None, "13.0", tmp_path / "work", {"PATH": "/usr/bin"})
    assert "no lib/x64/cuda.lib (not a Windows CUDA toolkit)" in e.value.message


def test_windows_cuda_of_another_major(tmp_path: Path) -> None:
    cuda = _windows_cuda(tmp_path)
    with pytest.raises(UsageError) as e:
        windows_toolchain(_posix_mingw(), cuda, None, "12.8", tmp_path / "work", {"PATH": "/usr/bin"})
    assert "holds cudart64_13.dll (CUDA 13); this torch is CUDA 12.8" in e.value.message


def test_windows_torch_import_libraries(tmp_path: Path) -> None:
    cuda = _windows_cuda(tmp_path)
    work = tmp_path / "work"
    with pytest.raises(UsageError) as e:
        windows_toolchain(_posix_mingw(), cuda, None, "13.0", work, {"PATH": "/usr/bin"})
    assert "pass --windows-torch DIR" in e.value.message
    libs = tmp_path / "torchlib"
    libs.mkdir()
    for name in ("torch.lib", "torch_cpu.lib"):  # as in a CPU win_amd64 wheel: no torch_cuda.lib
        (libs / name).write_bytes(b"!<arch>\n")
    with pytest.raises(UsageError) as e:
        windows_toolchain(_posix_mingw(), cuda, libs, "13.0", work, {"PATH": "/usr/bin"})
    assert "no torch_cuda.lib" in e.value.message
    (libs / "torch_cuda.lib").write_bytes(b"!<arch>\n")  # names no DLL: not an import library of torch_cuda
    with pytest.raises(ProgramError) as bad:
        windows_toolchain(_posix_mingw(), cuda, libs, "13.0", work, {"PATH": "/usr/bin"})
    assert bad.value.message == "names no DLL, not torch_cuda.dll"
    (libs / "torch_cuda.def").write_text("LIBRARY torch_cuda.dll\nEXPORTS\n    aoti_torch_cuda_mm_out\n")
    subprocess.run(
        [
            shutil.which("x86_64-w64-mingw32-dlltool") or "x86_64-w64-mingw32-dlltool",
            "-d",
            str(libs / "torch_cuda.def"),
            "-l",
            str(libs / "torch_cuda.lib"),
        ],
        check=True,
    )
    chain = windows_toolchain(_posix_mingw(), cuda, libs, "13.0", work, {"PATH": "/usr/bin"})
    (given,) = chain.import_libraries
    assert (given.how, given.names) == ("given", ("aoti_torch_cuda_mm_out",))
    assert chain.config["aot_inductor.cross_target_platform"] == "windows"
    assert chain.config["aot_inductor.aoti_shim_library_path"] == str(libs)
    home = Path(chain.env["WINDOWS_CUDA_HOME"])
    # torch links -lcudart: a MinGW import library made from the real DLL's exports, naming that DLL
    from cudaship.binary.coff_importlib import read_import_library

    importlib = read_import_library((home / "lib" / "x64" / "libcudart.a").read_bytes())
    assert [d.lower() for d in importlib.dlls] == ["cudart64_13.dll"]
    names = {m.symbol for m in importlib.members}
    assert {"cudaMalloc", "cudaFree", "cudaLaunchKernel"} <= names
    assert (Path(chain.env["PATH"].split(":")[0]) / "x86_64-w64-mingw32-g++").resolve() == Path(
        _posix_mingw()
    ).resolve()


def test_no_numpy_warning_from_torch(tmp_path: Path) -> None:
    """Issue 23: program export printed torch's "Failed to initialize NumPy". Without numpy (hidden here
    when installed) the warning is one note in the export report, not a message on stderr."""
    import subprocess
    import sys

    from tests.program.conftest import HAS_TORCH

    if not HAS_TORCH:
        pytest.skip("torch is not installed")
    code = (
        "import sys; sys.modules['numpy'] = None\n"
        "from cudaship.program.export import import_torch\n"
        "notes = []\n"
        "torch = import_torch(notes)\n"
        "import torch._subclasses.functional_tensor, torch.export\n"  # where torch 2.13 says it
        "torch.zeros(2).tolist()\n"
        "print(notes)\n"
    )
    done = subprocess.run(
        [sys.executable, "-c", code], capture_output=True, text=True, check=False, timeout=300
    )
    assert done.returncode == 0, done.stderr
    assert "Failed to initialize NumPy" not in done.stderr
    assert "numpy is not installed" in done.stdout and "cudaship[torch]" in done.stdout
