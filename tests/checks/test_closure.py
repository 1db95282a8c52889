"""closure family on hand-built records (the providers themselves are tested in tests/providers): shipped and
system libraries resolve, a DT_NEEDED nothing provides fails, an unused DT_NEEDED is a warning by default."""

from __future__ import annotations

from cudaship.records.binary import Import, ImportedSymbol, ImportKind
from cudaship.records.findings import Severity, Status
from tests.checks.handmade import by_name, context, host, library, run

MOD = "pkg/_C.so"
LIB = "pkg/lib/libhelper.so"


def test_shipped_and_system_libraries_resolve() -> None:
    needed = Import("libhelper.so", ImportKind.NEEDED, (ImportedSymbol("helper", version=None),))
    ctx = context(
        [
            library(MOD, host(imports=[needed, "libc.so.6"], runpath=["$ORIGIN/lib"], undefined=["helper"])),
            library(LIB, host(soname="libhelper.so", exports=["helper"], imports=["libc.so.6"])),
        ]
    )
    results = by_name(run(ctx, "closure"))
    assert results[f"closure: {MOD}"].status is Status.PASS
    assert results[f"closure: {LIB}"].status is Status.PASS


def test_a_needed_library_nothing_provides_fails_naming_it() -> None:
    ctx = context([library(MOD, host(imports=["libnowhere.so.3"]))])
    result = by_name(run(ctx, "closure"))[f"closure: {MOD}"]
    assert (result.status, result.severity) == (Status.FAIL, Severity.ERROR)
    assert result.evidence[0].symbol == "libnowhere.so.3"
    assert result.evidence[0].file == MOD


def test_an_unused_needed_library_is_a_warning_by_default() -> None:
    ctx = context(
        [
            library(
                MOD,
                host(
                    imports=["libhelper.so"],
                    runpath=["$ORIGIN/lib"],
                    undefined=["other"],
                    exports=["PyInit__C"],
                ),
            ),
            library(LIB, host(soname="libhelper.so", exports=["helper"])),
        ]
    )
    result = by_name(run(ctx, "closure"))[f"closure: unused imports in {MOD}"]
    assert (result.status, result.severity, result.rule) == (Status.FAIL, Severity.WARNING, "unused_imports")
    strict = context(
        [
            library(
                MOD,
                host(
                    imports=["libhelper.so"],
                    runpath=["$ORIGIN/lib"],
                    undefined=["other"],
                    exports=["PyInit__C"],
                ),
            ),
            library(LIB, host(soname="libhelper.so", exports=["helper"])),
        ],
        policy={"severity": {"closure.unused_imports": "error"}},
    )
    assert by_name(run(strict, "closure"))[f"closure: unused imports in {MOD}"].severity is Severity.ERROR


def test_variants_for_another_environment_are_notes() -> None:
    libs = [
        library("pkg/libk_cuda130.so", host(imports=["libc.so.6"])),
        library("pkg/libk_rocm64.so", host(imports=["libhipblas.so.2"])),
    ]
    results = by_name(run(context(libs), "closure"))
    rocm = results["closure: pkg/libk_rocm64.so"]
    assert (rocm.status, rocm.severity, rocm.rule) == (Status.FAIL, Severity.NOTE, "variant")
    assert "rocm64 variant" in rocm.reason
    # when no variant resolves, the failures stay errors
    alone = [library("pkg/libk_cuda130.so", host(imports=["libnowhere.so"])), libs[1]]
    results = by_name(run(context(alone), "closure"))
    assert results["closure: pkg/libk_rocm64.so"].severity is Severity.ERROR
    assert results["closure: pkg/libk_cuda130.so"].severity is Severity.ERROR


def test_extras_per_cuda_major_each_credit_their_own_libraries() -> None:
    """Issue 32, class 1: a wheel with libraries for two CUDA majors (cu12/, cu13/) and one extra per major
    (``pkg[cu12]``, ``pkg[cu13]``, each asking for ``cuda-toolkit[nvrtc]`` of its own major). pip never
    installs both, so each extra is resolved for its own major: both NVRTCs are met by their extra (a note
    naming it), neither is an error."""
    from cudaship.checks.records import StaticImport

    ctx = context(
        [
            library(
                "pkg/cu12/_ext.so",
                host(
                    imports=["libnvrtc.so.12", "libc.so.6"], runpath=["$ORIGIN/../../nvidia/cuda_nvrtc/lib"]
                ),
            ),
            library(
                "pkg/cu13/_ext.so",
                host(imports=["libnvrtc.so.13", "libc.so.6"], runpath=["$ORIGIN/../../nvidia/cu13/lib"]),
            ),
        ],
        requires=['cuda-toolkit[nvrtc]==12.*; extra == "cu12"', 'cuda-toolkit[nvrtc]==13.*; extra == "cu13"'],
    )
    results = by_name(run(ctx, "closure"))
    for path in ("pkg/cu12/_ext.so", "pkg/cu13/_ext.so"):
        assert results[f"closure: {path}"].status is Status.PASS, results[f"closure: {path}"].reason
    met: dict[str, StaticImport] = {i.library: i for i in ctx.static_imports}
    assert (met["libnvrtc.so.12"].met, met["libnvrtc.so.12"].extra) == ("extra", "cu12")
    assert (met["libnvrtc.so.13"].met, met["libnvrtc.so.13"].extra) == ("extra", "cu13")
    assert met["libnvrtc.so.13"].target == "nvidia/cu13/lib/libnvrtc.so.13"


