"""Issue 32's classes of held-out wheels the audit judged wrongly, each on a wheel generated here from real
gcc output (no wheel names, no special case): the default audit must give the loader's verdict."""

from __future__ import annotations

import shutil
import subprocess
from pathlib import Path

import pytest

from cudaship.checks.engine import audit_wheels
from cudaship.checks.table import default_policy
from cudaship.records.findings import CheckResult, Status
from tests.fixtures.synthetic_wheels import write_wheel

pytestmark = pytest.mark.skipif(shutil.which("gcc") is None, reason="needs gcc")

LINUX = "cp312-cp312-manylinux_2_28_x86_64"


def shared_library(work: Path, name: str, source: str, *args: str) -> bytes:
    """A real ELF shared library built by gcc from ``source`` (``args``: link options)."""
    src = work / f"{name}.c"
    src.write_text(source)
    out = work / name
    subprocess.run(["gcc", "-shared", "-fPIC", "-o", str(out), str(src), f"-L{work}", *args], check=True)
    return out.read_bytes()


def audited(wheel: Path) -> dict[str, CheckResult]:
    report = audit_wheels([wheel], default_policy())
    return {c.name: c for c in report.checks}


def errors(checks: dict[str, CheckResult]) -> list[str]:
    return [f"{c.name}: {c.reason}" for c in checks.values() if c.is_error]


# --- class 5: a ``.so`` that is a GNU ld linker script


def test_linker_script_is_recognised_and_says_what_it_names(tmp_path: Path) -> None:
    lib = shared_library(tmp_path, "libfoo.so.1", "int foo(void){return 1;}", "-Wl,-soname,libfoo.so.1")
    files = {
        "pkg/__init__.py": b"",
        "pkg/lib/libfoo.so.1": lib,
        # what a distribution installs for -lfoo (glibc's libc.so has the same shape)
        "pkg/lib/libfoo.so": b"/* GNU ld script */\nOUTPUT_FORMAT(elf64-x86-64)\nGROUP ( libfoo.so.1 "
        b"AS_NEEDED ( /lib64/ld-linux-x86-64.so.2 ) )\n",
    }
    wheel = write_wheel(tmp_path, name="ldscript", version="1.0", tag=LINUX, files=files)
    checks = audited(wheel)
    assert errors(checks) == []
    readable = checks["record: native files readable"]
    assert readable.status is Status.PASS
    assert "1 GNU ld linker script" in readable.reason
    assert "pkg/lib/libfoo.so names libfoo.so.1 (shipped beside it)" in readable.reason
    assert "/lib64/ld-linux-x86-64.so.2 (a path on the machine that links)" in readable.reason


# --- class 14: a wheel with no CUDA code; a wheel that claims CUDA and carries none


def _cpu_extension(work: Path) -> bytes:
    return shared_library(work, "_ext.so", "int bar(void){return 2;}")


def test_a_wheel_without_cuda_code_says_so(tmp_path: Path) -> None:
    from cudaship.render import audit_text
    from cudaship.render.style import Style

    files = {"pkg/__init__.py": b"", "pkg/_ext.cpython-312-x86_64-linux-gnu.so": _cpu_extension(tmp_path)}
    wheel = write_wheel(tmp_path, name="plain", version="1.0", tag=LINUX, files=files)
    report = audit_wheels([wheel], default_policy())
    assert report.ok and not report.wheels[0].facts.cuda_code
    text = audit_text.render(report, Style(color=False, width=200))
    header = next(line for line in text.splitlines() if line.startswith(wheel.name))
    assert header.endswith("· no CUDA code)")
    assert text.rstrip().splitlines()[-1].endswith("· no CUDA code in the wheel")
    assert "consistency: CUDA claim" not in {c.name for c in report.checks}  # claims nothing


@pytest.mark.parametrize(
    ("name", "version", "claimed"),
    [
        ("fast-kernels", "1.0+cu128", "the local version label +cu128"),
        ("fast-kernels-cu12", "1.0", "the project name fast-kernels-cu12"),
        ("fastops-cuda12x", "2.0", "the project name fastops-cuda12x"),
    ],
)
def test_a_cpu_build_shipped_as_cuda_is_an_error(
    tmp_path: Path, name: str, version: str, claimed: str
) -> None:
    files = {"pkg/__init__.py": b"", "pkg/_ext.cpython-312-x86_64-linux-gnu.so": _cpu_extension(tmp_path)}
    wheel = write_wheel(tmp_path, name=name, version=version, tag=LINUX, files=files)
    checks = audited(wheel)
    claim = checks["consistency: CUDA claim"]
    assert claim.is_error
    assert claim.reason.startswith(f"{claimed} claims a CUDA build, but the wheel carries no CUDA code")


