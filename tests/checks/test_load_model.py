"""The static load model against glibc (issue 21): libraries built here with gcc, packed into wheels, audited,
and loaded for real in a child process (ctypes.CDLL + /proc/self/maps) so each test shows that the model and
the loader agree.

* class 2, DT_RPATH inheritance: a vendored library without DT_RUNPATH is found through the DT_RPATH of the
  module that loads it (``--disable-new-dtags``); with DT_RUNPATH (``--enable-new-dtags``) it is not;
* class 3, a plugin whose DT_NEEDED is the SONAME of its host library shipped beside it;
* class 1, a library of a declared requirement that the package's own ``__init__.py`` loads first;
* the absolute build path in RUNPATH, planted into a built wheel (tests/fixtures/plant.py): a warning.
"""

from __future__ import annotations

import json
import shutil
import subprocess
import sys
import zipfile
from pathlib import Path

import pytest

from cudaship.checks.context import AuditContext
from cudaship.checks.engine import audit_wheels
from cudaship.checks.records import WheelAudit
from cudaship.checks.resolve import Resolution, Via, resolve
from cudaship.checks.table import default_policy
from cudaship.inspection.scan import scan as scan_wheel
from cudaship.providers.options import ProviderOptions
from cudaship.records.findings import CheckResult, Severity, Status
from tests.fixtures.plant import plant, replace_bytes
from tests.fixtures.synthetic_wheels import write_wheel

pytestmark = pytest.mark.skipif(shutil.which("gcc") is None, reason="gcc is not on PATH")

TAG = "cp311-cp311-manylinux_2_28_x86_64"
EXT = "_ext.cpython-311-x86_64-linux-gnu.so"


def _gcc(
    out: Path, source: str, *, soname: str, needs: tuple[Path, ...] = (), flags: tuple[str, ...] = ()
) -> Path:
    src = out.parent / f"{out.name}.c"
    src.write_text(source)
    args = ["gcc", "-shared", "-fPIC", "-o", str(out), str(src), f"-Wl,-soname,{soname}", *flags]
    for lib in needs:
        args += [f"-L{lib.parent}", f"-l:{lib.name}", f"-Wl,-rpath-link,{lib.parent}"]
    subprocess.run(args, check=True, capture_output=True)
    return out


def _audit(wheel: Path, providers: ProviderOptions | None = None) -> WheelAudit:
    (audit,) = audit_wheels([wheel], default_policy(), providers=providers, workers=1).wheels
    return audit


def _resolution(wheel: Path, path: str, library: str) -> Resolution:
    """How the load model resolves one import of one library of ``wheel``."""
    scan = scan_wheel(wheel)
    ctx = AuditContext(scan=scan, policy=default_policy(), platform=scan.platform)
    report = ctx.libraries[path]
    assert report.host is not None
    (imp,) = [i for i in report.host.imports if i.library == library]
    return resolve(ctx, path, report, imp)


def _checks(audit: WheelAudit) -> dict[str, CheckResult]:
    return {c.name: c for c in audit.checks}


def _install(wheels: list[Path], site: Path) -> Path:
    """The wheels unpacked into ``site`` as pip lays them out (purelib: the archive's tree)."""
    for wheel in wheels:
        with zipfile.ZipFile(wheel) as zf:
            zf.extractall(site)
    return site


def _load(site: Path, code: str) -> dict[str, object]:
    """Run ``code`` in a child Python with ``site`` first on sys.path; it returns whether it loaded and the
    files mapped after it (the loader's own verdict)."""
    child = (
        "import ctypes, json, sys\n"
        f"sys.path.insert(0, {str(site)!r})\n"
        "ok, error = True, ''\n"
        "try:\n" + "".join(f"    {line}\n" for line in code.splitlines()) + "except OSError as e:\n"
        "    ok, error = False, str(e)\n"
        "maps = sorted({l.split()[-1] for l in open('/proc/self/maps') if l.split()[-1].startswith('/')})\n"
        "print(json.dumps({'ok': ok, 'error': error, 'maps': maps}))\n"
    )
    done = subprocess.run(
        [sys.executable, "-c", child], capture_output=True, text=True, check=True, timeout=60
    )
    result: dict[str, object] = json.loads(done.stdout)
    return result


