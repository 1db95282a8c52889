"""``cudaship audit`` end to end on synthetic wheels built from nvcc/mingw-w64 output and on real PyPI wheels:
exit codes, every format (JSON against its schema, JUnit parsed, markdown), GitHub annotations, policy
discovery,
bad input."""

from __future__ import annotations

import json
import os
import xml.etree.ElementTree as ET
from collections.abc import Callable
from pathlib import Path
from typing import Any

import jsonschema
import pytest

from cudaship.cli.main import main
from cudaship.exitcodes import ExitCode
from tests.fixtures.synthetic_wheels import VARIANTS

REPO = Path(__file__).resolve().parents[2]
SCHEMA = json.loads((REPO / "src" / "cudaship" / "render" / "schemas" / "audit.schema.json").read_text())
WIN = REPO / "examples" / "policies" / "windows.toml"
LINUX = REPO / "examples" / "policies" / "linux.toml"

Wheel = Callable[[str], Path]


def run(args: list[str], capsys: pytest.CaptureFixture[str]) -> tuple[int, str, str]:
    code = main(["audit", "--no-progress", *args])
    out, err = capsys.readouterr()
    return code, out, err


def run_json(args: list[str], capsys: pytest.CaptureFixture[str]) -> tuple[int, dict[str, Any]]:
    code, out, err = run(["--format", "json", *args], capsys)
    assert code in (ExitCode.OK, ExitCode.FINDINGS), err
    data = json.loads(out)
    jsonschema.validate(data, SCHEMA)
    return code, data