_COMPUTES = b"""import os
from importlib.metadata import files

def _paths():
    return [str(f.locate()) for f in files("nvidia-cublas-cu12") if ".so" in f.name]

os.environ["PKG_CUDA_LIBRARIES"] = ":".join(_paths())
from . import _holder  # dlopens every path of PKG_CUDA_LIBRARIES
"""


def test_paths_computed_at_run_time_are_uncertain_never_an_error() -> None:
    """Issue 32, class 3: the package's __init__ builds library paths from importlib.metadata into an
    environment variable and its native holder dlopens them. A library installed by a requirement but off
    the search path is then uncertain: one warning naming the file and `audit --load`, never an error, and
    the import's judgement says certain: false."""
    from cudaship.wheel.pyloads import python_loads

    loads = python_loads("pkg/__init__.py", _COMPUTES)
    assert loads is not None and [c.kind for c in loads.calls] == ["computed"]
    ctx = context(
        [library("pkg/_plugin.so", host(imports=["libcublas.so.12", "libc.so.6"]))],
        requires=["nvidia-cublas-cu12>=12,<13"],
        files=["pkg/__init__.py"],
        python=[loads],
    )
    results = run(ctx, "closure")
    assert not [r for r in results if r.status is Status.FAIL and r.severity is Severity.ERROR]
    (warning,) = [r for r in results if r.rule == "computed_path"]
    assert (warning.status, warning.severity) == (Status.FAIL, Severity.WARNING)
    assert "pkg/__init__.py" in warning.name and "audit --load" in warning.reason
    (cublas,) = [i for i in ctx.static_imports if i.library == "libcublas.so.12"]
    assert (cublas.met, cublas.certain) == ("requirement", False)


def test_uncertain_is_shown_in_every_format() -> None:
    """Issue 32, class 3: "uncertain" is a property of the model shown in every format: the warning names
    `audit --load` in text, JSON (with imports[].certain false), JUnit and markdown; the audit passes."""
    import json as json_module

    from cudaship.checks.engine import audit_scanned
    from cudaship.checks.records import AuditReport
    from cudaship.checks.table import default_policy
    from cudaship.render import audit_json, audit_junit, audit_markdown, audit_text
    from cudaship.render.style import Style
    from cudaship.wheel.pyloads import python_loads

    loads = python_loads("pkg/__init__.py", _COMPUTES)
    assert loads is not None
    ctx = context(
        [library("pkg/_plugin.so", host(imports=["libcublas.so.12", "libc.so.6"]))],
        requires=["nvidia-cublas-cu12>=12,<13"],
        files=["pkg/__init__.py"],
        python=[loads],
    )
    report = AuditReport((audit_scanned(ctx.scan, default_policy()),), None, True)
    assert report.ok
    for render in (audit_text.render, audit_junit.render, audit_markdown.render):
        assert "audit --load" in render(report, Style()), render
    doc = json_module.loads(audit_json.render(report, Style()))
    (cublas,) = [i for i in doc["wheels"][0]["imports"] if i["library"] == "libcublas.so.12"]
    assert cublas["certain"] is False
    assert any("audit --load" in c["reason"] and c["severity"] == "warning" for c in doc["checks"])


