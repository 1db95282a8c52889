"""Variant wheels made from the synthetic Linux wheel (real nvcc output: SASS sm_80 86 89 90 100 120, PTX
compute_120 at ISA 9.0, linked to the CUDA 13 runtime): ``cudaship variant properties`` writes the properties,
the honest variant built from them audits clean, each lie is one error naming the property and the evidence,
and a malformed variant is one line, exit 2."""

from __future__ import annotations

import json
import zipfile
from collections.abc import Callable
from pathlib import Path

import jsonschema  # type: ignore[import-untyped]
import pytest

from cudaship.checks.engine import audit_wheels
from cudaship.checks.table import default_policy
from cudaship.cli.main import main
from cudaship.records.findings import CheckResult, Status
from tests.fixtures.variant_wheels import make_variant, variant_document

pytestmark = pytest.mark.slow

SHIMS = "executorch/backends/cuda/libaoti_cuda_shims.so"


SCHEMAS = Path(__file__).resolve().parents[2] / "src/cudaship/render/schemas"
SCHEMA = json.loads((SCHEMAS / "variant-properties.schema.json").read_text())
RELEASE_SCHEMA = json.loads((SCHEMAS / "variant-release.schema.json").read_text())


def _properties(wheel: Path, capsys: pytest.CaptureFixture[str]) -> dict[str, dict[str, list[str]]]:
    assert main(["variant", "properties", str(wheel), "-f", "json"]) == 0
    doc = json.loads(capsys.readouterr().out)
    jsonschema.validate(doc, SCHEMA)
    props: dict[str, dict[str, list[str]]] = doc["properties"]
    return props


def _variant_checks(wheel: Path) -> dict[str, CheckResult]:
    report = audit_wheels([wheel], default_policy())
    return {c.name: c for c in report.checks if c.family == "variant"}


def _errors(checks: dict[str, CheckResult]) -> dict[str, CheckResult]:
    return {n: c for n, c in checks.items() if c.is_error}


@pytest.fixture
def linux(synthetic_wheel: Callable[[str], Path]) -> Path:
    return synthetic_wheel("linux")


def test_properties_the_binaries_justify(linux: Path, capsys: pytest.CaptureFixture[str]) -> None:
    assert _properties(linux, capsys) == {
        "nvidia": {
            "cuda_version_lower_bound": ["13.0"],
            "cuda_version_upper_bound": ["14"],
            "sm_arch": ["80_real", "86_real", "89_real", "90_real", "100_real", "120_real", "120_virtual"],
        }
    }
    assert main(["variant", "properties", str(linux), "-f", "args"]) == 0
    assert capsys.readouterr().out.startswith("-p 'nvidia :: cuda_version_lower_bound :: 13.0' -p ")


def test_the_plain_wheel_says_the_family_did_not_apply(linux: Path) -> None:
    (only,) = _variant_checks(linux).values()
    assert only.status is Status.SKIP and "not a variant wheel" in only.reason