@pytest.fixture(autouse=True)
def _no_github(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv("GITHUB_ACTIONS", raising=False)


@pytest.mark.slow
def test_passing_wheel_exits_0_and_counts_last(
    synthetic_wheel: Wheel, capsys: pytest.CaptureFixture[str]
) -> None:
    code, out, err = run(["--policy", str(WIN), str(synthetic_wheel("windows"))], capsys)
    assert code == ExitCode.OK, err
    lines = out.rstrip("\n").splitlines()
    total = sum(1 for line in lines if line.lstrip().startswith(("PASS ", "FAIL ", "SKIP ")))
    # the one skip: the variant family says a plain wheel is no variant (never a silent pass)
    assert lines[-1] == f"{total} checks: {total - 1} passed, 0 failed, 1 skipped"


@pytest.mark.slow
def test_failing_wheel_exits_1_with_evidence(
    synthetic_wheel: Wheel, capsys: pytest.CaptureFixture[str]
) -> None:
    code, out, _ = run(["--policy", str(WIN), str(synthetic_wheel("win_arch_missing"))], capsys)
    assert code == ExitCode.FINDINGS
    assert "FAIL  archs: executorch/backends/cuda/aoti_cuda_shims.dll — missing SASS sm_120" in out
    assert "arch sm_120" not in out or "missing SASS sm_120" in out
    lines = out.rstrip("\n").splitlines()
    total = sum(1 for line in lines if line.lstrip().startswith(("PASS ", "FAIL ", "SKIP ")))
    assert lines[-1] == f"{total} checks: {total - 2} passed, 1 failed, 1 skipped"


@pytest.mark.slow
@pytest.mark.parametrize("variant", ["windows", "win_missing_export", "win_dll_without_implib"], ids=str)
def test_json_report(variant: str, synthetic_wheel: Wheel, capsys: pytest.CaptureFixture[str]) -> None:
    code, data = run_json(["--policy", str(WIN), str(synthetic_wheel(variant))], capsys)
    failed = {c["name"] for c in data["checks"] if c["status"] == "fail"}
    assert failed == set(VARIANTS[variant].fails)
    assert code == (ExitCode.FINDINGS if failed else ExitCode.OK)
    summary = data["summary"]
    assert summary["total"] == len(data["checks"])
    assert summary["failed"] == len(failed)
    assert data["policy"] == {"source": str(WIN), "default": False}
    (wheel,) = data["wheels"]
    assert (wheel["local"], wheel["train"], wheel["platform"], wheel["machine"]) == (
        "cu130",
        "13.0",
        "windows",
        "x86_64",
    )
    for check in data["checks"]:
        if check["status"] == "fail":
            assert check["evidence"], check["name"]


@pytest.mark.slow
def test_junit_one_testcase_per_check(synthetic_wheel: Wheel, capsys: pytest.CaptureFixture[str]) -> None:
    wheels = [synthetic_wheel("windows"), synthetic_wheel("win_two_allocators")]
    code, out, _ = run(["--policy", str(WIN), "--format", "junit", *map(str, wheels)], capsys)
    assert code == ExitCode.FINDINGS
    root = ET.fromstring(out)
    suites = root.findall("testsuite")
    assert [s.get("name") for s in suites] == [w.name for w in wheels]
    _, data = run_json(["--policy", str(WIN), *map(str, wheels)], capsys)
    cases = root.findall("testsuite/testcase")
    assert len(cases) == len(data["checks"]) == int(root.get("tests", "0"))
    failures = root.findall("testsuite/testcase/failure")
    assert [f.get("message", "").split(" is defined")[0] for f in failures] == ["et_cuda_allocator_alloc"]
    assert root.get("failures") == "1"


@pytest.mark.slow
def test_markdown_table(synthetic_wheel: Wheel, capsys: pytest.CaptureFixture[str]) -> None:
    code, out, _ = run(
        ["--policy", str(LINUX), "--format", "markdown", str(synthetic_wheel("linux_unused_needed"))], capsys
    )
    assert code == ExitCode.FINDINGS
    assert out.startswith("## cudaship audit\n")
    rows = [line for line in out.splitlines() if line.startswith("| ") and not line.startswith("| result")]
    fails = [r for r in rows if r.startswith("| ❌ fail |")]
    assert len(fails) == 1
    assert "unused imports in executorch/lib/libexecutorch_backend_cuda.so" in fails[0]
    assert "<details>" in out


@pytest.mark.slow
def test_output_file_and_github_annotations(
    synthetic_wheel: Wheel,
    tmp_path: Path,
    capsys: pytest.CaptureFixture[str],
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.setenv("GITHUB_ACTIONS", "true")
    report = tmp_path / "audit.json"
    code, out, _ = run(
        [
            "--policy",
            str(WIN),
            "--format",
            "json",
            "-o",
            str(report),
            str(synthetic_wheel("win_cudart_import")),
        ],
        capsys,
    )
    assert code == ExitCode.FINDINGS
    data = json.loads(report.read_text())
    jsonschema.validate(data, SCHEMA)
    annotations = [line for line in out.splitlines() if line.startswith("::error ")]
    # forbidden imports and closure; the requirements check names the same missing cudart and defers to the
    # closure check's error (a note, rule requirements.closure): one cause, one error
    assert len(annotations) == data["summary"]["failed"] == 2
    (deferred,) = [c for c in data["checks"] if c["status"] == "fail" and c["severity"] == "note"]
    assert (deferred["family"], deferred["rule"]) == ("requirements", "closure")
    assert all("title=cudaship audit%3A " in a for a in annotations)


@pytest.mark.slow
def test_one_run_writes_every_report(
    synthetic_wheel: Wheel, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    wheel = str(synthetic_wheel("win_two_allocators"))
    md, xml, js = tmp_path / "audit.md", tmp_path / "audit.xml", tmp_path / "audit.json"
    code, out, err = run(
        [
            "--policy",
            str(WIN),
            "--format",
            "markdown",
            "-o",
            str(md),
            "--report",
            f"junit={xml}",
            "--report",
            f"JSON={js}",
            wheel,
        ],
        capsys,
    )
    assert code == ExitCode.FINDINGS, err
    assert out == ""
    data = json.loads(js.read_text())
    jsonschema.validate(data, SCHEMA)
    root = ET.fromstring(xml.read_text())
    assert int(root.get("tests", "0")) == len(data["checks"])
    assert root.get("failures") == str(data["summary"]["failed"]) == "1"
    assert md.read_text().startswith("## cudaship audit\n")
    assert md.read_text().count("❌ fail") == 1


@pytest.mark.parametrize(
    "value",
    ["junit", "html=x.html", "=x.xml", "junit="],
    ids=["no-file", "bad-format", "no-format", "empty-file"],
)
def test_bad_report_option_is_usage_error(
    value: str, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    wheel = tmp_path / "w.whl"
    wheel.write_bytes(b"")
    code, _, err = run(["--report", value, str(wheel)], capsys)
    assert code == ExitCode.BAD_INPUT
    assert err.startswith("cudaship: error: --report") and len(err.splitlines()) == 1


@pytest.mark.slow
def test_annotations_keep_json_stdout_parseable(
    synthetic_wheel: Wheel, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("GITHUB_ACTIONS", "true")
    code, out, err = run(
        ["--policy", str(WIN), "--format", "json", str(synthetic_wheel("win_arch_missing"))], capsys
    )
    assert code == ExitCode.FINDINGS
    jsonschema.validate(json.loads(out), SCHEMA)
    assert err.startswith(
        "::error title=cudaship audit%3A archs%3A executorch/backends/cuda/aoti_cuda_shims.dll::"
    )


@pytest.mark.slow
def test_policy_from_pyproject_in_cwd(
    synthetic_wheel: Wheel,
    tmp_path: Path,
    capsys: pytest.CaptureFixture[str],
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    body = LINUX.read_text()
    # the example's tables, moved under [tool.cudaship]
    body = body.replace("[archs.", "[tool.cudaship.archs.").replace("[audit.", "[tool.cudaship.audit.")
    body = body.replace("[[audit.", "[[tool.cudaship.audit.")
    (tmp_path / "pyproject.toml").write_text('[project]\nname = "executorch"\n' + body)
    monkeypatch.chdir(tmp_path)
    code, data = run_json([str(synthetic_wheel("linux"))], capsys)
    assert code == ExitCode.OK
    assert data["policy"]["source"] == str(tmp_path / "pyproject.toml")
    assert any(c["family"] == "ownership" for c in data["checks"])


@pytest.mark.slow
def test_cudaship_toml_in_cwd(
    synthetic_wheel: Wheel,
    tmp_path: Path,
    capsys: pytest.CaptureFixture[str],
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    (tmp_path / "cudaship.toml").write_text(WIN.read_text())
    monkeypatch.chdir(tmp_path)
    code, data = run_json([str(synthetic_wheel("win_shims_no_driver"))], capsys)
    assert code == ExitCode.FINDINGS
    assert data["policy"]["source"] == str(tmp_path / "cudaship.toml")


@pytest.mark.slow
def test_no_policy_runs_the_default(
    synthetic_wheel: Wheel,
    tmp_path: Path,
    capsys: pytest.CaptureFixture[str],
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.chdir(tmp_path)
    code, data = run_json([str(synthetic_wheel("windows"))], capsys)
    assert data["policy"] == {"source": None, "default": True}
    # Without the policy's run-time DLL directories, the delegate's import of the shim DLL (another directory)
    # does not resolve: the default says so, and nothing else fails.
    (failed,) = [c for c in data["checks"] if c["status"] == "fail" and c["severity"] == "error"]
    assert failed["name"] == "closure: executorch/lib/executorch_backend_cuda.dll"
    assert (
        "shipped at executorch/backends/cuda/aoti_cuda_shims.dll but not on the search path"
        in failed["reason"]
    )
    assert code == ExitCode.FINDINGS
    families = {c["family"] for c in data["checks"]}
    assert families == {"record", "archs", "requirements", "closure", "collisions", "consistency", "variant"}
    # and the default's arch coverage of the wheel's train (cu130): a warning for 7.5, which CUDA 13.0
    # supports and the build leaves out
    (coverage,) = [c for c in data["checks"] if c["name"].startswith("archs: GPU coverage")]
    assert (coverage["status"], coverage["severity"]) == ("fail", "warning")
    assert coverage["reason"].endswith("supports on x86_64: 7.5 (Turing)")


@pytest.mark.network
def test_real_wheels_default_policy(
    cudart_windows_wheel: Path,
    cudart_linux_wheel: Path,
    tmp_path: Path,
    capsys: pytest.CaptureFixture[str],
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.chdir(tmp_path)
    code, data = run_json([str(cudart_windows_wheel), str(cudart_linux_wheel)], capsys)
    assert [w["filename"] for w in data["wheels"]] == [cudart_windows_wheel.name, cudart_linux_wheel.name]
    assert [(w["platform"], w["machine"]) for w in data["wheels"]] == [
        ("windows", "x86_64"),
        ("linux", "x86_64"),
    ]
    by_name = {(c["wheel"], c["name"]): c for c in data["checks"]}
    # NVIDIA's own runtime wheel: RECORD verified, the runtime resolves only to the OS
    for wheel in (cudart_windows_wheel, cudart_linux_wheel):
        assert by_name[(wheel.name, "record: hashes and sizes")]["status"] == "pass"
    win_closure = [
        c
        for c in data["checks"]
        if c["wheel"] == cudart_windows_wheel.name and c["name"].startswith("closure: nvidia/")
    ]
    assert win_closure and all(c["status"] == "pass" for c in win_closure)
    assert code in (ExitCode.OK, ExitCode.FINDINGS)


@pytest.mark.network
def test_real_multi_cuda_wheel(
    bitsandbytes_linux_wheel: Path,
    tmp_path: Path,
    capsys: pytest.CaptureFixture[str],
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.chdir(tmp_path)
    code, data = run_json([str(bitsandbytes_linux_wheel)], capsys)
    by_name = {c["name"]: c for c in data["checks"]}
    # one library per CUDA version and no train tag: each library agrees with itself
    consistency = by_name["consistency: CUDA train"]
    assert consistency["status"] == "pass", consistency
    # each libbitsandbytes_cudaXY[Z].so is shown with the cudart major its name promises
    libs = [
        c["name"].split("closure: ", 1)[1]
        for c in data["checks"]
        if c["name"].startswith("closure: bitsandbytes/libbitsandbytes_cuda")
    ]
    assert libs
    for lib in libs:
        digits = lib.rsplit("_cuda", 1)[1].split(".")[0]
        assert f"{lib} (variant, {digits[:-1]}.{digits[-1]}): cudart {digits[:2]}" in consistency["reason"]
    # the Intel XPU and ROCm builds are variants for other environments (oneAPI, ROCm): where their libraries
    # do not resolve from the requirements while a sibling's do, that is a note, not a failure
    others = [
        c
        for n, c in by_name.items()
        if n.startswith(
            ("closure: bitsandbytes/libbitsandbytes_xpu", "closure: bitsandbytes/libbitsandbytes_rocm")
        )
    ]
    assert others
    for c in others:
        assert c["status"] == "pass" or (c["severity"], c["rule"]) == ("note", "variant"), c
    assert code == ExitCode.OK


# -- bad input: one line, exit 2 --


def test_missing_wheel(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    code, out, err = run([str(tmp_path / "nope.whl")], capsys)
    assert code == ExitCode.BAD_INPUT
    assert out == ""
    assert err == f"cudaship: error: {tmp_path / 'nope.whl'}: no such file\n"


def test_corrupt_lzma_member_is_that_members_problem(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """An LZMA member with corrupt data: reported for that member, never an internal error."""
    import zipfile

    wheel = tmp_path / "pkg-1.0-py3-none-any.whl"
    payload = bytes(range(256)) * 64
    with zipfile.ZipFile(wheel, "w") as zf:
        zf.writestr("pkg/__init__.py", "")
        zf.writestr("pkg/data.bin", payload, compress_type=zipfile.ZIP_LZMA)
        zf.writestr("pkg-1.0.dist-info/WHEEL", "Wheel-Version: 1.0\nTag: py3-none-any\n")
        zf.writestr("pkg-1.0.dist-info/METADATA", "Metadata-Version: 2.1\nName: pkg\nVersion: 1.0\n")
        zf.writestr("pkg-1.0.dist-info/RECORD", "")
    data = bytearray(wheel.read_bytes())
    with zipfile.ZipFile(wheel) as zf:
        info = zf.getinfo("pkg/data.bin")
    start = info.header_offset + 30 + len(info.filename) + len(info.extra) + 4 + 5  # past the LZMA properties
    data[start : start + 64] = b"\xff" * 64
    wheel.write_bytes(bytes(data))
    code, out, err = run([str(wheel)], capsys)
    # decided in docs/cli.md: a member the archive cannot give back is bad input (2), reported both as the
    # failed record check and as one error line naming wheel!member
    assert code == ExitCode.BAD_INPUT, err
    assert "internal error" not in err
    assert "FAIL  record: hashes and sizes" in out and "pkg/data.bin: cannot be read" in out
    assert err.startswith(f"cudaship: error: {wheel}!pkg/data.bin: cannot be read: ") and err.count("\n") == 1


def test_corrupt_deflated_library_exits_2_after_reporting_the_rest(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """A deflated library whose data is damaged: every check still runs and is reported; exit 2, not 1."""
    import zipfile

    wheel = tmp_path / "pkg-1.0-py3-none-any.whl"
    with zipfile.ZipFile(wheel, "w", zipfile.ZIP_DEFLATED) as zf:
        zf.writestr("pkg/__init__.py", "")
        zf.writestr("pkg/libx.so", b"\x7fELF" + bytes(range(256)) * 256)
        zf.writestr("pkg-1.0.dist-info/WHEEL", "Wheel-Version: 1.0\nTag: py3-none-any\n")
        zf.writestr("pkg-1.0.dist-info/METADATA", "Metadata-Version: 2.1\nName: pkg\nVersion: 1.0\n")
        zf.writestr("pkg-1.0.dist-info/RECORD", "")
    data = bytearray(wheel.read_bytes())
    with zipfile.ZipFile(wheel) as zf:
        info = zf.getinfo("pkg/libx.so")
    start = info.header_offset + 30 + len(info.filename) + len(info.extra)
    data[start + 8 : start + 40] = bytes(b ^ 0x5A for b in data[start + 8 : start + 40])
    wheel.write_bytes(bytes(data))
    code, out, err = run([str(wheel)], capsys)
    assert code == ExitCode.BAD_INPUT, err
    assert "checks:" in out.splitlines()[-1]  # the whole report came first
    assert err.startswith(f"cudaship: error: {wheel}!pkg/libx.so: cannot be read: ") and err.count("\n") == 1


def test_not_a_zip(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.chdir(tmp_path)
    bad = tmp_path / "bad-1.0-py3-none-any.whl"
    bad.write_bytes(b"PK\x03\x04 not really")
    code, out, err = run([str(bad)], capsys)
    assert code == ExitCode.BAD_INPUT
    assert out == ""
    assert err.count("\n") == 1 and "not a readable zip archive" in err and str(bad) in err


def test_invalid_policy(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    policy = tmp_path / "p.toml"
    policy.write_text("[audit.archs]\nptx = 'sometimes'\n")
    wheel = tmp_path / "x-1.0-py3-none-any.whl"
    wheel.write_bytes(b"")
    code, out, err = run(["--policy", str(policy), str(wheel)], capsys)
    assert code == ExitCode.BAD_INPUT
    assert (
        err == f"cudaship: error: {policy}: audit.archs.ptx: must be one of newest, none, not 'sometimes'\n"
    )
    assert out == ""


def test_missing_policy_file(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    wheel = tmp_path / "x-1.0-py3-none-any.whl"
    wheel.write_bytes(b"")
    code, _, err = run(["--policy", str(tmp_path / "none.toml"), str(wheel)], capsys)
    assert code == ExitCode.BAD_INPUT
    assert "no such file" in err


def test_help_lists_formats(capsys: pytest.CaptureFixture[str]) -> None:
    code = main(["audit", "--help"])
    out = capsys.readouterr().out
    assert code == 0
    assert "text|json|junit|markdown" in out.replace(" ", "")


def test_env_is_clean() -> None:
    assert os.environ.get("GITHUB_ACTIONS") is None


@pytest.mark.slow
def test_unreadable_wheel_among_others(
    synthetic_wheel: Wheel, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    bad = tmp_path / "bad-1.0-py3-none-any.whl"
    bad.write_bytes(b"not a zip")
    good = synthetic_wheel("windows")
    code, out, err = run(["--policy", str(WIN), "--format", "json", str(bad), str(good)], capsys)
    assert code == ExitCode.BAD_INPUT
    data = json.loads(out)
    jsonschema.validate(data, SCHEMA)
    assert [w["filename"] for w in data["wheels"]] == [good.name]
    assert err.count("\n") == 1 and err.startswith(f"cudaship: error: {bad}: not a readable zip archive")


@pytest.mark.network
def test_real_macos_wheel(
    bitsandbytes_macos_wheel: Path,
    tmp_path: Path,
    capsys: pytest.CaptureFixture[str],
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.chdir(tmp_path)
    code, data = run_json([str(bitsandbytes_macos_wheel)], capsys)
    (wheel,) = data["wheels"]
    assert (wheel["platform"], wheel["machine"]) == ("macos", "aarch64")
    closure = [
        c for c in data["checks"] if c["name"].startswith("closure: ") and c["name"].endswith(".dylib")
    ]
    assert closure and all(c["status"] == "pass" for c in closure)
    assert code == ExitCode.OK
