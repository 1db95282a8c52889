"""The C++ toolchain ``program export`` hands to AOTInductor, checked before a minute of compiling.

Linux target: the compiler must link libstdc++ dynamically. A wrapper that carries its own static libstdc++
crashes when torch loads it (the H200 SIGSEGV in ``std::regex``, docs/program.md), and a compiler can do that
without being asked (``/opt/gcc/bin/g++`` there passed ``-B`` to a directory with ``libstdc++.a``). Each
candidate builds a small shared library using ``std::regex``;
:func:`~cudaship.program.records.libstdcxx_copy`,
the check ``program check`` runs on the package, judges it. ``--cxx`` names the only candidate; otherwise
``$CXX`` then every ``g++``, ``c++`` and ``clang++`` on PATH, in PATH order, and the first that links
dynamically is used (the skipped ones are said).

Windows target (AOTInductor's cross compile, torch >= 2.10: ``torch._inductor.config.aot_inductor.
cross_target_platform = "windows"``; ``torch/_inductor/cpp_builder.py`` runs ``x86_64-w64-mingw32-g++`` from
PATH, links ``-static-libstdc++ -static-libgcc`` itself, and links ``cuda`` and ``cudart`` from
``$WINDOWS_CUDA_HOME/lib/x64`` and ``torch``, ``torch_cpu``, ``torch_cuda`` from
``aot_inductor.aoti_shim_library_path``). Needed, each checked here with a one-line error naming the fix:

- a MinGW-w64 cross compiler (``--cxx`` or ``x86_64-w64-mingw32-g++`` on PATH) and its ``dlltool``;
- the Windows CUDA libraries of torch's CUDA major (``--windows-cuda DIR``, as ``cudaship toolkit install
  TRAIN --platform windows-x86_64 --source pypi --components cudart --dest DIR`` makes it:
  ``lib/x64/cuda.lib``, ``bin/x64/cudart64_NN.dll``). CUDA 13's ``cudart.lib`` holds MSVC objects MinGW
  cannot link (``/GS`` symbols); as torch 2.13 does, a MinGW import library ``libcudart.a`` is made from
  the DLL's exports instead (cudaship's PE reader lists them; ``dlltool`` writes it), in a private copy of
  the directory;
- the import libraries of a Windows torch of the same CUDA train (``--windows-torch DIR``: ``torch.lib``,
  ``torch_cpu.lib``, ``torch_cuda.lib`` as in ``torch/lib`` of its ``win_amd64`` wheel).
"""

from __future__ import annotations

import os
import re
import shutil
import subprocess
from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import Path

from cudaship import envvars
from cudaship.binary.pe import read_pe
from cudaship.errors import ProgramError, UsageError
from cudaship.inspection.dispatch import inspect_buffer
from cudaship.inspection.program_records import ImportLibraryRecord
from cudaship.program.import_libs import given_library, made_torch_cuda, make_import_library
from cudaship.program.records import libstdcxx_copy
from cudaship.words import count

#: the cross compiler torch's Windows cross compile runs, by this name, from PATH
MINGW_CXX = "x86_64-w64-mingw32-g++"
#: compilers tried after ``$CXX`` when ``--cxx`` is not given, in this order, every copy on PATH
DEFAULT_COMPILERS = ("g++", "c++", "clang++")
#: The environment variables the toolchain is found with (the environment a caller may hand in instead).
_READS = ("PATH", "CXX", "WINDOWS_CUDA_HOME")
#: the Windows torch import libraries a CUDA program links (``torch/lib`` of a ``win_amd64`` wheel)
WINDOWS_TORCH_LIBS = ("torch.lib", "torch_cpu.lib", "torch_cuda.lib")
TARGETS = ("linux-x86_64", "windows-x86_64")

_PROBE_SOURCE = r"""
#include <regex>
#include <string>
extern "C" int cudaship_probe(const char* text) {
    static const std::regex pattern("^(cpu|cuda)(:([0-9]+))?$");
    return std::regex_match(std::string(text), pattern) ? 1 : 0;
}
"""


@dataclass
class Toolchain:
    """What export sets before compiling: the compiler, environment, inductor config, and what was said."""

    cxx: str
    env: dict[str, str] = field(default_factory=dict)
    config: dict[str, object] = field(default_factory=dict)
    notes: list[str] = field(default_factory=list)
    probes: int = 0  #: compilers built with (the work done, for tests)
    #: Windows: the import libraries linked and how each was obtained (provenance.json)
    import_libraries: list[ImportLibraryRecord] = field(default_factory=list)


