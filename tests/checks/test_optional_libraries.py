"""Issue 32, classes 2 and 3, on wheels generated here from real gcc output: a library that is itself optional
(loaded only by name at run time, or off the import path with what it needs behind one of the wheel's
extras) and variants per release of a system library family (FFmpeg) are not errors. Each test failed before
the fix (the closure check of the optional library was an error)."""

from __future__ import annotations

import json
import shutil
from pathlib import Path

import pytest

from cudaship.checks.engine import audit_wheels
from cudaship.checks.table import default_policy
from cudaship.cli.main import main
from cudaship.records.findings import Severity, Status
from tests.checks.test_held_out_classes import LINUX, audited, errors, shared_library
from tests.fixtures.synthetic_wheels import write_wheel

pytestmark = pytest.mark.skipif(shutil.which("gcc") is None, reason="needs gcc")


def _stub(work: Path, soname: str, symbol: str) -> None:
    """A library named ``soname`` (and its SONAME) that defines ``symbol``, to link against."""
    (work / soname).write_bytes(
        shared_library(work, soname, f"int {symbol}(void){{return 0;}}", f"-Wl,-soname,{soname}")
    )


def _linked(work: Path, name: str, needs: dict[str, str]) -> bytes:
    """A library that calls one symbol of each library in ``needs`` (soname -> symbol), so each is a
    DT_NEEDED."""
    for soname, symbol in needs.items():
        _stub(work, soname, symbol)
    decls = "".join(f"int {s}(void);" for s in needs.values())
    body = "+".join(f"{s}()" for s in needs.values())
    return shared_library(
        work, name, f"{decls} int run(void){{return {body};}}", *(f"-l:{soname}" for soname in needs)
    )