def test_cuda_claims_that_hold(tmp_path: Path) -> None:
    """A library importing the CUDA runtime, a header-only package, a meta-package of NVIDIA wheels: CUDA."""
    (tmp_path / "libcudart.so.12").write_bytes(
        shared_library(
            tmp_path, "libcudart.so.12", "int cudaFree(void*p){return 0;}", "-Wl,-soname,libcudart.so.12"
        )
    )
    user = shared_library(
        tmp_path, "_ops.so", "int cudaFree(void*);int f(void){return cudaFree(0);}", "-l:libcudart.so.12"
    )
    cases = {
        "ops-cu12": {"ops/_ops.cpython-312-x86_64-linux-gnu.so": user},
        "headers-cu12": {"headers/include/cub.cuh": b"#pragma once\n"},
        "meta-cu12": {"meta/__init__.py": b""},
    }
    for name, files in cases.items():
        requires = ("nvidia-cublas-cu12",) if name == "meta-cu12" else ()
        wheel = write_wheel(tmp_path, name=name, version="1.0", tag=LINUX, files=files, requires=requires)
        claim = audited(wheel)["consistency: CUDA claim"]
        assert claim.status is Status.PASS, (name, claim.reason)


def test_cuda_claims_held_by_nvidia_gpu_libraries_and_run_time_loaders(tmp_path: Path) -> None:
    """Bindings that import one of NVIDIA's GPU libraries outside the toolkit's table (TensorRT's
    libnvinfer), and Cython bindings that import nothing and load their libraries through cuda-pathfinder (a
    requirement): CUDA, as the accuracy corpus's tensorrt-cu12-bindings and cuquantum-python-cu12 are."""
    (tmp_path / "libnvinfer.so.11").write_bytes(
        shared_library(
            tmp_path,
            "libnvinfer.so.11",
            "int createInferBuilder(void){return 0;}",
            "-Wl,-soname,libnvinfer.so.11",
        )
    )
    trt = shared_library(
        tmp_path,
        "trt.so",
        "int createInferBuilder(void);int f(void){return createInferBuilder();}",
        "-l:libnvinfer.so.11",
    )
    cases = {
        "trtbind-cu12": ({"trtbind/trt.cpython-312-x86_64-linux-gnu.so": trt}, ()),
        "qbind-cu12": (
            {"qbind/_sv.cpython-312-x86_64-linux-gnu.so": _cpu_extension(tmp_path)},
            ("cuda-pathfinder>=1.6", "numpy"),
        ),
    }
    for name, (files, requires) in cases.items():
        wheel = write_wheel(tmp_path, name=name, version="1.0", tag=LINUX, files=files, requires=requires)
        claim = audited(wheel)["consistency: CUDA claim"]
        assert claim.status is Status.PASS, (name, claim.reason)
    # an extension on a library of a required -cu12 distribution (kvikio on libkvikio-cu12's libkvikio.so)
    (tmp_path / "libkv.so").write_bytes(shared_library(tmp_path, "libkv.so", "int kv(void){return 0;}"))
    ext = shared_library(tmp_path, "kvext.so", "int kv(void);int f(void){return kv();}", "-l:libkv.so")
    files = {"kvbind/_lib.abi3.so": ext}
    wheel = write_wheel(
        tmp_path, name="kvbind-cu12", version="1.0", tag=LINUX, files=files, requires=("libkv-cu12",)
    )
    claim = audited(wheel)["consistency: CUDA claim"]
    assert claim.status is Status.PASS, claim.reason
    # a requirement on a CUDA distribution alone still does not make a CPU extension CUDA code
    files = {"cpu/_ext.cpython-312-x86_64-linux-gnu.so": _cpu_extension(tmp_path)}
    wheel = write_wheel(
        tmp_path, name="cpu-cu12", version="1.0", tag=LINUX, files=files, requires=("nvidia-cublas-cu12",)
    )
    assert audited(wheel)["consistency: CUDA claim"].is_error