def test_an_optional_plugin_behind_an_extra_is_a_note_naming_the_extra() -> None:
    """Issue 32, class 2: a decoder plugin (loaded by name, needed by no shipped library) needs a library that
    only the wheel's [trt] extra installs, off the plugin's search path: an optional component, a note
    naming the extra, not an error. The same import from the wheel's Python module stays an error."""
    requires = ['nvidia-cublas-cu12>=12,<13; extra == "trt"']
    plugin = "pkg/plugins/libdecoder_trt.so"
    ctx = context([library(plugin, host(imports=["libcublas.so.12", "libc.so.6"]))], requires=requires)
    result = by_name(run(ctx, "closure"))[f"closure: {plugin}"]
    assert result.status is Status.PASS, result.reason
    (imp,) = [i for i in ctx.static_imports if i.library == "libcublas.so.12"]
    assert (imp.met, imp.extra) == ("extra", "trt")
    assert any("pkg[trt]" in n for n in ctx.notes), ctx.notes
    module = "pkg/_core.cpython-312-x86_64-linux-gnu.so"
    ctx = context(
        [library(module, host(imports=["libcublas.so.12"], exports=["PyInit__core"]))], requires=requires
    )
    assert by_name(run(ctx, "closure"))[f"closure: {module}"].severity is Severity.ERROR


def test_a_required_hosts_preloading_serves_the_audit() -> None:
    """Issue 32, class 4: a torch extension built for CUDA 12 needs libcublas.so.12 and libnvrtc.so.12 with no
    search path; its own requirements install them under nvidia/cublas/lib and nvidia/cuda_nvrtc/lib, and
    torch (a CUDA 13 build) preloads by glob, in its [[preloads]] order, nvidia/cublas/lib/libcublas.so.* and
    nvidia/cuda_nvrtc/lib/libnvrtc.so.* first: the loader reuses them. The [[preloads]] data doctor --env
    simulates serves the audit: preloaded, not an error."""
    module = "pkg/_C.cpython-312-x86_64-linux-gnu.so"
    ctx = context(
        [
            library(
                module,
                host(imports=["libcublas.so.12", "libnvrtc.so.12", "libc.so.6"], exports=["PyInit__C"]),
            )
        ],
        requires=["torch>=2.10", "nvidia-cublas-cu12>=12,<13", "nvidia-cuda-nvrtc-cu12>=12,<13"],
    )
    result = by_name(run(ctx, "closure"))[f"closure: {module}"]
    assert result.status is Status.PASS, result.reason
    met = {i.library: i for i in ctx.static_imports}
    assert met["libcublas.so.12"].met == "preloaded"
    assert met["libcublas.so.12"].target == "nvidia/cublas/lib/libcublas.so.12"
    assert "import torch" in met["libnvrtc.so.12"].detail


def test_computed_paths_to_the_packages_own_libraries_are_uncertain() -> None:
    """Issue 32, class 3, the package's own libraries: __init__ builds the paths of its shipped libraries
    (importlib.metadata files() of itself) into an environment variable; a plugin needs one of them off its
    search path (needed by another shipped library, so not a plugin loaded first). Uncertain, a warning
    naming `audit --load`; without the computing code, an error."""
    from cudaship.wheel.pyloads import python_loads

    source = _COMPUTES.replace(b'files("nvidia-cublas-cu12")', b'files("pkg")')
    loads = python_loads("pkg/__init__.py", source)
    assert loads is not None
    libs = [  # the holder needs the decoder (its RUNPATH finds it), which needs libcore off its search path
        library("pkg/_holder.so", host(imports=["libdec.so.1", "libc.so.6"], runpath=["$ORIGIN/plugins"])),
        library("pkg/plugins/libdec.so.1", host(soname="libdec.so.1", imports=["libcore.so.1", "libc.so.6"])),
        library("pkg/lib/libcore.so.1", host(soname="libcore.so.1", imports=["libc.so.6"])),
    ]
    ctx = context(libs, files=["pkg/__init__.py"], python=[loads])
    results = run(ctx, "closure")
    assert not [r for r in results if r.status is Status.FAIL and r.severity is Severity.ERROR]
    (warning,) = [r for r in results if r.rule == "computed_path"]
    assert "audit --load" in warning.reason
    plain = context(libs)
    failing = by_name(run(plain, "closure"))["closure: pkg/plugins/libdec.so.1"]
    assert failing.severity is Severity.ERROR and failing.status is Status.FAIL


def test_passing_copies_of_one_library_are_one_check() -> None:
    """A wheel cannot hold symlinks, so ``libx.so`` and ``libx.so.1`` ship as copies of one library (one
    SONAME in one directory). When they pass, the report says so once, naming the copies, as it does when
    they fail: one line per library, not one per copy."""
    libs = [
        library(p, host(soname="libx.so.1", imports=["libc.so.6"]))
        for p in ("pkg/lib/libx.so", "pkg/lib/libx.so.1")
    ]
    results = by_name(run(context(libs), "closure"))
    assert [n for n in results if n.startswith("closure: pkg/lib/")] == ["closure: pkg/lib/libx.so"]
    result = results["closure: pkg/lib/libx.so"]
    assert result.status is Status.PASS
    assert result.reason.endswith("the same in 1 copy: pkg/lib/libx.so.1"), result.reason