def test_a_library_whose_needs_an_extra_installs_is_optional_on_an_any_wheel(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """ctransformers' shape: ``lib/cuda/libpkg.so`` needs cuBLAS and cudart, which only the ``[cuda]`` extra
    installs; no extension module, library or Python code of the import needs it (the package's code picks a
    build directory when a model asks for the GPU). Tagged ``any``: the index has no build of the NVIDIA
    wheels for it, so the extra is read from Requires-Dist against the NVIDIA library table."""
    lib = _linked(
        tmp_path, "libpkg.so", {"libcublas.so.12": "cublasCreate_v2", "libcudart.so.12": "cudaFree"}
    )
    files = {
        "pkg/__init__.py": b"",
        "pkg/lib/cuda/libpkg.so": lib,
        "pkg/lib/basic/libpkg.so": shared_library(tmp_path, "plain.so", "int run(void){return 1;}"),
    }
    requires = (
        'nvidia-cublas-cu12 ; extra == "cuda"',
        'nvidia-cuda-runtime-cu12 ; extra == "cuda"',
    )
    wheel = write_wheel(
        tmp_path, name="pkg", version="1.0", tag="py3-none-any", files=files, requires=requires
    )
    checks = audited(wheel)
    assert errors(checks) == []
    closure = checks["closure: pkg/lib/cuda/libpkg.so"]
    assert closure.status is Status.FAIL and closure.rule == "optional" and closure.severity is Severity.NOTE
    assert "libcublas.so.12 comes with pkg[cuda]" in " ".join(f.message for f in closure.evidence)
    # the JSON's imports: still not resolved in a plain install, met by the extra
    assert main(["audit", "--offline", str(wheel), "-f", "json"]) == 0
    doc = json.loads(capsys.readouterr().out)
    met = {i["library"]: (i["ok"], i["met"]) for i in doc["wheels"][0]["imports"] if "cuda/" in i["file"]}
    assert met == {"libcublas.so.12": (False, "extra"), "libcudart.so.12": (False, "extra")}


def test_without_the_extra_the_same_library_stays_an_error(tmp_path: Path) -> None:
    """The control: the same library with no extra providing its needs is an error (the loader fails it,
    and nothing says it is optional)."""
    lib = _linked(tmp_path, "libpkg.so", {"libcublas.so.12": "cublasCreate_v2"})
    files = {"pkg/__init__.py": b"", "pkg/lib/cuda/libpkg.so": lib}
    wheel = write_wheel(tmp_path, name="pkg", version="1.0", tag="py3-none-any", files=files)
    checks = audited(wheel)
    assert checks["closure: pkg/lib/cuda/libpkg.so"].is_error


def test_a_plugin_its_host_library_dlopens_by_name_is_optional(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """onnxruntime-genai-cuda's shape: the core library stores the CUDA library's file name and dlopens it
    for the CUDA provider only; the CUDA library needs the CUDA runtime, which no requirement provides."""
    plugin = _linked(tmp_path, "libpkg-cuda.so", {"libcudart.so.13": "cudaFree"})
    core = shared_library(
        tmp_path,
        "libpkg.so",
        '#include <dlfcn.h>\nvoid *open_cuda(void){return dlopen("libpkg-cuda.so", RTLD_NOW);}',
        "-ldl",
    )
    module = shared_library(
        tmp_path,
        "_ext.so",
        "int open_cuda(void); void *PyInit__ext(void){open_cuda(); return 0;}",
        "-Wl,-rpath,$ORIGIN",
        "-l:libpkg.so",
    )
    (tmp_path / "libpkg.so").write_bytes(core)
    files = {
        "pkg/__init__.py": b"",
        "pkg/_ext.cpython-312-x86_64-linux-gnu.so": module,
        "pkg/libpkg.so": core,
        "pkg/libpkg-cuda.so": plugin,
    }
    wheel = write_wheel(tmp_path, name="pkg", version="1.0", tag=LINUX, files=files)
    checks = audited(wheel)
    assert errors(checks) == []
    closure = checks["closure: pkg/libpkg-cuda.so"]
    assert closure.rule == "optional" and closure.severity is Severity.NOTE
    assert "pkg/libpkg.so loads it by name (dlopen) at run time" in closure.reason
    # repair follows the audit: no requirement added for an optional library's need, a note says why
    assert main(["repair", "--dry-run", str(wheel), "-f", "json"]) == 0
    plan = json.loads(capsys.readouterr().out)["wheels"][0]["plan"]
    assert plan["requirements"] == []
    assert any("needed by an optional library" in n and "libcudart.so.13" in n for n in plan["notes"])


def test_variants_per_ffmpeg_release_are_one_warning_naming_ffmpeg(tmp_path: Path) -> None:
    """torchcodec's shape: ``libcodec_core6.so`` and ``libcodec_core7.so`` each import another FFmpeg
    release's libraries, and the package's Python code tries them in turn (a name computed at run time).
    Each variant is a note; one warning names FFmpeg, its packages and the releases the variants span."""
    core6 = _linked(
        tmp_path, "libcodec_core6.so", {"libavcodec.so.60": "avcodec_open2", "libavutil.so.58": "av_free"}
    )
    core7 = _linked(
        tmp_path, "libcodec_core7.so", {"libavcodec.so.61": "avcodec_open2", "libavutil.so.59": "av_free"}
    )
    loader = (
        b"import ctypes\nfrom pathlib import Path\n\n\ndef load():\n    for v in (7, 6):\n"
        b'        try:\n            return ctypes.CDLL(str(Path(__file__).parent / f"libcodec_core{v}.so"))\n'
        b"        except OSError:\n            pass\n"
    )
    files = {
        "pkg/__init__.py": b"",
        "pkg/_load.py": loader,
        "pkg/libcodec_core6.so": core6,
        "pkg/libcodec_core7.so": core7,
    }
    wheel = write_wheel(tmp_path, name="pkg", version="1.0", tag=LINUX, files=files)
    report = audit_wheels([wheel], default_policy())
    checks = {c.name: c for c in report.checks}
    assert errors(checks) == []
    for n in (6, 7):
        variant = checks[f"closure: pkg/libcodec_core{n}.so"]
        assert variant.rule == "variant" and variant.severity is Severity.NOTE
        assert f"the FFmpeg {n} variant" in variant.reason
    group = checks["closure: needs the system library FFmpeg"]
    assert group.severity is Severity.WARNING
    assert (
        "at least one of 2 variants (pkg/libcodec_core*.so) needs FFmpeg 6..7 from the system" in group.reason
    )
    assert "ffmpeg (Debian/Ubuntu)" in group.reason


# --- the real wheels (issue 32's accuracy corpus: they import as documented, the default audit exited 1)


def _audit_json(wheel: Path, capsys: pytest.CaptureFixture[str]) -> tuple[int, dict[str, dict[str, object]]]:
    code = main(["audit", str(wheel), "-f", "json"])
    doc = json.loads(capsys.readouterr().out)
    return code, {c["name"]: c for c in doc["checks"]}


@pytest.mark.network
def test_real_ctransformers_cuda_library_is_behind_its_extra(
    ctransformers_wheel: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    code, checks = _audit_json(ctransformers_wheel, capsys)
    assert code == 0
    for lib in ("ctransformers/lib/cuda/libctransformers.so", "ctransformers/lib/cuda/ctransformers.dll"):
        check = checks[f"closure: {lib}"]
        assert (check["status"], check["severity"], check["rule"]) == ("fail", "note", "optional")
    so = checks["closure: ctransformers/lib/cuda/libctransformers.so"]
    assert "comes with ctransformers[cuda]" in json.dumps(so["evidence"])


@pytest.mark.network
@pytest.mark.parametrize("fixture", ["ortgenai_linux_wheel", "ortgenai_windows_wheel"])
def test_real_onnxruntime_genai_cuda_provider_is_loaded_on_demand(
    fixture: str, request: pytest.FixtureRequest, capsys: pytest.CaptureFixture[str]
) -> None:
    wheel: Path = request.getfixturevalue(fixture)
    code, checks = _audit_json(wheel, capsys)
    assert code == 0
    if fixture == "ortgenai_linux_wheel":
        check = checks["closure: onnxruntime_genai/libonnxruntime-genai-cuda.so"]
        assert (check["severity"], check["rule"]) == ("note", "optional")
        assert "onnxruntime_genai/libonnxruntime-genai.so loads it by name (dlopen)" in str(check["reason"])


@pytest.mark.network
@pytest.mark.parametrize("fixture", ["torchcodec_linux_wheel", "torchcodec_macos_wheel"])
def test_real_torchcodec_ffmpeg_variants_are_one_warning(
    fixture: str, request: pytest.FixtureRequest, capsys: pytest.CaptureFixture[str]
) -> None:
    wheel: Path = request.getfixturevalue(fixture)
    code, checks = _audit_json(wheel, capsys)
    assert code == 0
    group = checks["closure: needs the system library FFmpeg"]
    assert group["severity"] == "warning"
    assert "at least one of 6 variants" in str(group["reason"]) and "FFmpeg 4..9" in str(group["reason"])
    ext = "so" if fixture == "torchcodec_linux_wheel" else "dylib"
    for n in range(4, 10):
        core = checks[f"closure: torchcodec/libtorchcodec_core{n}.{ext}"]
        assert (core["severity"], core["rule"]) == ("note", "variant")
    heic = checks[f"closure: torchcodec/libtorchcodec_heic.{ext}"]  # loaded on first HEIC decode only
    assert (heic["severity"], heic["rule"]) == ("note", "optional")


def test_doctor_env_judges_a_plugin_loaded_by_name_as_the_audit_does(tmp_path: Path) -> None:
    """The same plugin installed: ``doctor --env`` reads the same mechanism (a library of the distribution
    stores the plugin's name for dlopen) and gives the audit's severity, a note, not a warning."""
    from cudaship.checks.environment import doctor_env
    from tests.fixtures.preload_env import dist

    work = tmp_path / "build"
    work.mkdir()
    built = {
        "libpkg-cuda.so": _linked(work, "libpkg-cuda.so", {"libcudart.so.13": "cudaFree"}),
        "libpkg.so": shared_library(
            work,
            "libpkg.so",
            '#include <dlfcn.h>\nvoid *open_cuda(void){return dlopen("libpkg-cuda.so", RTLD_NOW);}',
            "-ldl",
        ),
    }
    site = tmp_path / "site-packages"
    site.mkdir()
    files: dict[str, Path | str] = {"pkg/__init__.py": ""}
    for name, data in built.items():
        (work / f"out-{name}").write_bytes(data)
        files[f"pkg/{name}"] = work / f"out-{name}"
    dist(site, "pkg", "1.0", files)
    report = doctor_env([str(site)], ld_library_path="", ld_cache=None)
    found = [f for f in report.findings if f.rule == "unresolved" and "libcudart.so.13" in f.reason]
    assert len(found) == 1
    assert found[0].severity is Severity.NOTE
    assert "pkg/libpkg.so loads it by name (dlopen)" in found[0].reason


def test_doctor_env_judges_ffmpeg_variants_as_the_audit_does(tmp_path: Path) -> None:
    """The FFmpeg variants installed without FFmpeg: ``doctor --env`` gives the audit's verdict (each
    variant's FFmpeg imports notes, one warning naming FFmpeg and the releases), not an error per import."""
    from cudaship.checks.environment import doctor_env
    from tests.fixtures.preload_env import dist

    work = tmp_path / "build"
    work.mkdir()
    files: dict[str, Path | str] = {"pkg/__init__.py": ""}
    for n, (avcodec, avutil) in {6: (60, 58), 7: (61, 59)}.items():
        name = f"libcodec_core{n}.so"
        data = _linked(
            work, name, {f"libavcodec.so.{avcodec}": "avcodec_open2", f"libavutil.so.{avutil}": "av_free"}
        )
        (work / f"out-{name}").write_bytes(data)
        files[f"pkg/{name}"] = work / f"out-{name}"
    site = tmp_path / "site-packages"
    site.mkdir()
    dist(site, "pkg", "1.0", files)
    report = doctor_env([str(site)], ld_library_path="", ld_cache=None)
    found = [f for f in report.findings if f.rule == "unresolved"]
    assert [f for f in found if f.severity is Severity.ERROR] == []
    (group,) = [f for f in found if f.severity is Severity.WARNING]
    assert (
        "at least one of 2 variants" in group.reason and "needs FFmpeg 6..7 from the system" in group.reason
    )
    assert sum(1 for f in found if f.severity is Severity.NOTE) == 4