# --- class 7: a torch extension on macOS gets the Linux verdict (undeclared torch: a warning)

_CLANG = shutil.which("clang")
_LD64 = next((t for n in ("ld64.lld", "ld64.lld-14", "ld64.lld-15") if (t := shutil.which(n))), None)
_TORCH_LIBS = ("c10", "torch", "torch_cpu", "torch_python")
_EXT_C = "".join(f"int {lib}_f(void);" for lib in _TORCH_LIBS) + (
    "int g(void){return " + "+".join(f"{lib}_f()" for lib in _TORCH_LIBS) + ";}"
)


def _macos_extension(work: Path, *, rpath: bool) -> bytes:
    """A real arm64 Mach-O extension linking torch's dylibs by their @rpath install names."""
    if not (_CLANG and _LD64):
        pytest.skip("needs clang and ld64.lld (Debian: clang lld)")
    link = [_LD64, "-arch", "arm64", "-platform_version", "macos", "11.0", "11.0", "-dylib"]
    link += ["-undefined", "dynamic_lookup"]
    target = "--target=arm64-apple-macos11"
    for lib in _TORCH_LIBS:
        (work / f"{lib}.c").write_text(f"int {lib}_f(void){{return 1;}}")
        subprocess.run([_CLANG, target, "-c", f"{lib}.c", "-o", f"{lib}.o"], cwd=work, check=True)
        name = f"lib{lib}.dylib"
        subprocess.run(
            [*link, "-install_name", f"@rpath/{name}", f"{lib}.o", "-o", name], cwd=work, check=True
        )
    (work / "ext.c").write_text(_EXT_C)
    subprocess.run([_CLANG, target, "-c", "ext.c", "-o", "ext.o"], cwd=work, check=True)
    rpaths = ["-rpath", "@loader_path/../torch/lib"] if rpath else []
    dylibs = [f"lib{lib}.dylib" for lib in _TORCH_LIBS]
    subprocess.run([*link, *rpaths, "ext.o", *dylibs, "-o", "_ext.so"], cwd=work, check=True)
    return (work / "_ext.so").read_bytes()


def _verdicts(checks: dict[str, CheckResult]) -> list[tuple[str, str, str]]:
    return sorted(
        (c.family, c.rule or "", c.severity.value) for c in checks.values() if c.status is Status.FAIL
    )


@pytest.mark.parametrize("rpath", [True, False], ids=["lc-rpath-into-torch-lib", "by-install-name"])
def test_a_torch_extension_on_macos_gets_the_linux_verdict(tmp_path: Path, rpath: bool) -> None:
    for lib in _TORCH_LIBS:
        shared_library(
            tmp_path, f"lib{lib}.so", f"int {lib}_f(void){{return 1;}}", f"-Wl,-soname,lib{lib}.so"
        )
    runpath = ["-Wl,-rpath,$ORIGIN/../torch/lib"] if rpath else []
    linux = shared_library(tmp_path, "_ext_linux.so", _EXT_C, *[f"-l{lib}" for lib in _TORCH_LIBS], *runpath)
    mac = _macos_extension(tmp_path, rpath=rpath)
    linux_wheel = write_wheel(
        tmp_path,
        name="torchext",
        version="1.0",
        tag=LINUX,
        files={"torchext/__init__.py": b"", "torchext/_ext.cpython-312-x86_64-linux-gnu.so": linux},
    )
    mac_wheel = write_wheel(
        tmp_path,
        name="torchext",
        version="1.0",
        tag="cp312-cp312-macosx_11_0_arm64",
        files={"torchext/__init__.py": b"", "torchext/_ext.cpython-312-darwin.so": mac},
    )
    on_linux, on_macos = audited(linux_wheel), audited(mac_wheel)
    assert errors(on_macos) == [] and errors(on_linux) == []
    assert _verdicts(on_macos) == _verdicts(on_linux) == [("closure", "undeclared_host", "warning")]
    host = next(c for c in on_macos.values() if c.status is Status.FAIL)
    assert {f.symbol or f.message.split(":")[0] for f in host.evidence} >= {"@rpath/libc10.dylib"}


# --- class 6: links made at install time (wheel-axle-runtime's symlinks.txt) are part of the installed layout


