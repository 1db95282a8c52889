"""The public Python API (``cudaship.inspect``, ``gpus``, ``audit``, ``repair``; docs/api.md): on real inputs
its records, rendered by the one JSON renderer, are byte for byte what the CLI's ``--format json`` prints, and
what the CLI turns into an exit code the API raises as a typed error."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest

import cudaship
from cudaship.cli.main import main
from cudaship.errors import KnowledgeError, PolicyError, UnknownTrainError, UsageError
from cudaship.exitcodes import ExitCode
from cudaship.knowledge.archs import sass_of
from cudaship.providers.options import ProviderOptions
from cudaship.render.table import AUDIT, GPUS, INSPECT, REPAIR, Command, render
from tests.reports import RESOLVED_AT, same_clock

REPO = Path(__file__).resolve().parents[1]
LIBRARY = REPO / "examples" / "libvecadd.so"


def as_written(command: Command[Any], record: Any) -> str:
    """The record's JSON report as the CLI writes it (`render.output.write_report` ends it with a newline)."""
    text = render(command, "json", record)
    return text if text.endswith("\n") else text + "\n"


def cli_json(args: list[str], capsys: pytest.CaptureFixture[str]) -> tuple[int, str]:
    capsys.readouterr()
    code = main([*args, "--format", "json"])
    return code, capsys.readouterr().out


def test_all_is_the_four_functions_their_records_and_errors() -> None:
    functions = ["audit", "gpus", "inspect", "repair"]
    records = ["AuditReport", "GpuReport", "InspectReport", "RepairReport", "ProviderOptions"]
    assert sorted(cudaship.__all__) == sorted([*functions, *records, "CudashipError", "InputError"])
    for name in cudaship.__all__:
        assert getattr(cudaship, name) is not None
    assert issubclass(cudaship.InputError, cudaship.CudashipError)
    with pytest.raises(AttributeError):
        _ = cudaship.scan  # type: ignore[attr-defined]


def test_import_cudaship_loads_nothing_else() -> None:
    """``import cudaship`` (which every ``import cudaship.x`` runs first) imports no module of the API's."""
    done = subprocess.run(
        [
            sys.executable,
            "-c",
            "import cudaship, sys; print(sorted(m for m in sys.modules if 'cudaship' in m))",
        ],
        capture_output=True,
        text=True,
        check=True,
        env={"PYTHONPATH": str(REPO / "src")},
    )
    assert done.stdout.split() == ["['cudaship']"]


def test_inspect_is_the_cli_json(capsys: pytest.CaptureFixture[str]) -> None:
    report = cudaship.inspect(str(LIBRARY.relative_to(REPO)))
    code, out = cli_json(["inspect", str(LIBRARY.relative_to(REPO))], capsys)
    assert code == ExitCode.OK
    assert as_written(INSPECT, report) == out
    assert isinstance(report, cudaship.InspectReport)
    assert sass_of(report.files[0].device_code) == ("sm_75", "sm_80", "sm_86", "sm_89", "sm_90a", "sm_120a")