def test_the_honest_variant_is_clean(linux: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    honest = make_variant(linux, tmp_path, "cu13", _properties(linux, capsys))
    assert honest.name.endswith("-manylinux_2_28_x86_64-cu13.whl")
    checks = _variant_checks(honest)
    assert len(checks) == 10  # 9 properties and the unadmitted-code note
    assert all(c.status is Status.PASS for c in checks.values()), [c.reason for c in checks.values()]
    # the rest of the audit reads the variant wheel as it read the plain one
    plain = {
        c.name: c.status for c in audit_wheels([linux], default_policy()).checks if c.family != "variant"
    }
    other = {
        c.name: c.status for c in audit_wheels([honest], default_policy()).checks if c.family != "variant"
    }
    assert other == plain


HONEST = {
    "cuda_version_lower_bound": ["13.0"],
    "cuda_version_upper_bound": ["14"],
    "sm_arch": ["80_real", "90_real", "120_real", "120_virtual"],
}


@pytest.mark.parametrize(
    ("change", "failing", "evidence"),
    [
        (
            {"sm_arch": ["75_real", "80_real", "90_real"]},
            "variant: nvidia :: sm_arch :: 75_real",
            f"{SHIMS}: no SASS with kernels runs natively on 7.5 (SASS with kernels: sm_80 sm_86 sm_89 sm_90 "
            "sm_100 sm_120)",
        ),
        (
            {"cuda_version_lower_bound": ["12.8"]},
            "variant: nvidia :: cuda_version_lower_bound :: 12.8",
            "admits drivers for CUDA 12.8, but the binaries need CUDA 13.0: ",
        ),
        (
            {"cuda_version_upper_bound": ["13"]},
            "variant: nvidia :: cuda_version_upper_bound :: 13",
            "libaoti_cuda_shims.so links the CUDA 13 runtime: it needs a CUDA 13.x driver, and drivers below "
            "CUDA 13 are older",
        ),
    ],
    ids=["missing-real-arch", "lower-bound-too-low", "upper-bound-contradicts-runtime"],
)
def test_each_lie_is_one_error_naming_the_property(
    linux: Path, tmp_path: Path, change: dict[str, list[str]], failing: str, evidence: str
) -> None:
    lying = make_variant(linux, tmp_path, "lie", {"nvidia": {**HONEST, **change}})
    errors = _errors(_variant_checks(lying))
    assert list(errors) == [failing]
    assert evidence in errors[failing].reason or evidence in errors[failing].evidence[0].message


def test_without_sm_arch_the_lower_bound_is_judged_on_every_gpu(linux: Path, tmp_path: Path) -> None:
    """No sm_arch: the variant is offered to every GPU; each runs SASS here (12.1 the sm_120 cubin), so the
    need is the runtime's and the cubins' (CUDA 13), and 12.9 is below it."""
    lying = make_variant(linux, tmp_path, "nosm", {"nvidia": {"cuda_version_lower_bound": ["12.9"]}})
    errors = _errors(_variant_checks(lying))
    assert list(errors) == ["variant: nvidia :: cuda_version_lower_bound :: 12.9"]
    assert "need CUDA 13.0" in errors["variant: nvidia :: cuda_version_lower_bound :: 12.9"].reason


@pytest.mark.parametrize(
    ("kwargs", "message"),
    [
        ({"variant_json": b"{not json"}, "variant.json: invalid JSON"),
        ({"include_json": False}, "the file name has the variant label 'cu13' but there is no"),
        (
            {
                "variant_json": json.dumps(
                    variant_document("other", {"nvidia": {"sm_arch": ["90_real"]}})
                ).encode()
            },
            "must describe exactly the file name's variant 'cu13'; it describes other",
        ),
        (
            {
                "variant_json": json.dumps(
                    variant_document("cu13", {"nvidia": {"sm_arch": ["90 real"]}})
                ).encode()
            },
            "variants.cu13.nvidia.sm_arch[0]: '90 real' is not a valid feature value",
        ),
    ],
    ids=["invalid-json", "no-variant-json", "other-label", "bad-value"],
)
def test_a_malformed_variant_is_one_line_exit_2(
    linux: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str], kwargs: dict[str, object], message: str
) -> None:
    bad = make_variant(linux, tmp_path, "cu13", {"nvidia": HONEST}, **kwargs)  # type: ignore[arg-type]
    assert main(["audit", str(bad)]) == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1, err
    assert str(bad) in err[0] and message in err[0], err[0]