def static_libstdcxx(cxx: str, workdir: Path) -> int | None:
    """How many ``std::locale`` symbols a shared library built by ``cxx`` defines while needing no
    libstdc++ (0: it links libstdc++ dynamically); None when ``cxx`` cannot build one."""
    workdir.mkdir(parents=True, exist_ok=True)
    src = workdir / "cudaship_probe.cpp"
    out = workdir / "cudaship_probe.so"
    src.write_text(_PROBE_SOURCE)
    try:
        done = subprocess.run(
            [cxx, "-shared", "-fPIC", "-O0", "-o", str(out), str(src)],
            capture_output=True,
            timeout=300,
            check=False,
        )
    except (OSError, subprocess.TimeoutExpired):
        return None
    if done.returncode != 0 or not out.is_file():
        return None
    return libstdcxx_copy(inspect_buffer(out.read_bytes(), out.name))


def _on_path(name: str, env: Mapping[str, str]) -> list[str]:
    found = []
    for directory in env.get("PATH", "").split(os.pathsep):
        candidate = Path(directory or ".") / name
        if candidate.is_file() and os.access(candidate, os.X_OK):
            found.append(str(candidate))
    return found


def _candidates(env: Mapping[str, str]) -> list[str]:
    names: list[str] = []
    if env.get("CXX"):
        names.append(shutil.which(env["CXX"], path=env.get("PATH")) or env["CXX"])
    for name in DEFAULT_COMPILERS:
        names.extend(_on_path(name, env))
    seen: set[str] = set()
    unique = []
    for name in names:
        key = os.path.realpath(name)
        if key not in seen:
            seen.add(key)
            unique.append(name)
    return unique


def linux_toolchain(cxx: str | None, workdir: Path, env: Mapping[str, str] | None = None) -> Toolchain:
    """The compiler for a Linux wrapper: ``cxx`` when it links libstdc++ dynamically, else the first such
    compiler of ``$CXX`` and PATH; a one-line :class:`ProgramError` naming ``--cxx`` when there is none."""
    env = envvars.snapshot(_READS) if env is None else env
    chain = Toolchain(cxx="")
    if cxx is not None:
        path = shutil.which(cxx, path=env.get("PATH")) or cxx
        chain.probes += 1
        count = static_libstdcxx(path, workdir)
        if count is None:
            raise UsageError(f"--cxx {cxx}: cannot build a C++ shared library with it")
        if count:
            raise ProgramError(
                f"--cxx {cxx} links libstdc++ statically (a test library defines {count} std::locale "
                "symbols and needs no libstdc++.so.6): the wrapper would crash when torch loads it; pass "
                "--cxx a compiler that links libstdc++ dynamically (the system g++, e.g. /usr/bin/g++)"
            )
        chain.cxx = path
        return chain
    skipped: list[str] = []
    for path in _candidates(env):
        chain.probes += 1
        count = static_libstdcxx(path, workdir)
        if count is None:
            skipped.append(f"{path} (cannot build a shared library)")
            continue
        if count:
            skipped.append(f"{path} (links libstdc++ statically)")
            continue
        chain.cxx = path
        if skipped:
            chain.notes.append(f"compiler {path}; skipped {', '.join(skipped)}")
        return chain
    tried = ", ".join(skipped) if skipped else "none found ($CXX unset; no g++, c++ or clang++ on PATH)"
    raise ProgramError(
        f"no C++ compiler that links libstdc++ dynamically: {tried}; pass --cxx a compiler that does "
        "(the system g++, e.g. /usr/bin/g++)"
    )


def _target_of(cxx: str) -> str | None:
    try:
        done = subprocess.run([cxx, "-dumpmachine"], capture_output=True, text=True, timeout=60, check=False)
    except (OSError, subprocess.TimeoutExpired):
        return None
    return done.stdout.strip() or None


def _has_std_mutex(compiler: str, workdir: Path) -> bool:
    workdir.mkdir(parents=True, exist_ok=True)
    src = workdir / "cudaship_mutex.cpp"
    src.write_text("#include <mutex>\n#include <shared_mutex>\nstd::mutex m;\nstd::shared_mutex s;\n")
    try:
        done = subprocess.run(
            [compiler, "-std=c++17", "-fsyntax-only", str(src)], capture_output=True, timeout=120, check=False
        )
    except (OSError, subprocess.TimeoutExpired):
        return False
    return done.returncode == 0


def _dll_major(directory: Path) -> tuple[Path, int] | None:
    for dll in sorted((directory / "bin" / "x64").glob("cudart64_*.dll")) + sorted(
        (directory / "bin").glob("cudart64_*.dll")
    ):
        match = re.fullmatch(r"cudart64_(\d+)\.dll", dll.name)
        if match:
            return dll, int(match.group(1))
    return None


