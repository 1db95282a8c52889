"""The size family on real wheels: the nvcc-built extension after auditwheel vendored libcudart into it, and
after cudaship repair took it out; budgets from [audit.size]."""

from __future__ import annotations

from pathlib import Path

import pytest

from cudaship.checks.engine import audit_scanned
from cudaship.checks.table import parse_audit_table
from cudaship.errors import PolicyError
from cudaship.inspection.scan import scan as scan_wheel
from cudaship.records.findings import CheckResult, Severity, Status
from cudaship.repair.run import repair_wheel

pytestmark = pytest.mark.slow


def _size_checks(wheel: Path, size: dict[str, object]) -> dict[str, CheckResult]:
    policy = parse_audit_table({"size": size}, "t.toml")
    audit = audit_scanned(scan_wheel(wheel, workers=1), policy)
    return {c.name: c for c in audit.checks if c.family == "size"}


def test_vendored_runtime_is_weighed_and_named(auditwheel_vendored: Path) -> None:
    checks = _size_checks(auditwheel_vendored, {"library": "1M", "arch": "1K", "total": "100M"})
    weight = checks["size: what the wheel weighs"]
    assert weight.status is Status.PASS
    by_file = {f.file: f.message for f in weight.evidence}
    ext = next(v for k, v in by_file.items() if k and k.startswith("cudemo/_ext"))
    assert "SASS sm_80" in ext and "PTX" in ext and "host" in ext
    assert "after cudaship repair" in weight.reason
    vendored = checks["size: CUDA libraries an NVIDIA wheel provides"]
    assert vendored.status is Status.FAIL and vendored.severity is Severity.NOTE
    (finding,) = vendored.evidence
    assert finding.file is not None and finding.file.startswith("cudemo.libs/libcudart-")
    assert "nvidia-cuda-runtime" in finding.message
    library = checks["size: budget per library"]
    assert library.status is Status.FAIL and library.severity is Severity.ERROR
    assert [f.file for f in library.evidence] == [finding.file]  # libcudart is 2.1 MB; the extension is not
    arch = checks["size: budget per arch"]
    assert arch.status is Status.FAIL and [f.arch for f in arch.evidence] == ["sm_80"]
    assert checks["size: budget for the wheel"].status is Status.PASS
    assert checks["size: PyPI's file-size limit"].status is Status.PASS


def test_repaired_wheel_ships_no_provided_library(auditwheel_vendored: Path, tmp_path: Path) -> None:
    result = repair_wheel(auditwheel_vendored, tmp_path)
    assert result.output is not None
    checks = _size_checks(Path(result.output), {"library": "1M"})
    assert checks["size: CUDA libraries an NVIDIA wheel provides"].status is Status.PASS
    assert checks["size: budget per library"].status is Status.PASS


@pytest.mark.parametrize(
    ("text", "bytes_"), [("100M", 100_000_000), ("1.5G", 1_500_000_000), ("512Ki", 524_288), (42, 42)]
)
def test_sizes_parse(text: object, bytes_: int) -> None:
    assert parse_audit_table({"size": {"total": text}}, "t.toml").size.total == bytes_


@pytest.mark.parametrize("bad", ["lots", "-5M", 0, True, "5T"])
def test_bad_sizes_are_policy_errors(bad: object) -> None:
    with pytest.raises(PolicyError, match=r"audit\.size\.total: must be a size"):
        parse_audit_table({"size": {"total": bad}}, "t.toml")


def test_the_providers_own_wheel_vendors_nothing(cudart_linux_wheel: Path) -> None:
    # nvidia-cuda-runtime ships libcudart.so.13 in nvidia/cu13/lib: it provides it, it does not vendor it
    checks = _size_checks(cudart_linux_wheel, {})
    assert checks["size: CUDA libraries an NVIDIA wheel provides"].status is Status.PASS
    weight = checks["size: what the wheel weighs"]
    assert any(f.file == "nvidia/cu13/lib/libcudart.so.13" for f in weight.evidence)