def test_links_made_at_install_time_resolve_imports(tmp_path: Path) -> None:
    shared_library(tmp_path, "libfoo.so.1", "int foo(void){return 1;}", "-Wl,-soname,libfoo.so.1")
    real = (tmp_path / "libfoo.so.1").read_bytes()
    ext = shared_library(
        tmp_path,
        "_ext.so",
        "int foo(void);int bar(void){return foo();}",
        "-l:libfoo.so.1",
        "-Wl,-rpath,$ORIGIN/lib64",
    )
    files = {
        "pkg/__init__.py": b"",
        "pkg/_ext.cpython-312-x86_64-linux-gnu.so": ext,
        # the real file under its full version; the SONAME link and the lib64 directory come at install time
        "pkg/lib/libfoo.so.1.2.3": real,
        "axle-1.0.dist-info/symlinks.txt": b"pkg/lib/libfoo.so.1,libfoo.so.1.2.3,0\r\npkg/lib64,lib,1\r\n",
    }
    wheel = write_wheel(tmp_path, name="axle", version="1.0", tag=LINUX, files=files)
    checks = audited(wheel)
    assert errors(checks) == []
    closure = checks["closure: pkg/_ext.cpython-312-x86_64-linux-gnu.so"]
    assert closure.status is Status.PASS
    report = audit_wheels([wheel], default_policy()).wheels[0]
    (imp,) = [i for i in report.imports if i.library == "libfoo.so.1"]
    assert imp.ok and imp.target == "pkg/lib/libfoo.so.1.2.3"
    assert "as the link pkg/lib64/libfoo.so.1 made at install time (symlinks.txt)" in imp.detail


