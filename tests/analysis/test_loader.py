"""The loader search (analysis.loader) against glibc's real loader: libraries built by gcc in the test
session with DT_RPATH or DT_RUNPATH, loaded by a real process with LD_LIBRARY_PATH set or not; the simulation
must pick the same file. Plus the rules a real process cannot easily show (the cache, Windows' order)."""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from cudaship.analysis.loader import (
    How,
    LinuxLoader,
    Requester,
    WindowsLoader,
    expand,
    object_dirs,
    rpath_chain,
    search_linux,
    search_windows,
)
from cudaship.binary.elf import read_elf

linux_gcc = pytest.mark.skipif(
    shutil.which("gcc") is None or not sys.platform.startswith("linux"), reason="needs gcc and glibc's loader"
)


def _gcc(*args: object) -> None:
    subprocess.run(["gcc", *map(str, args)], check=True, capture_output=True)


@pytest.fixture(scope="module")
def tree(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """Two copies of libdep.so.1 (``which()`` returns 1 or 2) in a/ and b/; users linked against it with
    DT_RPATH or DT_RUNPATH = $ORIGIN/../a; a middle library with DT_RPATH that a RUNPATH-less child
    inherits."""
    root = tmp_path_factory.mktemp("loader")
    for d, value in (("a", 1), ("b", 2)):
        (root / d).mkdir()
        src = root / d / "dep.c"
        src.write_text(f"int which(void) {{ return {value}; }}\n")
        _gcc("-shared", "-fPIC", "-o", root / d / "libdep.so.1", src, "-Wl,-soname,libdep.so.1")
    (root / "u").mkdir()
    src = root / "u" / "user.c"
    src.write_text("int which(void);\nint ask(void) { return which(); }\n")
    for name, tags in (("librpath.so", "--disable-new-dtags"), ("librunpath.so", "--enable-new-dtags")):
        subprocess.run(
            [
                "gcc",
                "-shared",
                "-fPIC",
                "-o",
                str(root / "u" / name),
                str(src),
                f"-L{root / 'a'}",
                "-l:libdep.so.1",
                f"-Wl,{tags}",
                "-Wl,-rpath,$ORIGIN/../a",
            ],
            check=True,
            capture_output=True,
        )
    # a middle library whose DT_RPATH points at b/, loading a child without any search path of its own
    (root / "m").mkdir()
    child = root / "m" / "child.c"
    child.write_text("int which(void);\nint ask(void) { return which(); }\n")
    _gcc("-shared", "-fPIC", "-o", root / "m" / "libchild.so", child, f"-L{root / 'a'}", "-l:libdep.so.1")
    middle = root / "m" / "middle.c"
    middle.write_text("int ask(void);\nint middle(void) { return ask(); }\n")
    subprocess.run(
        [
            "gcc",
            "-shared",
            "-fPIC",
            "-o",
            str(root / "m" / "libmiddle.so"),
            str(middle),
            f"-L{root / 'm'}",
            "-lchild",
            "-Wl,--disable-new-dtags",
            "-Wl,-rpath,$ORIGIN:$ORIGIN/../b",
        ],
        check=True,
        capture_output=True,
    )
    return root


def _real(lib: Path, function: str, ld_library_path: str | None) -> int:
    """Which copy a real process gets: load ``lib`` with ctypes and call ``function``."""
    env = {k: v for k, v in os.environ.items() if k != "LD_LIBRARY_PATH"}
    if ld_library_path:
        env["LD_LIBRARY_PATH"] = ld_library_path
    code = f"import ctypes; print(ctypes.CDLL({str(lib)!r}).{function}())"
    out = subprocess.run([sys.executable, "-c", code], env=env, capture_output=True, text=True, check=True)
    return int(out.stdout)


def _simulated(
    lib: Path, ld_library_path: str | None, inherited: tuple[tuple[str, tuple[str, ...]], ...] = ()
) -> int:
    host = read_elf(lib.read_bytes())
    req = Requester(str(lib), host.rpath, host.runpath, inherited)
    loader = LinuxLoader(
        ld_library_path=tuple(p for p in (ld_library_path or "").split(":") if p), default_dirs=()
    )
    found = search_linux("libdep.so.1", req, loader, os.path.isfile)
    assert found is not None
    return 1 if Path(found.path).parent.name == "a" else 2


@linux_gcc
@pytest.mark.parametrize("name", ["librpath.so", "librunpath.so"])
@pytest.mark.parametrize("with_path", [False, True])
def test_rpath_and_runpath_against_the_real_loader(tree: Path, name: str, with_path: bool) -> None:
    lib = tree / "u" / name
    lpath = str(tree / "b") if with_path else None
    real = _real(lib, "ask", lpath)
    assert _simulated(lib, lpath) == real
    # the documented difference: LD_LIBRARY_PATH wins over DT_RUNPATH, not over DT_RPATH
    if with_path:
        assert real == (1 if name == "librpath.so" else 2)


@linux_gcc
def test_rpath_is_inherited_by_a_dependency_without_its_own(tree: Path) -> None:
    """libchild.so has no search path: it finds libdep.so.1 through libmiddle.so's DT_RPATH ($ORIGIN/../b)."""
    middle = tree / "m" / "libmiddle.so"
    assert _real(middle, "middle", None) == 2
    host = read_elf(middle.read_bytes())
    inherited = ((str(middle), host.rpath),)
    assert _simulated(tree / "m" / "libchild.so", None, inherited) == 2


@linux_gcc
def test_the_audit_asks_the_same_model_with_installed_relative_paths(tree: Path) -> None:
    """audit names a wheel's files relative to site-packages: the inherited chain and the expansion of the
    one model give, for libchild.so, the directories of libmiddle.so's DT_RPATH, b/ among them, where the
    real loader found libdep.so.1."""
    hosts = {p: read_elf((tree / p).read_bytes()) for p in ("m/libmiddle.so", "m/libchild.so")}
    needed_by = {"m/libchild.so": ["m/libmiddle.so"]}
    chain = rpath_chain(
        "m/libchild.so",
        lambda p: needed_by.get(p, ()),
        lambda p: (hosts[p].rpath, hosts[p].runpath) if p in hosts else None,
    )
    assert chain == (("m/libmiddle.so", hosts["m/libmiddle.so"].rpath),)
    child = hosts["m/libchild.so"]
    dirs = object_dirs(Requester("m/libchild.so", child.rpath, child.runpath, chain))
    assert dirs == (("m", How.RPATH, "m/libmiddle.so"), ("b", How.RPATH, "m/libmiddle.so"))
    assert _real(tree / "m" / "libmiddle.so", "middle", None) == 2  # b/
    # a relative origin may climb out of site-packages; $LIB stays as written when the process is unknown
    assert expand("$ORIGIN/../lib", "") == "../lib"
    assert expand("/opt/$LIB/", "x") == "/opt/$LIB"


def test_runpath_is_not_inherited_and_disables_rpath() -> None:
    exists = {"/x/rp/libd.so", "/x/run/libd.so", "/x/parent/libd.so"}.__contains__
    loader = LinuxLoader(default_dirs=())
    both = Requester("/x/lib/libu.so", rpath=("/x/rp",), runpath=("/x/run",))
    found = search_linux("libd.so", both, loader, exists)
    assert found is not None and found.path == "/x/run/libd.so" and found.how is How.RUNPATH
    # a parent's RUNPATH is never inherited: only parents' DT_RPATH are passed down
    child = Requester("/x/lib/libc.so", inherited_rpath=(("/x/parent/libp.so", ("$ORIGIN",)),))
    found = search_linux("libd.so", child, loader, exists)
    assert found is not None and found.path == "/x/parent/libd.so" and found.how is How.RPATH


def test_loaded_names_cache_and_default_dirs_in_order() -> None:
    exists = {"/cache/libd.so.1", "/usr/lib/libd.so.1", "/env/libd.so.1"}.__contains__
    req = Requester("/env/pkg/libu.so")
    loader = LinuxLoader(cache={"libd.so.1": "/cache/libd.so.1"}, default_dirs=("/usr/lib",))
    assert search_linux("libd.so.1", req, loader, exists, {"libd.so.1": "/env/libd.so.1"}).how is How.LOADED  # type: ignore[union-attr]
    assert search_linux("libd.so.1", req, loader, exists).path == "/cache/libd.so.1"  # type: ignore[union-attr]
    no_cache = LinuxLoader(default_dirs=("/usr/lib",))
    assert search_linux("libd.so.1", req, no_cache, exists).how is How.DEFAULT  # type: ignore[union-attr]
    assert search_linux("libnone.so", req, no_cache, exists) is None


def test_dynamic_string_tokens() -> None:
    loader = LinuxLoader(lib="lib/x86_64-linux-gnu", platform="x86_64")
    assert expand("$ORIGIN/../../nvidia/cublas/lib", "/sp/torch/lib", loader) == "/sp/nvidia/cublas/lib"
    assert expand("${ORIGIN}", "/sp/torch/lib", loader) == "/sp/torch/lib"
    assert expand("/opt/$LIB/$PLATFORM", "/x", loader) == "/opt/lib/x86_64-linux-gnu/x86_64"


def test_windows_safe_search_order_and_path() -> None:
    files = {"c:/sp/pkg/a.dll", "c:/sp/torch/lib/b.dll", "c:/windows/system32/kernel32.dll", "c:/tools/c.dll"}

    def exists(p: str) -> bool:
        return p.lower() in files

    loader = WindowsLoader(
        dll_directories=("C:/sp/torch/lib",), system32="C:/Windows/System32", path=("C:/tools",)
    )
    importer = "C:/sp/pkg/ext.pyd"
    assert search_windows("A.DLL", importer, loader, exists).how is How.OWN_DIR  # type: ignore[union-attr]
    assert search_windows("b.dll", importer, loader, exists).how is How.DLL_DIRECTORY  # type: ignore[union-attr]
    assert search_windows("KERNEL32.dll", importer, loader, exists).how is How.SYSTEM32  # type: ignore[union-attr]
    assert search_windows("c.dll", importer, loader, exists).how is How.PATH_ENV  # type: ignore[union-attr]
    loaded = {"b.dll": "C:/elsewhere/b.dll"}
    assert search_windows("B.dll", importer, loader, exists, loaded).path == "C:/elsewhere/b.dll"  # type: ignore[union-attr]