def _mapped(result: dict[str, object], tail: str) -> bool:
    maps = result["maps"]
    assert isinstance(maps, list)
    return any(str(m).endswith(tail) for m in maps)


# --- class 2: DT_RPATH inheritance ----------------------------------------------------------------------


def _chain_wheel(tmp: Path, *, ext_tags: str, mid_runpath: bool) -> Path:
    """pkg/_ext...so needs libmid.so.1 (pkg/mid/), which needs libleaf.so.1 (pkg/vendor/); the module's
    search path names both directories, libmid's names none (or, with ``mid_runpath``, only its own)."""
    build = tmp / "build"
    build.mkdir(parents=True, exist_ok=True)
    leaf = _gcc(build / "libleaf.so.1", "int leaf(void) { return 7; }\n", soname="libleaf.so.1")
    mid_flags = ("-Wl,--enable-new-dtags", "-Wl,-rpath,$ORIGIN") if mid_runpath else ()
    mid = _gcc(
        build / "libmid.so.1",
        "int leaf(void);\nint mid(void) { return leaf() + 1; }\n",
        soname="libmid.so.1",
        needs=(leaf,),
        flags=mid_flags,
    )
    ext = _gcc(
        build / EXT,
        "int mid(void);\nint ext(void) { return mid() + 1; }\n",
        soname=EXT,
        needs=(mid,),
        flags=(ext_tags, "-Wl,-rpath,$ORIGIN/mid:$ORIGIN/vendor"),
    )
    files = {
        "pkg/__init__.py": b"",
        f"pkg/{EXT}": ext.read_bytes(),
        "pkg/mid/libmid.so.1": mid.read_bytes(),
        "pkg/vendor/libleaf.so.1": leaf.read_bytes(),
    }
    out = tmp / "wheel"
    out.mkdir(parents=True, exist_ok=True)
    return write_wheel(out, name="pkg", version="1.0", tag=TAG, files=files)


@pytest.mark.parametrize(
    ("ext_tags", "mid_runpath", "loads"),
    [
        ("-Wl,--disable-new-dtags", False, True),  # DT_RPATH of the module is searched for libmid's needs
        ("-Wl,--enable-new-dtags", False, False),  # DT_RUNPATH applies to the module's own needs only
        ("-Wl,--disable-new-dtags", True, False),  # libmid has DT_RUNPATH: no DT_RPATH is searched for it
    ],
    ids=["rpath-inherited", "runpath-not-inherited", "needing-object-has-runpath"],
)
def test_dt_rpath_is_inherited_down_the_loading_chain_as_glibc_does(
    tmp_path: Path, ext_tags: str, mid_runpath: bool, loads: bool
) -> None:
    wheel = _chain_wheel(tmp_path, ext_tags=ext_tags, mid_runpath=mid_runpath)
    site = _install([wheel], tmp_path / "site")
    real = _load(site, f"ctypes.CDLL({str(site / 'pkg' / EXT)!r})")
    assert real["ok"] is loads, real["error"]
    assert _mapped(real, "pkg/vendor/libleaf.so.1") is loads
    if not loads:
        assert "libleaf.so.1" in str(real["error"])

    checks = _checks(_audit(wheel))
    mid = checks["closure: pkg/mid/libmid.so.1"]
    ext = checks[f"closure: pkg/{EXT}"]
    if loads:
        assert ext.status is Status.PASS, ext.reason
        assert mid.status is Status.PASS, mid.reason
        res = _resolution(wheel, "pkg/mid/libmid.so.1", "libleaf.so.1")
        assert (res.via, res.target) == (Via.SHIPPED, "pkg/vendor/libleaf.so.1")
        assert f"through the DT_RPATH of pkg/{EXT}, above it in the loading chain" in res.detail
    else:
        assert (mid.status, mid.severity) == (Status.FAIL, Severity.ERROR)
        assert mid.evidence[0].symbol == "libleaf.so.1"
        # the module's own import resolves, but libmid fails, so the module fails with it, as the loader says:
        # a note naming the dependency, the error staying libmid's, which lists the module as its dependent
        assert (ext.status, ext.rule, ext.severity) == (Status.FAIL, "dependency", Severity.NOTE)
        assert ext.evidence[0].symbol == "libmid.so.1" and "libleaf.so.1" in ext.reason
        assert any(f.file == f"pkg/{EXT}" for f in mid.evidence[1:])