def test_inspect_of_an_unreadable_input_raises_with_the_report(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    missing = tmp_path / "missing.so"
    with pytest.raises(cudaship.InputError) as info:
        cudaship.inspect([LIBRARY, missing])
    assert str(info.value) == f"{missing}: no such file or directory"
    code, out = cli_json(["inspect", str(LIBRARY), str(missing)], capsys)
    assert code == ExitCode.BAD_INPUT
    assert as_written(INSPECT, info.value.report) == out


def test_gpus_is_the_cli_json(capsys: pytest.CaptureFixture[str]) -> None:
    report = cudaship.gpus(LIBRARY, gpus=["H100", "8.6", "RTX 5090"], driver="570.86")
    code, out = cli_json(
        ["gpus", str(LIBRARY), "--gpu", "H100", "--gpu", "8.6", "--gpu", "RTX 5090", "--driver", "570.86"],
        capsys,
    )
    assert code == ExitCode.OK
    assert as_written(GPUS, report) == out
    assert isinstance(report, cudaship.GpuReport)
    assert json.loads(out)  # a report, not an empty document


def test_gpus_of_an_unknown_gpu_raises() -> None:
    with pytest.raises(KnowledgeError):
        cudaship.gpus(LIBRARY, gpus=["Voodoo 3"])


def test_audit_is_the_cli_json(
    cudart_linux_wheel: Path,
    tmp_path: Path,
    capsys: pytest.CaptureFixture[str],
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.chdir(tmp_path)  # no project configuration: the built-in default policy, for both
    # the CLI's providers here: the index through its on-disk cache only ($CUDASHIP_OFFLINE, conftest.py)
    providers = ProviderOptions(index_url="https://pypi.org/simple", offline=True)
    report = cudaship.audit(cudart_linux_wheel, providers=providers, workers=1)
    code, out = cli_json(["audit", "--no-progress", "-j", "1", str(cudart_linux_wheel)], capsys)
    assert code == ExitCode.OK
    assert RESOLVED_AT.search(out)  # the report says when the index was read
    assert same_clock(as_written(AUDIT, report)) == same_clock(out)
    assert isinstance(report, cudaship.AuditReport) and report.ok


def test_audit_with_a_policy_file_and_train(
    cudart_linux_wheel: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    policy = tmp_path / "cudaship.toml"
    policy.write_text('[audit]\nchecks = ["record", "consistency"]\n')
    providers = ProviderOptions(index_url="https://pypi.org/simple", offline=True)  # the CLI's (conftest.py)
    report = cudaship.audit(cudart_linux_wheel, policy=policy, train="13.0", providers=providers)
    code, out = cli_json(
        ["audit", "--no-progress", "--policy", str(policy), "--train", "13.0", str(cudart_linux_wheel)],
        capsys,
    )
    assert same_clock(as_written(AUDIT, report)) == same_clock(out)
    assert {c.family for c in report.checks} == {"record", "consistency"}
    assert code == (ExitCode.OK if report.ok else ExitCode.FINDINGS)


def test_audit_errors_are_typed(cudart_linux_wheel: Path, tmp_path: Path) -> None:
    bad = tmp_path / "cudaship.toml"
    bad.write_text('[audit.archs]\nptx = "sometimes"\n')
    with pytest.raises(PolicyError, match=r"audit\.archs\.ptx"):
        cudaship.audit(cudart_linux_wheel, policy=bad)
    with pytest.raises(UnknownTrainError):
        cudaship.audit(cudart_linux_wheel, train="99.9")
    with pytest.raises(cudaship.InputError) as info:
        cudaship.audit(tmp_path / "nothing-1.0-py3-none-any.whl")
    assert isinstance(info.value.report, cudaship.AuditReport) and info.value.report.errors


def test_repair_is_the_cli_json(
    auditwheel_vendored: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    plan = cudaship.repair(auditwheel_vendored, dry_run=True)
    code, out = cli_json(["repair", str(auditwheel_vendored), "--dry-run"], capsys)
    assert code == ExitCode.OK
    assert as_written(REPAIR, plan) == out

    code, out = cli_json(["repair", str(auditwheel_vendored), "-w", str(tmp_path)], capsys)
    assert code == ExitCode.OK
    written = Path(json.loads(out)["wheels"][0]["output"])
    by_cli = written.read_bytes()
    report = cudaship.repair(auditwheel_vendored, tmp_path)
    assert as_written(REPAIR, report) == out
    assert written.read_bytes() == by_cli  # the writer is deterministic: the same wheel, byte for byte
    assert isinstance(report, cudaship.RepairReport) and report.wheels[0].output == str(written)


def test_repair_is_the_function_though_a_package_has_its_name() -> None:
    """``cudaship/repair/`` is also a package; importing it (as the CLI does) must not hide the function."""
    from cudaship.repair.run import repair_wheel  # noqa: F401 - the import is the point

    assert callable(cudaship.repair) and cudaship.repair.__module__ == "cudaship.api"
    assert sys.modules["cudaship.repair"].__name__ == "cudaship.repair"


def test_repair_errors_are_typed(tmp_path: Path) -> None:
    with pytest.raises(UsageError):
        cudaship.repair(tmp_path / "x-1.0-py3-none-any.whl")
    with pytest.raises(cudaship.InputError) as info:
        cudaship.repair(tmp_path / "x-1.0-py3-none-any.whl", tmp_path / "out")
    assert info.value.report.failed
