"""Programs are binaries too: ``inspect``, ``gpus`` and ``audit`` read ``.pt2`` and ``.pte`` as containers,
like wheels, each member reported under the package's path.

The ``.pte`` is the real ExecuTorch CUDA program committed in tests/program/data (exported on an H200, see
docs/program.md): its library hides fatbins (sm_90a SASS + compute_90a PTX, PTX ISA 9.0) in ``.rodata``. The
``.pt2`` is built here in AOTInductor's layout around a g++ library and an nvcc cubin.
"""

from __future__ import annotations

import json
import shutil
from collections.abc import Callable
from pathlib import Path
from typing import Any

import jsonschema
import pytest

from cudaship.cli.main import main
from tests.program.builders import gxx_library, make_pt2

REPO = Path(__file__).resolve().parents[2]
PTE = REPO / "tests" / "program" / "data" / "demo_mlp_cuda.pte"
SCHEMAS = REPO / "src" / "cudaship" / "render" / "schemas"
SO_BLOB = "named:e4768465a2e51b1c430d2e3725194669947c938359b876a20d2bff43794af55c_so_blob"


def run_json(capsys: pytest.CaptureFixture[str], *argv: str) -> tuple[int, Any]:
    code = main([*argv, "--format", "json"])
    return code, json.loads(capsys.readouterr().out)


def validate(data: Any, schema: str) -> None:
    jsonschema.Draft202012Validator(json.loads((SCHEMAS / schema).read_text())).validate(data)


@pytest.fixture
def pt2(tmp_path: Path, nvcc_build: Callable[[str], Path]) -> Path:
    wrapper = gxx_library(tmp_path / "lib", "wrapper")
    return make_pt2(tmp_path / "model.pt2", wrapper, [nvcc_build("cubin_sm90a")])


def test_inspect_pte_members_under_the_program(capsys: pytest.CaptureFixture[str]) -> None:
    code, data = run_json(capsys, "inspect", "--no-exports", str(PTE))
    assert code == 0
    validate(data, "inspect.schema.json")
    (program,) = data["wheels"]
    assert program["kind"] == "pte" and program["path"] == str(PTE)
    assert program["cuda_train"] == "13.0" and program["train_evidence"] == "PTX ISA 9.0"
    assert program["files"] == [SO_BLOB]
    (member,) = data["files"]
    assert member["path"] == SO_BLOB and member["wheel"] == str(PTE)
    assert member["format"] == "elf" and member["sass"] == ["sm_90a"] and member["ptx"] == ["compute_90a"]
    assert "libcuda.so.1" in member["imports"]


def test_inspect_pte_text_names_the_train(capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["inspect", "--no-exports", str(PTE)]) == 0
    out = capsys.readouterr().out
    assert out.startswith(f"ExecuTorch program {PTE}\n")
    assert "  CUDA train: 13.0, from PTX ISA 9.0\n" in out
    assert "not recorded" not in out
    assert f"{SO_BLOB}  [elf," in out


def test_program_inspect_pte_names_the_train(capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["program", "inspect", str(PTE)]) == 0
    assert "  CUDA train    13.0, from PTX ISA 9.0\n" in capsys.readouterr().out
    code, data = run_json(capsys, "program", "inspect", str(PTE))
    assert code == 0
    assert (data["programs"][0]["cuda_train"], data["programs"][0]["train_evidence"]) == (
        "13.0",
        "PTX ISA 9.0",
    )


def test_gpus_pte_runs_only_on_hopper(capsys: pytest.CaptureFixture[str]) -> None:
    code, data = run_json(capsys, "gpus", str(PTE))
    assert code == 0
    validate(data, "gpus.schema.json")
    (program,) = data["wheels"]
    assert program["kind"] == "pte" and program["path"] == str(PTE)
    verdicts = {cap: v["verdict"] for cap, v in program["verdicts"].items()}
    assert verdicts["9.0"] == "native"
    assert {v for cap, v in verdicts.items() if cap != "9.0"} == {"no"}
    assert program["files"] == [f"{PTE}!{SO_BLOB}"]
    assert main(["gpus", str(PTE)]) == 0
    assert f"ExecuTorch program {PTE}: 1 library with device code" in capsys.readouterr().out