def windows_toolchain(
    cxx: str | None,
    windows_cuda: Path | None,
    windows_torch: Path | None,
    cuda_train: str | None,
    workdir: Path,
    env: Mapping[str, str] | None = None,
    *,
    cuda: bool = True,
    torch_dir: Path | None = None,
    torch_version: str = "",
) -> Toolchain:
    """Everything torch's Windows cross compile needs, checked; one-line errors naming the fix. ``cuda``:
    a CUDA program (needs the Windows CUDA libraries and ``torch_cuda.lib``). ``torch_dir``: the exporting
    torch's package directory, whose shim headers and ``libtorch_cuda.so`` make ``torch_cuda.lib`` when
    ``--windows-torch`` has none (:mod:`cudaship.program.import_libs`)."""
    env = envvars.snapshot(_READS) if env is None else env
    target = "--target-platform windows-x86_64"
    # 1. the cross compiler, under the name torch runs
    if cxx is not None:
        compiler = shutil.which(cxx, path=env.get("PATH")) or cxx
    else:
        found = shutil.which(MINGW_CXX, path=env.get("PATH"))
        if found is None:
            raise UsageError(
                f"{target}: no MinGW-w64 cross compiler: {MINGW_CXX} is not on PATH (torch's cross compile "
                "runs that name); install it (Debian/Ubuntu: apt-get install g++-mingw-w64-x86-64-win32) or "
                "pass --cxx /path/to/x86_64-w64-mingw32-g++"
            )
        compiler = found
    machine = _target_of(compiler)
    if machine is None:
        raise UsageError(f"{target}: cannot run the compiler {compiler}")
    if "mingw" not in machine and "windows" not in machine:
        raise UsageError(
            f"{target}: {compiler} compiles for {machine}, not Windows; pass --cxx a MinGW-w64 cross "
            f"compiler ({MINGW_CXX})"
        )
    if not _has_std_mutex(compiler, workdir):
        raise UsageError(
            f"{target}: {compiler} has no std::mutex (MinGW-w64 GCC before 13 with the win32 thread model), "
            "which torch's AOTInductor headers use; use its posix flavour (Debian/Ubuntu: --cxx "
            "/usr/bin/x86_64-w64-mingw32-g++-posix)"
        )
    bindir = workdir / "bin"
    bindir.mkdir(parents=True, exist_ok=True)
    link = bindir / MINGW_CXX
    if link.is_symlink() or link.exists():
        link.unlink()
    link.symlink_to(os.path.abspath(compiler))
    dlltool = _sibling(compiler, "dlltool", env)
    if dlltool is None:
        raise UsageError(
            f"{target}: no x86_64-w64-mingw32-dlltool beside {compiler} or on PATH (binutils-mingw-w64)"
        )
    chain = Toolchain(cxx=compiler)
    chain.env["PATH"] = os.pathsep.join([str(bindir), str(Path(compiler).parent), env.get("PATH", "")])
    # 2. the Windows CUDA libraries, of torch's CUDA major
    if cuda:
        _windows_cuda(chain, windows_cuda, cuda_train, dlltool, workdir, env)
    # 3. the Windows torch import libraries: torch.lib and torch_cpu.lib as PyPI's (CPU) win_amd64 wheel has
    # them; torch_cuda.lib given, or made from the exporting torch's declarations
    wanted = [n for n in WINDOWS_TORCH_LIBS if "cuda" not in n]
    if windows_torch is None:
        raise UsageError(
            f"{target} needs the import libraries of a Windows torch of the same version "
            f"({', '.join(wanted)} from torch/lib of its win_amd64 wheel, which PyPI serves): pass "
            "--windows-torch DIR"
        )
    missing = [name for name in wanted if not (windows_torch / name).is_file()]
    if missing:
        raise UsageError(
            f"--windows-torch {windows_torch}: no {', '.join(missing)} (torch/lib of a win_amd64 torch wheel "
            "holds them)"
        )
    shim_path = windows_torch
    if cuda:
        given = windows_torch / "torch_cuda.lib"
        if given.is_file():
            chain.import_libraries.append(given_library(given, "torch_cuda.dll"))
        else:
            if torch_dir is None:
                raise UsageError(
                    f"--windows-torch {windows_torch}: no torch_cuda.lib, and no torch to make it from "
                    "(a CUDA win_amd64 torch wheel holds it)"
                )
            shim_path = workdir / "windows-torch"
            shim_path.mkdir(parents=True, exist_ok=True)
            for name in wanted:
                shutil.copyfile(windows_torch / name, shim_path / name)
            made = made_torch_cuda(torch_dir, torch_version, dlltool, shim_path)
            chain.import_libraries.append(made)
            chain.notes.append(
                f"torch_cuda.lib made from {made.source} ({count(len(made.names), 'name')}, checked against "
                "libtorch_cuda.so's exports)"
            )
    chain.config = {
        "aot_inductor.cross_target_platform": "windows",
        "aot_inductor.aoti_shim_library_path": str(shim_path),
        # torch refuses weights inside the DLL for a Windows target (torch/_inductor/utils.py)
        "aot_inductor.package_constants_in_so": False,
        "aot_inductor.package_constants_on_disk_format": "binary_blob",
        # MinGW links when asked for a precompiled header with torch's link flags (undefined WinMain)
        "aot_inductor.precompile_headers": False,
    }
    return chain