# --- class 3: a plugin needs its host's SONAME ---------------------------------------------------------


def test_a_plugin_needing_its_hosts_soname_is_satisfied_once_the_host_is_loaded(tmp_path: Path) -> None:
    build = tmp_path / "build"
    build.mkdir()
    host = _gcc(
        build / "libhost.so",
        "#include <dlfcn.h>\nint host_api(void) { return 3; }\n"
        'void *load_plugin(void) { return dlopen("libplug.so", RTLD_NOW); }\n',
        soname="libhost.so",
        flags=("-ldl",),
    )
    plugin = _gcc(
        build / "libplug.so",
        "int host_api(void);\nint plug(void) { return host_api(); }\n",
        soname="libplug.so",
        needs=(host,),
    )
    module = _gcc(
        build / "_mod.cpython-311-x86_64-linux-gnu.so",
        "int host_api(void);\nint PyInit__mod(void) { return host_api(); }\n",
        soname="_mod.cpython-311-x86_64-linux-gnu.so",
        needs=(host,),
    )
    files = {
        "pkg/__init__.py": b"",
        "pkg/libhost.so": host.read_bytes(),
        "pkg/plugins/libplug.so": plugin.read_bytes(),
        "pkg/ext/_mod.cpython-311-x86_64-linux-gnu.so": module.read_bytes(),
    }
    wheel = write_wheel(tmp_path, name="pkg", version="1.0", tag=TAG, files=files)
    site = _install([wheel], tmp_path / "site")
    alone = _load(site, f"ctypes.CDLL({str(site / 'pkg/plugins/libplug.so')!r})")
    assert not alone["ok"] and "libhost.so" in str(alone["error"])
    after = _load(
        site,
        f"ctypes.CDLL({str(site / 'pkg/libhost.so')!r})\n"
        f"ctypes.CDLL({str(site / 'pkg/plugins/libplug.so')!r})",
    )
    assert after["ok"], after["error"]

    checks = _checks(_audit(wheel))
    # the host stores the plugin's name for dlopen: the plugin is loaded after it, satisfied
    assert checks["closure: pkg/plugins/libplug.so"].status is Status.PASS
    assert (
        "a plugin pkg/libhost.so loads by name"
        in _resolution(wheel, "pkg/plugins/libplug.so", "libhost.so").detail
    )
    # a Python module needing it loads only if something loaded libhost.so first: a warning naming that
    first = checks["closure: needs a sibling loaded first: pkg/libhost.so"]
    assert (first.status, first.severity, first.rule) == (Status.FAIL, Severity.WARNING, "loaded_first")
    assert [f.file for f in first.evidence] == ["pkg/ext/_mod.cpython-311-x86_64-linux-gnu.so"]
    assert checks["closure: pkg/ext/_mod.cpython-311-x86_64-linux-gnu.so"].status is Status.PASS


# --- class 1: the package's Python code preloads a requirement's library -------------------------------

_PRELOAD_INIT = """\
import ctypes, os, sys
_here = os.path.dirname(__file__)
_site = os.path.dirname(_here)
ctypes.CDLL(os.path.join(_site, "dep", "lib", "libdep.so.1"), mode=ctypes.RTLD_GLOBAL)
ctypes.CDLL(os.path.join(_here, "_ext.cpython-311-x86_64-linux-gnu.so"))
"""


