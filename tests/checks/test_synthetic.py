"""The example policies against synthetic ExecuTorch-like wheels built from real nvcc and mingw-w64 output:
the
base wheels pass every check, and each variant fails exactly the checks its change breaks (and no other)."""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path

import pytest

from cudaship.checks.engine import audit_wheels
from cudaship.checks.table import load_policy
from cudaship.config import load_config
from cudaship.records.findings import Severity, Status
from tests.fixtures.synthetic_wheels import LINUX_FILES, VARIANTS, Variant

pytestmark = pytest.mark.slow


def _audit(wheel: Path, policy_file: Path) -> dict[str, tuple[Status, Severity]]:
    report = audit_wheels([wheel], load_policy(load_config(policy_file)))
    names = [c.name for c in report.checks]
    assert len(names) == len(set(names)), "check names are unique per wheel"
    return {c.name: (c.status, c.severity) for c in report.checks}


@pytest.mark.parametrize("variant", list(VARIANTS.values()), ids=lambda v: v.name)
def test_variant_fails_exactly_what_it_breaks(
    variant: Variant, synthetic_wheel: Callable[[str], Path], example_policy: Callable[[str], Path]
) -> None:
    results = _audit(synthetic_wheel(variant.name), example_policy(variant.platform))
    failed = {name for name, (status, _severity) in results.items() if status is Status.FAIL}
    assert failed == set(variant.fails), variant.change
    # the example policies are release gates: every failure is an error (exit 1), except a note that
    # refers to another failure's error for the same cause (requirements.closure, closure.dependency)
    errors = {name for name in failed if results[name][1] is Severity.ERROR}
    assert errors or not failed, variant.change
    for name in failed - errors:
        assert name in _REFERRING and results[name][1] is Severity.NOTE, (variant.change, name)


#: checks that, when they fail only because of another check's error, are a note pointing to it
_REFERRING = ("requirements: CUDA imports provided", f"closure: {LINUX_FILES['backend']}")


@pytest.mark.parametrize("platform", ["windows", "linux"], ids=["windows", "linux"])
def test_base_wheel_runs_every_family(
    platform: str, synthetic_wheel: Callable[[str], Path], example_policy: Callable[[str], Path]
) -> None:
    report = audit_wheels([synthetic_wheel(platform)], load_policy(load_config(example_policy(platform))))
    families = {c.family for c in report.checks}
    assert families == {
        "record",
        "ships",
        "forbidden_imports",
        "required_imports",
        "archs",
        "requirements",
        "ownership",
        "closure",
        "collisions",
        "consistency",
        "variant",
        "size",
    }
    assert report.ok
    # a plain wheel is no variant: the variant family says it did not apply (skipped, never a silent pass)
    (variant,) = [c for c in report.checks if c.family == "variant"]
    assert variant.status is Status.SKIP and variant.reason.startswith("not a variant wheel")
    assert all(c.status is Status.PASS for c in report.checks if c.family != "variant")


def test_expected_archs_come_from_the_wheels_own_tag(
    synthetic_wheel: Callable[[str], Path],
    example_policy: Callable[[str], Path],
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    # The variable a CI build consumes must not matter: the list comes from +cu130 in the wheel's version.
    monkeypatch.setenv("TORCH_CUDA_ARCH_LIST", "7.5;8.0")
    monkeypatch.setenv("CUDA_ARCH_LIST", "7.5")
    report = audit_wheels([synthetic_wheel("windows")], load_policy(load_config(example_policy("windows"))))
    expected = next(c for c in report.checks if c.name == "archs: expected arch list")
    assert expected.status is Status.PASS
    assert "cu130 x86_64 (local tag +cu130)" in expected.reason
    assert "sm_75" not in expected.reason


def test_default_policy_runs_without_project_knowledge(synthetic_wheel: Callable[[str], Path]) -> None:
    from cudaship.checks.table import default_families, default_policy

    report = audit_wheels([synthetic_wheel("linux_relocatable_ptx")], default_policy())
    assert {c.family for c in report.checks} <= set(default_families())
    failed = {c.name: c.severity for c in report.checks if c.status is Status.FAIL}
    # without a policy, the relocatable-only PTX is still flagged, as a warning that does not fail the audit
    # (once: the forward-compatible PTX check leaves it to this one); nothing project-specific runs
    # the GPU coverage of its train is checked too: the release contract's cu130 list (8.0 ... 12.0) leaves
    # out 7.5, which CUDA 13.0 supports, and says so as a warning
    shims = "executorch/backends/cuda/libaoti_cuda_shims.so"
    assert failed == {
        f"archs: loadable PTX in {shims}": Severity.WARNING,
        f"archs: GPU coverage of {shims}": Severity.WARNING,
    }
    coverage = next(c for c in report.checks if c.name == f"archs: GPU coverage of {shims}")
    assert [f.arch for f in coverage.evidence] == ["sm_75"]
    assert report.ok
    assert report.summary.warnings == 2
    assert report.policy_default


def test_default_policy_flags_unused_needed(synthetic_wheel: Callable[[str], Path]) -> None:
    from cudaship.checks.table import default_policy

    report = audit_wheels([synthetic_wheel("linux_unused_needed")], default_policy())
    failed = [c for c in report.checks if c.status is Status.FAIL and c.family != "archs"]
    assert [c.name for c in failed] == [
        "closure: unused imports in executorch/lib/libexecutorch_backend_cuda.so"
    ]
    assert failed[0].evidence[0].symbol == "libexecutorch_extension_cuda.so"
    # a warning by default: reported, the audit still passes
    assert (failed[0].severity, failed[0].rule) == (Severity.WARNING, "unused_imports")
    assert report.ok


def test_failures_carry_evidence(
    synthetic_wheel: Callable[[str], Path], example_policy: Callable[[str], Path]
) -> None:
    report = audit_wheels(
        [synthetic_wheel("win_arch_missing")], load_policy(load_config(example_policy("windows")))
    )
    (failure,) = [c for c in report.checks if c.status is Status.FAIL]
    (finding,) = failure.evidence
    assert finding.arch == "sm_120"
    assert finding.file == "executorch/backends/cuda/aoti_cuda_shims.dll"


def test_no_cuda_names_the_chain(
    synthetic_wheel: Callable[[str], Path], example_policy: Callable[[str], Path]
) -> None:
    report = audit_wheels(
        [synthetic_wheel("win_pymodule_reaches_cuda")], load_policy(load_config(example_policy("windows")))
    )
    (failure,) = [c for c in report.checks if c.status is Status.FAIL]
    messages = [f.message for f in failure.evidence]
    # direct (the delegate's name contains "cuda") and through shipped libraries (the shims' nvcuda.dll)
    assert any("executorch_backend_cuda.dll" in m and "through" not in m for m in messages)
    assert any("nvcuda.dll" in m and "through" in m and "aoti_cuda_shims.dll" in m for m in messages)


def test_several_wheels_grouped(
    synthetic_wheel: Callable[[str], Path], example_policy: Callable[[str], Path]
) -> None:
    wheels = [synthetic_wheel("windows"), synthetic_wheel("win_arch_missing")]
    report = audit_wheels(wheels, load_policy(load_config(example_policy("windows"))))
    assert [w.path for w in report.wheels] == [str(w) for w in wheels]
    assert report.wheels[0].summary.failed == 0
    assert report.wheels[1].summary.failed == 1
    assert report.summary.total == report.wheels[0].summary.total + report.wheels[1].summary.total