def _windows_cuda(
    chain: Toolchain,
    windows_cuda: Path | None,
    cuda_train: str | None,
    dlltool: str,
    workdir: Path,
    env: Mapping[str, str],
) -> None:
    if windows_cuda is None and env.get("WINDOWS_CUDA_HOME"):
        windows_cuda = Path(env["WINDOWS_CUDA_HOME"])
    train = cuda_train or "13.0"
    make = (
        f"cudaship toolkit install {train} --platform windows-x86_64 --source pypi --components cudart "
        "--dest DIR"
    )
    target = "--target-platform windows-x86_64"
    if windows_cuda is None:
        raise UsageError(
            f"{target} needs the Windows CUDA libraries (lib/x64/cuda.lib, bin/x64/cudart64_NN.dll): make "
            f"them with '{make}' and pass --windows-cuda DIR"
        )
    if not (windows_cuda / "lib" / "x64" / "cuda.lib").is_file():
        raise UsageError(
            f"--windows-cuda {windows_cuda}: no lib/x64/cuda.lib (not a Windows CUDA toolkit); make one "
            f"with '{make}'"
        )
    dll = _dll_major(windows_cuda)
    if dll is None:
        raise UsageError(f"--windows-cuda {windows_cuda}: no bin/x64/cudart64_NN.dll; make it with '{make}'")
    if cuda_train is not None and dll[1] != int(cuda_train.split(".")[0]):
        raise UsageError(
            f"--windows-cuda {windows_cuda}: holds {dll[0].name} (CUDA {dll[1]}); this torch is CUDA "
            f"{cuda_train}: make the matching one with '{make}'"
        )
    chain.env["WINDOWS_CUDA_HOME"] = str(_private_cuda_home(windows_cuda, dll[0], dlltool, workdir))


def _sibling(compiler: str, tool: str, env: Mapping[str, str]) -> str | None:
    name = f"x86_64-w64-mingw32-{tool}"
    beside = Path(compiler).parent / name
    if beside.is_file():
        return str(beside)
    return shutil.which(name, path=env.get("PATH"))


def _private_cuda_home(source: Path, dll: Path, dlltool: str, workdir: Path) -> Path:
    """A copy of ``source``'s ``lib/x64/cuda.lib`` and the cudart DLL with a MinGW import library
    ``libcudart.a`` made from the DLL's exports (the linker takes it before the MSVC ``cudart.lib``)."""

    home = workdir / "windows-cuda"
    (home / "lib" / "x64").mkdir(parents=True, exist_ok=True)
    (home / "bin" / "x64").mkdir(parents=True, exist_ok=True)
    shutil.copyfile(source / "lib" / "x64" / "cuda.lib", home / "lib" / "x64" / "cuda.lib")
    shutil.copyfile(dll, home / "bin" / "x64" / dll.name)
    exports = read_pe(dll.read_bytes()).exports
    if not exports:
        raise ProgramError(f"{dll}: exports nothing; not a CUDA runtime DLL")
    make_import_library(dll.name, tuple(exports), dlltool, home / "lib" / "x64" / "libcudart.a")
    return home


def parse_target(text: str | None) -> str | None:
    """``windows-x86_64`` / ``linux-x86_64`` (``win_amd64``, ``windows`` accepted); None: this machine's."""
    if text is None:
        return None
    value = text.strip().lower()
    aliases = {"windows": "windows-x86_64", "win_amd64": "windows-x86_64", "linux": "linux-x86_64"}
    value = aliases.get(value, value)
    if value not in TARGETS:
        raise UsageError(f"platform {text!r}: expected one of {', '.join(TARGETS)}")
    return value