def _preload_wheels(tmp: Path, init: bytes) -> tuple[Path, Path]:
    build = tmp / "build"
    build.mkdir(parents=True, exist_ok=True)
    dep = _gcc(build / "libdep.so.1", "int dep(void) { return 5; }\n", soname="libdep.so.1")
    ext = _gcc(build / EXT, "int dep(void);\nint ext(void) { return dep(); }\n", soname=EXT, needs=(dep,))
    house = tmp / "house"
    house.mkdir(parents=True, exist_ok=True)
    dep_wheel = write_wheel(
        house,
        name="dep",
        version="1.0",
        tag="py3-none-manylinux_2_28_x86_64",
        files={"dep/__init__.py": b"", "dep/lib/libdep.so.1": dep.read_bytes()},
    )
    out = tmp / "pkg"
    out.mkdir(parents=True, exist_ok=True)
    wheel = write_wheel(
        out,
        name="pkg",
        version="1.0",
        tag=TAG,
        files={"pkg/__init__.py": init, f"pkg/{EXT}": ext.read_bytes()},
        requires=("dep>=1",),
    )
    return wheel, dep_wheel


def test_a_library_the_packages_code_preloads_is_a_warning_naming_the_mechanism(tmp_path: Path) -> None:
    wheel, dep_wheel = _preload_wheels(tmp_path, _PRELOAD_INIT.encode())
    site = _install([wheel, dep_wheel], tmp_path / "site")
    real = _load(site, "import pkg")
    assert real["ok"], real["error"]
    assert _mapped(real, "dep/lib/libdep.so.1") and _mapped(real, f"pkg/{EXT}")

    providers = ProviderOptions(find_links=(str(dep_wheel.parent),))
    checks = _checks(_audit(wheel, providers))
    assert checks[f"closure: pkg/{EXT}"].status is Status.PASS
    pre = checks["closure: preloaded by the package's Python code in pkg/__init__.py"]
    assert (pre.status, pre.severity, pre.rule) == (Status.FAIL, Severity.WARNING, "package_preload")
    assert "ctypes.CDLL(..., RTLD_GLOBAL) line 4 loads libdep.so.1" in pre.reason
    assert pre.evidence[0].symbol == "libdep.so.1"


def test_a_shipped_list_of_libraries_and_a_glob_over_the_directory_count_as_preloading(
    tmp_path: Path,
) -> None:
    listed = (
        b"import ctypes, json, os\n"
        b"for name in json.load(open(os.path.join(os.path.dirname(__file__), 'preload.json'))):\n"
        b"    ctypes.cdll.LoadLibrary(name)\n"
    )
    wheel, dep_wheel = _preload_wheels(tmp_path / "a", listed)
    with_list = plant(
        wheel, tmp_path / "listed", add={"pkg/preload.json": json.dumps(["libdep.so.1"]).encode()}
    )
    providers = ProviderOptions(find_links=(str(dep_wheel.parent),))
    checks = _checks(_audit(with_list, providers))
    pre = checks["closure: preloaded by the package's Python code in pkg/__init__.py"]
    assert "listed in pkg/preload.json" in pre.reason

    globbed = (
        b"import ctypes, glob, os\n"
        b"for f in glob.glob(os.path.join(os.path.dirname(__file__), '..', 'dep', 'lib', 'lib*.so.*')):\n"
        b"    ctypes.CDLL(f)\n"
    )
    wheel, dep_wheel = _preload_wheels(tmp_path / "b", globbed)
    checks = _checks(_audit(wheel, ProviderOptions(find_links=(str(dep_wheel.parent),))))
    pre = checks["closure: preloaded by the package's Python code in pkg/__init__.py"]
    assert "loads lib*.so.* from dep/lib" in pre.reason

    # without the preloading code the import does not resolve: an error
    wheel, dep_wheel = _preload_wheels(tmp_path / "c", b"")
    checks = _checks(_audit(wheel, ProviderOptions(find_links=(str(dep_wheel.parent),))))
    bare = checks[f"closure: pkg/{EXT}"]
    assert (bare.status, bare.severity) == (Status.FAIL, Severity.ERROR)


# --- an absolute build path in RUNPATH, planted -------------------------------------------------------