def test_release_of_real_variant_wheels_and_which_variant_here(
    linux: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    cu13 = make_variant(linux, tmp_path, "cu13", _properties(linux, capsys))
    null = make_variant(linux, tmp_path, "null", None)
    # one machine: an H100 with a driver for CUDA 13.0 gets cu13 and runs it; with a 12.8 driver, the null one
    assert (
        main(["variant", "release", str(cu13), str(null), "--gpu", "H100", "--driver", "13.0", "-f", "json"])
        == 0
    )
    doc = json.loads(capsys.readouterr().out)
    jsonschema.validate(doc, RELEASE_SCHEMA)
    assert doc["picks"] == [
        {"gpu": "9.0", "cuda": "13.0", "variant": "cu13", "runs": True, "reason": doc["picks"][0]["reason"]}
    ]
    assert (
        main(["variant", "release", str(cu13), str(null), "--gpu", "9.0", "--driver", "12.8", "-f", "json"])
        == 0
    )
    assert json.loads(capsys.readouterr().out)["picks"][0]["variant"] == "null"
    # the whole grid: the null variant made from the CUDA wheel carries CUDA code (a warning, exit 0)
    assert main(["variant", "release", str(cu13), str(null)]) == 0
    out = capsys.readouterr().out
    assert "WARNING variant release: null variant — the null variant carries CUDA code" in out
    assert "PASS    variant release: picked variants run" in out
    assert "PASS    variant release: coverage" in out
    # with HONEST's sm_arch (no 100_real), 10.x GPUs fall to the null variant between covered ones: a gap
    partial = make_variant(linux, tmp_path / "partial", "cu13", {"nvidia": HONEST})
    assert main(["variant", "release", str(partial), str(null)]) == 1
    gap = (
        "ERROR   variant release: coverage — 10 machines inside the covered range get no variant; "
        "first: GPU 10.0"
    )
    assert gap in capsys.readouterr().out


def test_make_writes_the_honest_variant(
    linux: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    assert main(["variant", "make", str(linux), "-w", str(tmp_path), "-f", "json"]) == 0
    doc = json.loads(capsys.readouterr().out)
    (made,) = tmp_path.glob("*.whl")
    assert made.name == linux.name[: -len(".whl")] + "-cu130.whl" == doc["wheel"]
    assert doc["label"] == "cu130" and doc["properties"] == _properties(linux, capsys)
    # a provider entry uv 0.13.9 takes (it refuses one with enable-if: docs/variants.md)
    with zipfile.ZipFile(made) as z:
        written = json.loads(next(z.read(n) for n in z.namelist() if n.endswith(".dist-info/variant.json")))
    assert set(written["providers"]["nvidia"]) == {"requires", "plugin-api"}
    report = audit_wheels([made], default_policy())
    variant = {c.name: c for c in report.checks if c.family == "variant"}
    assert len(variant) == 10 and all(c.status is Status.PASS for c in variant.values())
    record = [c for c in report.checks if c.family == "record"]
    assert record and all(c.status is Status.PASS for c in record)
    # the same input gives the same bytes; a variant wheel is not made a variant again
    again = tmp_path / "again"
    assert main(["variant", "make", str(linux), "-w", str(again)]) == 0
    assert (again / made.name).read_bytes() == made.read_bytes()
    capsys.readouterr()
    assert main(["variant", "make", str(made), "-w", str(tmp_path / "x")]) == 2
    assert "already a variant wheel (label 'cu130')" in capsys.readouterr().err


def test_here_reads_the_providers_override_variables(
    linux: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    """No GPU needed: the provider's own override variables stand for this machine, as they do for it."""
    cu13 = make_variant(linux, tmp_path, "cu13", _properties(linux, capsys))
    null = make_variant(linux, tmp_path, "null", None)
    monkeypatch.setenv("NV_VARIANT_PROVIDER_FORCE_CUDA_DRIVER_VERSION", "13.0")
    monkeypatch.setenv("NV_VARIANT_PROVIDER_FORCE_SM_ARCH", "12.0")
    assert main(["variant", "release", str(cu13), str(null), "--here", "-f", "json"]) == 0
    (pick,) = json.loads(capsys.readouterr().out)["picks"]
    assert (pick["gpu"], pick["cuda"], pick["variant"], pick["runs"]) == ("12.0", "13.0", "cu13", True)
    monkeypatch.setenv("NV_VARIANT_PROVIDER_FORCE_CUDA_DRIVER_VERSION", "12.9")
    assert main(["variant", "release", str(cu13), str(null), "--here", "-f", "json"]) == 0
    assert json.loads(capsys.readouterr().out)["picks"][0]["variant"] == "null"