def test_audit_pte_as_a_container(capsys: pytest.CaptureFixture[str]) -> None:
    code, data = run_json(capsys, "audit", str(PTE))
    assert code == 0
    validate(data, "audit.schema.json")
    (audit,) = data["wheels"]
    assert audit["filename"] == PTE.name and audit["train"] == "13.0"
    assert (audit["platform"], audit["machine"]) == ("linux", "x86_64")
    families = {c["family"] for c in data["checks"]}
    assert "closure" in families and "consistency" in families
    assert not families & {"record", "requirements"}  # no dist-info in a program
    assert any("wheel-only checks" in n for n in audit["notes"])
    assert any("CUDA train 13.0, from PTX ISA 9.0" in n for n in audit["notes"])
    closure = [c for c in data["checks"] if c["family"] == "closure" and SO_BLOB in c["name"]]
    assert closure and all(c["status"] == "pass" for c in closure)


def test_audit_pte_archs_against_a_policy(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    """With an arch policy the program's train (from its PTX) picks the expected list: sm_90a alone is
    not cu130's list, and the failure names the member inside the program."""
    policy = tmp_path / "cudaship.toml"
    policy.write_text('[audit]\nchecks = ["archs"]\n\n[audit.archs]\nlibraries = ["*"]\n')
    code, data = run_json(capsys, "audit", "--policy", str(policy), str(PTE))
    assert code == 1
    expected = next(c for c in data["checks"] if c["name"] == "archs: expected arch list")
    assert "cu130 x86_64 (from PTX ISA 9.0)" in expected["reason"]
    failed = [c for c in data["checks"] if c["status"] == "fail"]
    assert failed and any(f.get("file") == SO_BLOB for c in failed for f in c["evidence"])


def test_inspect_pt2_members_under_the_package(pt2: Path, capsys: pytest.CaptureFixture[str]) -> None:
    code, data = run_json(capsys, "inspect", "--no-exports", str(pt2))
    assert code == 0
    validate(data, "inspect.schema.json")
    (package,) = data["wheels"]
    assert package["kind"] == "pt2" and package["cuda_train"] is None  # SASS only: nothing names the train
    by_path = {f["path"]: f for f in data["files"]}
    assert set(by_path) == {
        "model/data/aotinductor/model/cwrapperhash.wrapper.so",
        "model/data/aotinductor/model/ckernel0.cubin",
    }
    assert all(f["wheel"] == str(pt2) for f in by_path.values())
    assert by_path["model/data/aotinductor/model/ckernel0.cubin"]["sass"] == ["sm_90a"]
    assert main(["inspect", "--no-exports", str(pt2)]) == 0
    out = capsys.readouterr().out
    assert out.startswith(f"AOTInductor package {pt2}\n") and "  CUDA train: not recorded\n" in out


def test_gpus_and_audit_pt2(pt2: Path, capsys: pytest.CaptureFixture[str]) -> None:
    code, data = run_json(capsys, "gpus", str(pt2))
    assert code == 0
    (package,) = data["wheels"]
    assert package["kind"] == "pt2" and package["verdicts"]["9.0"]["verdict"] == "native"
    assert package["verdicts"]["8.6"]["verdict"] == "no"
    code, data = run_json(capsys, "audit", str(pt2))
    assert code in (0, 1)  # the checks' verdicts; what matters: read as a program, not refused as a zip
    (audit,) = data["wheels"]
    assert audit["filename"] == "model.pt2" and audit["native_files"] == 2
    assert any("AOTInductor package" in n for n in audit["notes"])


def test_a_directory_with_a_program_is_walked_into(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    shutil.copyfile(PTE, tmp_path / "model.pte")
    (tmp_path / "README.txt").write_text("not a binary\n")
    code, data = run_json(capsys, "inspect", "--no-exports", str(tmp_path))
    assert code == 0
    assert [w["kind"] for w in data["wheels"]] == ["pte"]
    assert [f["path"] for f in data["files"]] == [SO_BLOB]


def test_a_bad_program_is_one_error_and_hides_nothing(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    bad = tmp_path / "broken.pt2"
    bad.write_bytes(b"this is not a zip archive at all")
    assert main(["inspect", "--no-exports", str(bad), str(PTE)]) == 2
    captured = capsys.readouterr()
    assert f"ExecuTorch program {PTE}" in captured.out  # the good one is still reported
    errors = captured.err.splitlines()
    assert len(errors) == 1 and errors[0].startswith(f"cudaship: error: {bad}: not a program")
    assert main(["audit", str(bad), str(PTE)]) == 2
    captured = capsys.readouterr()
    assert PTE.name in captured.out
    assert captured.err.splitlines() == errors  # the same one line


def test_inspect_details_reach_into_a_program(capsys: pytest.CaptureFixture[str]) -> None:
    code, data = run_json(capsys, "inspect", "--details", "--no-exports", str(PTE))
    assert code == 0
    sass = [d for d in data["files"][0]["device_code"] if d["kind"] == "sass"]
    assert sass and {d["toolkit_version"] for d in sass} == {"13.0"}
    code, plain = run_json(capsys, "inspect", "--no-exports", str(PTE))
    assert {d["toolkit_version"] for d in plain["files"][0]["device_code"]} == {None}


@pytest.mark.filterwarnings("ignore::UserWarning", "ignore::FutureWarning", "ignore::DeprecationWarning")
def test_audit_real_cpu_export_resolves_through_torch(
    cpu_export: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """A package AOTInductor wrote: its wrapper needs libtorch_cpu.so and libgomp.so.1, which torch (the
    runtime that loads the package) provides; closure says so instead of failing."""
    code, data = run_json(capsys, "audit", str(cpu_export / "model.pt2"))
    assert code == 0, [c for c in data["checks"] if c["status"] == "fail"]
    closure = next(c for c in data["checks"] if c["family"] == "closure" and "wrapper.so" in c["name"])
    assert closure["status"] == "pass" and "runtime" in closure["reason"]
    assert data["wheels"][0]["train"] is None  # a CPU package: nothing names a CUDA train


def test_runtime_libraries_are_per_program_kind() -> None:
    from cudaship.knowledge.program_runtimes import runtime_providing

    assert runtime_providing("pt2", "libtorch_cpu.so", "linux") == "torch"
    assert runtime_providing("pt2", "libgomp.so.1", "linux") == "torch"
    assert runtime_providing("pt2", "libfoo.so", "linux") is None
    assert runtime_providing("pte", "libtorch_cpu.so", "linux") is None


def test_doctor_judges_a_program_on_this_machine(
    capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    """doctor reads a .pte like gpus does; on a machine with an L4 and an H200 its sm_90a code runs on one."""
    from cudaship.knowledge.archs import parse_arch
    from cudaship.knowledge.driver import parse_driver
    from cudaship.probe.records import GpuInfo, ProbeResult

    machine = ProbeResult(
        driver=parse_driver("580.159.04"),
        gpus=(
            GpuInfo(0, "NVIDIA L4", parse_arch("8.9"), 24 * 2**30, True),
            GpuInfo(1, "NVIDIA H200", parse_arch("9.0"), 140 * 2**30, True),
        ),
        sources=("cuda-driver-api (libcuda.so.1)",),
    )
    monkeypatch.setattr("cudaship.cli.doctor_cmd.probe", lambda: machine)
    assert main(["doctor", str(PTE)]) == 1
    out = capsys.readouterr().out
    assert f"  {PTE}!{SO_BLOB}\n" in out
    assert "GPU 0 (8.9): WILL NOT RUN: sm_90a runs only on 9.0" in out
    assert "GPU 1 (9.0): runs natively: sm_90a (built for it)" in out
    code, data = run_json(capsys, "doctor", str(PTE))
    assert code == 1
    (item,) = data["files"]
    assert (item["path"], item["container"]) == (SO_BLOB, str(PTE))
    assert [g["verdict"] for g in item["gpus"]] == ["no", "native"]