def test_a_planted_absolute_build_runpath_is_a_warning_naming_path_and_library(tmp_path: Path) -> None:
    build = tmp_path / "build"
    build.mkdir()
    lib = _gcc(
        build / "libx.so",
        "int x(void) { return 1; }\n",
        soname="libx.so",
        flags=("-Wl,--enable-new-dtags", "-Wl,-rpath,$ORIGIN:$ORIGIN/build_tree"),
    )
    wheel = write_wheel(tmp_path, name="pkg", version="1.0", tag=TAG, files={"pkg/libx.so": lib.read_bytes()})
    assert _audit(wheel).summary.warnings == 0
    planted = plant(
        wheel,
        tmp_path / "planted",
        replace={"pkg/libx.so": replace_bytes(b"$ORIGIN/build_tree", b"/home/runner/build")},
    )
    audit = _audit(planted)
    check = _checks(audit)["closure: search path entry /home/runner/build"]
    assert (check.status, check.severity, check.rule) == (Status.FAIL, Severity.WARNING, "build_path")
    assert check.evidence[0].file == "pkg/libx.so" and "/home/runner/build" in check.reason
    assert audit.summary.failed == 0  # a warning: the audit passes


# --- class 4: a host package the wheel does not declare ------------------------------------------------


@pytest.mark.parametrize("runpath", [True, False], ids=["runpath-into-torch-lib", "by-name"])
def test_an_undeclared_host_package_is_a_warning_and_named_for_the_loader(
    tmp_path: Path, runpath: bool
) -> None:
    build = tmp_path / "build"
    build.mkdir()
    c10 = _gcc(build / "libc10.so", "int c10_api(void) { return 1; }\n", soname="libc10.so")
    flags = ("-Wl,--enable-new-dtags", "-Wl,-rpath,$ORIGIN/../torch/lib") if runpath else ()
    ext = _gcc(
        build / EXT,
        "int c10_api(void);\nint ext(void) { return c10_api(); }\n",
        soname=EXT,
        needs=(c10,),
        flags=flags,
    )
    wheel = write_wheel(
        tmp_path, name="torchext", version="1.0", tag=TAG, files={f"torchext/{EXT}": ext.read_bytes()}
    )
    # the loader: with torch's library loaded first (import torch), the extension loads; alone, it does not
    site = _install([wheel], tmp_path / "site")
    (site / "torch" / "lib").mkdir(parents=True)
    shutil.copy(c10, site / "torch" / "lib" / "libc10.so")
    assert not _load(site, f"ctypes.CDLL({str(site / 'torchext' / EXT)!r})")["ok"] or runpath
    first = _load(
        site,
        f"ctypes.CDLL({str(site / 'torch/lib/libc10.so')!r})\nctypes.CDLL({str(site / 'torchext' / EXT)!r})",
    )
    assert first["ok"], first["error"]

    audit = _audit(wheel)
    assert audit.host_packages == ("torch",)
    check = _checks(audit)["closure: undeclared host package torch"]
    assert (check.status, check.severity, check.rule) == (Status.FAIL, Severity.WARNING, "undeclared_host")
    assert check.reason.startswith("depends on torch, not declared: ")
    assert "users must install torch first" in check.reason
    if runpath:
        assert "DT_RUNPATH entry torch/lib points into torch's directory" in check.reason
    assert _checks(audit)[f"closure: torchext/{EXT}"].status is Status.PASS
    assert audit.summary.failed == 0


# --- class 9: one cause, once ---------------------------------------------------------------------------