def test_a_malformed_symlinks_txt_is_one_line_naming_it(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    from cudaship.cli.main import main
    from cudaship.exitcodes import ExitCode

    files = {"pkg/__init__.py": b"", "bad-1.0.dist-info/symlinks.txt": b"pkg/lib/libfoo.so,libfoo.so.1\n"}
    wheel = write_wheel(tmp_path, name="bad", version="1.0", tag=LINUX, files=files)
    assert main(["audit", "--no-progress", str(wheel)]) == ExitCode.BAD_INPUT
    err = capsys.readouterr().err.strip().splitlines()
    assert (
        len(err) == 1 and "symlinks.txt line 1: not 'link path,target,0|1'" in err[0] and wheel.name in err[0]
    )


# --- class 8: real defects the audit missed


def test_a_sibling_nothing_loads_first_is_an_error(tmp_path: Path) -> None:
    import ctypes
    import zipfile

    host = shared_library(tmp_path, "libhost.so", "int host_api(void){return 1;}", "-Wl,-soname,libhost.so")
    module = shared_library(
        tmp_path, "_mod.so", "int host_api(void);int PyInit__mod(void){return host_api();}", "-l:libhost.so"
    )
    files = {
        "pkg/__init__.py": b"",
        "pkg/libs/libhost.so": host,  # off the module's search path (it has no RUNPATH)
        "pkg/_mod.cpython-312-x86_64-linux-gnu.so": module,
    }
    wheel = write_wheel(tmp_path, name="pkg", version="1.0", tag=LINUX, files=files)
    # the loader's verdict: the module does not load
    site = tmp_path / "site"
    zipfile.ZipFile(wheel).extractall(site)
    with pytest.raises(OSError, match=r"libhost\.so"):
        ctypes.CDLL(str(site / "pkg/_mod.cpython-312-x86_64-linux-gnu.so"))
    checks = audited(wheel)
    closure = checks["closure: pkg/_mod.cpython-312-x86_64-linux-gnu.so"]
    assert closure.is_error
    assert "nothing loads libhost.so first" in closure.reason
    assert not [c for c in checks.values() if c.rule == "loaded_first"]


CUBLAS = ("nvidia-cublas-cu12",)


def _loads(site: Path, *paths: str) -> str:
    """dlopen ``paths`` in turn in a fresh interpreter: "ok", or the loader's message."""
    import sys

    code = "import ctypes,sys\nfor p in sys.argv[1:]: ctypes.CDLL(p)\nprint('ok')"
    args = [str(site / p) for p in paths]
    run = subprocess.run([sys.executable, "-c", code, *args], capture_output=True, text=True, check=False)
    return run.stdout.strip() or run.stderr.strip().splitlines()[-1]


def test_a_plugin_whose_requirement_a_module_loaded_first_reaches_is_a_warning(tmp_path: Path) -> None:
    """The shape of a held-out wheel (a quantum simulator's GPU plugin): the Python module's RUNPATH reaches
    ``nvidia/cublas/lib`` (the declared nvidia-cublas-cu12), the plugin beside it has no RUNPATH and is
    dlopened by another package after the module is imported. Alone the plugin does not load; after the
    module it does (glibc reuses the loaded SONAME): uncertain, a warning naming the module, never an error.
    With no module that reaches the library, or one that nothing loads, it stays an error."""
    import zipfile

    cublas = shared_library(
        tmp_path, "libcublas.so.12", "int cublasCreate_v2(void*h){return 0;}", "-Wl,-soname,libcublas.so.12"
    )
    use = "int cublasCreate_v2(void*);int {0}(void){{return cublasCreate_v2(0);}}"
    rpath = "-Wl,-rpath,$ORIGIN/../nvidia/cublas/lib"
    module = shared_library(tmp_path, "_ops.so", use.format("PyInit__ops"), "-l:libcublas.so.12", rpath)
    plugin = shared_library(tmp_path, "libplugin.so", use.format("plugin_entry"), "-l:libcublas.so.12")
    lone = shared_library(tmp_path, "liblone.so", use.format("lone_entry"), "-l:libcublas.so.12", rpath)
    ops = "pkg/_ops.cpython-312-x86_64-linux-gnu.so"
    files = {"pkg/__init__.py": b"", ops: module, "pkg/libplugin.so": plugin}
    wheel = write_wheel(tmp_path, name="plug-cu12", version="1.0", tag=LINUX, files=files, requires=CUBLAS)
    # the loader's verdict, with the requirement's library where pip installs it
    site = tmp_path / "site"
    zipfile.ZipFile(wheel).extractall(site)
    (site / "nvidia/cublas/lib").mkdir(parents=True)
    (site / "nvidia/cublas/lib/libcublas.so.12").write_bytes(cublas)
    assert "libcublas.so.12: cannot open shared object file" in _loads(site, "pkg/libplugin.so")
    assert _loads(site, ops, "pkg/libplugin.so") == "ok"

    checks = audited(wheel)
    assert errors(checks) == []
    first = checks[f"closure: needs a sibling loaded first: {ops}"]
    assert (first.rule, first.severity.value) == ("loaded_first", "warning")
    assert first.reason.startswith("uncertain, `cudaship audit --load` runs the real loader")
    (finding,) = first.evidence
    assert finding.file == "pkg/libplugin.so" and finding.symbol == "libcublas.so.12"
    assert "which the search path of libplugin.so does not reach" in finding.message
    assert (
        f"{ops} reaches it and is loaded first (it is a Python module the package imports)" in finding.message
    )

    # no module reaching the library, or only a library that nothing loads first: an error, as before
    for name, extra in (("alone", {}), ("unloaded", {"pkg/liblone.so": lone})):
        (tmp_path / name).mkdir()
        files = {"pkg/__init__.py": b"", "pkg/libplugin.so": plugin, **extra}
        other = audited(
            write_wheel(
                tmp_path / name, name="plug-cu12", version="1.0", tag=LINUX, files=files, requires=CUBLAS
            )
        )
        closure = other["closure: pkg/libplugin.so"]
        assert closure.is_error, name
        assert "which the search path does not reach" in closure.reason, name
        assert not [c for c in other.values() if c.rule == "loaded_first"], name


@pytest.mark.skipif(not Path("/usr/lib/x86_64-linux-gnu/libnuma.so.1").exists(), reason="needs libnuma.so.1")
def test_a_distribution_library_on_the_import_path_of_a_manylinux_wheel_is_an_error(tmp_path: Path) -> None:
    """libgomp / libnuma: outside every manylinux policy (auditwheel lib_whitelist), not shipped: slim images
    fail to import the module, and auditwheel would not give the tag."""
    module = shared_library(
        tmp_path,
        "_omp.so",
        "long numa_max_node(void);int omp_get_max_threads(void);"
        "long PyInit__omp(void){return numa_max_node()+omp_get_max_threads();}",
        "-l:libnuma.so.1",
        "-fopenmp",
    )
    files = {"pkg/__init__.py": b"", "pkg/_omp.cpython-312-x86_64-linux-gnu.so": module}
    wheel = write_wheel(tmp_path, name="pkg", version="1.0", tag=LINUX, files=files)
    closure = audited(wheel)["closure: pkg/_omp.cpython-312-x86_64-linux-gnu.so"]
    assert closure.is_error
    messages = {f.symbol: f.message for f in closure.evidence}
    assert "outside the manylinux_2_28 policy of the wheel's tag" in messages["libgomp.so.1"]
    assert "libgomp1 (Debian/Ubuntu) / libgomp (RHEL/Fedora)" in messages["libgomp.so.1"]
    assert "libnuma1 (Debian/Ubuntu) / numactl-libs (RHEL/Fedora)" in messages["libnuma.so.1"]
    # a plain linux_x86_64 tag promises no policy: the packages every full install carries stay a warning
    plain = write_wheel(tmp_path, name="pkg", version="1.0", tag="cp312-cp312-linux_x86_64", files=files)
    checks = audited(plain)
    assert errors(checks) == []
    assert {c.rule for c in checks.values() if c.status is Status.FAIL} == {"distribution_library"}


def test_a_helper_executable_needing_openssl_is_a_warning(tmp_path: Path) -> None:
    if not Path("/usr/lib/x86_64-linux-gnu/libssl.so.3").exists():
        pytest.skip("needs libssl.so.3")
    src = tmp_path / "tool.c"
    src.write_text(
        "int OPENSSL_init_ssl(unsigned long long, const void*);int main(void){return OPENSSL_init_ssl(0,0);}"
    )
    subprocess.run(["gcc", "-o", str(tmp_path / "tool"), str(src), "-l:libssl.so.3"], check=True)
    files = {"pkg/__init__.py": b"", "pkg/bin/tool": (tmp_path / "tool").read_bytes()}
    wheel = write_wheel(tmp_path, name="pkg", version="1.0", tag=LINUX, files=files)
    checks = audited(wheel)
    assert errors(checks) == []
    (warning,) = [c for c in checks.values() if c.status is Status.FAIL]
    assert (warning.rule, warning.severity.value) == ("distribution_library", "warning")
    assert "off the import path" in warning.evidence[0].message
    assert "libssl3 (Debian/Ubuntu) / openssl-libs (RHEL/Fedora)" in warning.evidence[0].message


def test_links_in_a_data_scheme_and_links_to_links(tmp_path: Path) -> None:
    """A link under ``<name>.data/platlib`` lands in site-packages; a link to a link reaches the library."""
    shared_library(tmp_path, "libfoo.so.1", "int foo(void){return 1;}", "-Wl,-soname,libfoo.so.1")
    real = (tmp_path / "libfoo.so.1").read_bytes()
    ext = shared_library(
        tmp_path,
        "_ext.so",
        "int foo(void);int bar(void){return foo();}",
        "-l:libfoo.so.1",
        "-Wl,-rpath,$ORIGIN/lib",
    )
    files = {
        "pkg/__init__.py": b"",
        "pkg/_ext.cpython-312-x86_64-linux-gnu.so": ext,
        "axle-1.0.data/platlib/pkg/lib/libfoo.so.1.2.3": real,
        "axle-1.0.dist-info/symlinks.txt": (
            b"axle-1.0.data/platlib/pkg/lib/libfoo.so.1,libfoo.so.1.2,0\n"
            b"axle-1.0.data/platlib/pkg/lib/libfoo.so.1.2,libfoo.so.1.2.3,0\n"
        ),
    }
    wheel = write_wheel(tmp_path, name="axle", version="1.0", tag=LINUX, files=files)
    report = audit_wheels([wheel], default_policy()).wheels[0]
    (imp,) = [i for i in report.imports if i.library == "libfoo.so.1"]
    # shipped where the link is, not "the SONAME of a sibling loaded first" (a warning) as before
    assert (imp.ok, imp.via, imp.target) == (True, "shipped", "pkg/lib/libfoo.so.1.2.3"), imp
    assert "as the link pkg/lib/libfoo.so.1 made at install time" in imp.detail


# --- the preloading rule on Windows and macOS: what the package's Python code does before the import


_MINGW = shutil.which("x86_64-w64-mingw32-gcc")
WINDOWS = "cp312-cp312-win_amd64"

#: the package picks its CUDA major on import and adds the DLL directory beside that major's extension, a path
#: it computes (cuda-cccl's cuda/compute/_bindings.py does so for cu12/cccl, cu13/cccl)
_ADDS_COMPUTED_DIRECTORY = b"""import importlib
import os

major = os.environ.get("PKG_CUDA_MAJOR") or "13"
spec = importlib.util.find_spec(f"{__package__}.cu{major}._impl")
if os.name == "nt" and spec and spec.origin:
    dll_dir = os.path.join(os.path.dirname(spec.origin), "engine")
    if os.path.isdir(dll_dir):
        _handle = os.add_dll_directory(dll_dir)
impl = importlib.import_module(f".cu{major}._impl", __package__)
"""


def _pe(work: Path, name: str, source: str, *link: str) -> bytes:
    """A real x86_64 PE DLL built by mingw-w64's gcc (``link``: DLLs to link against, by path)."""
    if _MINGW is None:
        pytest.skip("needs mingw-w64 (x86_64-w64-mingw32-gcc)")
    (work / f"{name}.c").write_text(source)
    subprocess.run([_MINGW, "-shared", "-o", name, f"{name}.c", *link], cwd=work, check=True)
    return (work / name).read_bytes()


def _engine_wheel(work: Path, python: bytes | None) -> Path:
    """A Windows wheel with one extension per CUDA major (``pkg/cu12/_impl.pyd``, ``pkg/cu13/_impl.pyd``),
    each importing ``engine.c.core.dll`` shipped in ``cu12/engine/`` / ``cu13/engine/``: outside the DLL
    search path (the importer's own directory, System32) unless the package adds the directory."""
    files: dict[str, bytes] = {"pkg/__init__.py": b""}
    for major in ("12", "13"):
        d = work / f"cu{major}"
        d.mkdir(parents=True)
        files[f"pkg/cu{major}/engine/engine.c.core.dll"] = _pe(
            d, "engine.c.core.dll", "__declspec(dllexport) int core_api(void){return 1;}"
        )
        files[f"pkg/cu{major}/_impl.cp312-win_amd64.pyd"] = _pe(
            d,
            "_impl.pyd",
            "__declspec(dllimport) int core_api(void);"
            "__declspec(dllexport) void *PyInit__impl(void){return (void *)(long long)core_api();}",
            "engine.c.core.dll",
        )
    if python is not None:
        files["pkg/_bindings.py"] = python
    return write_wheel(work, name="pkg", version="1.0", tag=WINDOWS, files=files)


def test_a_dll_directory_the_package_computes_is_uncertain_never_an_error(tmp_path: Path) -> None:
    """Windows: ``os.add_dll_directory`` on a directory the package's Python computes at run time (beside the
    extension of the CUDA major it picks): the static model cannot say which directory, so each import is a
    warning that says it is uncertain and names ``audit --load`` (one per cause), never an error; each
    major's extension is matched with the copy beside it. Without that Python code, the same DLLs are
    errors: nothing adds their directory."""
    wheel = _engine_wheel(tmp_path / "adds", _ADDS_COMPUTED_DIRECTORY)
    checks = audited(wheel)
    assert errors(checks) == []
    (warning,) = [c for c in checks.values() if c.status is Status.FAIL]
    assert (warning.rule, warning.severity.value) == ("computed_path", "warning")
    assert warning.name == "closure: library paths computed at run time by pkg/_bindings.py"
    assert warning.reason.startswith("uncertain, `cudaship audit --load` runs the real loader")
    assert "os.add_dll_directory(...) line 9 adds a directory named engine" in warning.reason
    report = audit_wheels([wheel], default_policy()).wheels[0]
    core = {i.file: i for i in report.imports if i.library == "engine.c.core.dll"}
    assert {f: (i.met, i.certain) for f, i in core.items()} == {
        f"pkg/cu{m}/_impl.cp312-win_amd64.pyd": ("shipped", False) for m in ("12", "13")
    }
    assert core["pkg/cu13/_impl.cp312-win_amd64.pyd"].target == "pkg/cu13/engine/engine.c.core.dll"

    plain = audited(_engine_wheel(tmp_path / "plain", None))
    assert sorted(e.split(" — ")[0].split(":")[1].strip() for e in errors(plain)) == [
        "pkg/cu12/_impl.cp312-win_amd64.pyd",
        "pkg/cu13/_impl.cp312-win_amd64.pyd",
    ]


#: the package loads its core library through torch before importing the extension that needs it, by a path it
#: builds from the library's stem (torchtext's, torchaudio's and torchvision's _extension.py)
_LOADS_THROUGH_TORCH = b"""import os
from pathlib import Path

import torch

_LIB_DIR = Path(__file__).parent / "lib"


def _load_lib(lib: str) -> None:
    suffix = "pyd" if os.name == "nt" else "so"
    torch.ops.load_library(_LIB_DIR / f"{lib}.{suffix}")


_load_lib("libtext")
from pkg import _ext  # noqa: E402
"""


def _macho(work: Path, name: str, source: str, *link: str, install_name: str | None = None) -> bytes:
    """A real arm64 Mach-O dylib built by clang and ld64.lld, without LC_RPATH."""
    if not (_CLANG and _LD64):
        pytest.skip("needs clang and ld64.lld (Debian: clang lld)")
    (work / f"{name}.c").write_text(source)
    subprocess.run(
        [_CLANG, "--target=arm64-apple-macos11", "-c", f"{name}.c", "-o", f"{name}.o"], cwd=work, check=True
    )
    command = [_LD64, "-arch", "arm64", "-platform_version", "macos", "11.0", "11.0", "-dylib"]
    command += ["-undefined", "dynamic_lookup"]
    command += ["-install_name", install_name] if install_name else []
    subprocess.run([*command, f"{name}.o", *link, "-o", name], cwd=work, check=True)
    return (work / name).read_bytes()


@pytest.mark.parametrize("fmt", ["macho", "elf"])
def test_a_library_the_package_loads_through_torch_satisfies_its_module(tmp_path: Path, fmt: str) -> None:
    """The preloading rule, on dyld as on glibc: ``_ext`` needs ``libtext.so`` (by its install name
    ``@rpath/libtext.so`` on macOS, its SONAME on Linux), shipped in ``pkg/lib/``, off the module's search
    path (no LC_RPATH / RUNPATH). The package's Python loads it first with ``torch.ops.load_library`` (a
    function that dlopens the path it is given: data, providers.toml ``path_loaders``) by a path built from
    its stem; dyld reuses the loaded image whose install name is the load command's name, glibc the object of
    that SONAME. A warning that the import order decides (uncertain, naming ``audit --load``), not an error;
    without that Python code, an error: nothing loads libtext.so first."""
    if fmt == "macho":
        lib = _macho(
            tmp_path, "libtext.so", "int text_api(void){return 1;}", install_name="@rpath/libtext.so"
        )
        ext = _macho(
            tmp_path, "_ext.so", "int text_api(void);int PyInit__ext(void){return text_api();}", "libtext.so"
        )
        module, tag = "pkg/_ext.cpython-312-darwin.so", "cp312-cp312-macosx_11_0_arm64"
    else:
        lib = shared_library(
            tmp_path, "libtext.so", "int text_api(void){return 1;}", "-Wl,-soname,libtext.so"
        )
        ext = shared_library(
            tmp_path,
            "_ext.so",
            "int text_api(void);int PyInit__ext(void){return text_api();}",
            "-l:libtext.so",
        )
        module, tag = "pkg/_ext.cpython-312-x86_64-linux-gnu.so", LINUX
    files = {"pkg/__init__.py": b"", "pkg/lib/libtext.so": lib, module: ext}

    wheel = write_wheel(
        tmp_path,
        name="pkg",
        version="1.0",
        tag=tag,
        files={**files, "pkg/_extension.py": _LOADS_THROUGH_TORCH},
    )
    checks = audited(wheel)
    assert errors(checks) == []
    first = checks["closure: needs a sibling loaded first: pkg/lib/libtext.so"]
    assert (first.rule, first.severity.value) == ("loaded_first", "warning")
    assert first.reason.startswith("uncertain, `cudaship audit --load` runs the real loader")
    assert (
        "pkg/_extension.py: torch.ops.load_library(...) line 11 loads libtext.so (named libtext"
        in first.reason
    )
    reuse = "install name (LC_ID_DYLIB)" if fmt == "macho" else "SONAME"
    assert reuse in first.reason

    (tmp_path / "plain").mkdir()
    plain = audited(write_wheel(tmp_path / "plain", name="pkg", version="1.0", tag=tag, files=files))
    closure = plain[f"closure: {module}"]
    assert closure.is_error and "nothing loads libtext.so first" in closure.reason