def test_copies_of_a_library_failing_alike_are_one_finding(tmp_path: Path) -> None:
    build = tmp_path / "build"
    build.mkdir()
    missing = _gcc(build / "libmissing.so.3", "int gone(void) { return 0; }\n", soname="libmissing.so.3")
    lib = _gcc(
        build / "libx.so.1",
        "int gone(void);\nint x(void) { return gone(); }\n",
        soname="libx.so.1",
        needs=(missing,),
    )
    data = lib.read_bytes()
    files = {
        "pkg/lib/libx.so": data,
        "pkg/lib/libx.so.1": data,
        "pkg/lib/libx.so.1.2.3": data,
        "pkg/m.cpython-311-x86_64-linux-gnu.so": _gcc(
            build / "m311.so",
            "int gone(void);\nint PyInit_m(void) { return gone(); }\n",
            soname="m311",
            needs=(missing,),
        ).read_bytes(),
        "pkg/m.cpython-312-x86_64-linux-gnu.so": _gcc(
            build / "m312.so",
            "int gone(void);\nint PyInit_m(void) { return gone() + 1; }\n",
            soname="m312",
            needs=(missing,),
        ).read_bytes(),
    }
    wheel = write_wheel(tmp_path, name="pkg", version="1.0", tag=TAG, files=files)
    audit = _audit(wheel)
    failed = [c for c in audit.checks if c.is_error]
    names = sorted(c.name for c in failed)
    assert names == ["closure: pkg/lib/libx.so", "closure: pkg/m.cpython-311-x86_64-linux-gnu.so"], names
    by = {c.name: c for c in failed}
    assert (
        "the same in 2 copies: pkg/lib/libx.so.1, pkg/lib/libx.so.1.2.3"
        in by["closure: pkg/lib/libx.so"].reason
    )
    assert (
        "the same in 1 copy: pkg/m.cpython-312-x86_64-linux-gnu.so"
        in by["closure: pkg/m.cpython-311-x86_64-linux-gnu.so"].reason
    )
    assert {f.file for f in by["closure: pkg/lib/libx.so"].evidence} == {
        "pkg/lib/libx.so",
        "pkg/lib/libx.so.1",
        "pkg/lib/libx.so.1.2.3",
    }


def test_a_hosts_own_wheel_is_not_its_undeclared_host(tmp_path: Path) -> None:
    build = tmp_path / "build"
    build.mkdir()
    c10 = _gcc(build / "libc10.so", "int c10_api(void) { return 1; }\n", soname="libc10.so")
    lib = _gcc(
        build / "libtorch_cpu.so",
        "int c10_api(void);\nint f(void) { return c10_api(); }\n",
        soname="libtorch_cpu.so",
        needs=(c10,),
    )
    # torch's module loads libc10.so through its RUNPATH (as torch/_C.so does)
    module = _gcc(
        build / "_C.cpython-311-x86_64-linux-gnu.so",
        "int c10_api(void);\nint PyInit__C(void) { return c10_api(); }\n",
        soname="_C.cpython-311-x86_64-linux-gnu.so",
        needs=(c10,),
        flags=("-Wl,-rpath,$ORIGIN/lib",),
    )
    # libtorch_cpu.so has no RUNPATH to its sibling: in torch's own wheel that is not "depends on torch"
    files = {
        "torch/lib/libtorch_cpu.so": lib.read_bytes(),
        "torch/lib/libc10.so": c10.read_bytes(),
        "torch/_C.cpython-311-x86_64-linux-gnu.so": module.read_bytes(),
    }
    audit = _audit(write_wheel(tmp_path, name="torch", version="1.0", tag=TAG, files=files))
    assert audit.host_packages == ()
    assert not [c for c in audit.checks if c.rule == "undeclared_host"]
    first = _checks(audit)["closure: needs a sibling loaded first: torch/lib/libc10.so"]
    assert first.evidence[0].file == "torch/lib/libtorch_cpu.so"
    assert first.severity is Severity.WARNING


# --- a real wheel: bitsandbytes 0.50.2 (cached PyPI download) ------------------------------------------


@pytest.mark.network  # the wheel's first download (the audit, with no providers given, asks no index)
def test_real_build_paths_in_bitsandbytes_are_warnings_naming_path_and_library(
    bitsandbytes_linux_wheel: Path,
) -> None:
    # its CUDA variants carry the toolkit's absolute directory of the build machine as RUNPATH
    audit = _audit(bitsandbytes_linux_wheel)
    check = _checks(audit)["closure: search path entry /usr/local/cuda-12.8/targets/x86_64-linux/lib"]
    assert (check.status, check.severity, check.rule) == (Status.FAIL, Severity.WARNING, "build_path")
    assert [f.file for f in check.evidence] == ["bitsandbytes/libbitsandbytes_cuda128.so"]
    shared = _checks(audit)["closure: search path entry /opt/rocm/lib"]
    assert len(shared.evidence) > 1  # one finding per entry, listing every library that carries it
    assert audit.summary.failed == 0
