"""variant family on hand-built records: each declared nvidia property against the device code and runtime
linkage; honest variants clean, each lie one failure naming the property and the evidence."""

from __future__ import annotations

import json

from cudaship.checks.variant_props import UNADMITTED, justified
from cudaship.records.binary import DeviceCode, FileFormat
from cudaship.records.files import FileReport
from cudaship.records.findings import CheckResult, Severity, Status
from cudaship.wheel.records import WheelVariant
from cudaship.wheel.variant import parse_variant_json
from tests.checks.handmade import by_name, context, host, library, ptx, run, sass

LIB = "pkg/lib/libk.so"


def variant(label: str, properties: dict[str, list[str]] | None) -> WheelVariant:
    """A variant.json for ``label`` with ``nvidia`` properties (None: the null variant), read by the "
    "reader."""
    doc = {
        "$schema": "https://variants-schema.wheelnext.dev/v0.0.3.json",
        "default-priorities": {"namespace": ["nvidia"]},
        "providers": {"nvidia": {"requires": ["nvidia-variant-provider>=0.0.1,<1.0.0"]}},
        "variants": {label: {"nvidia": properties} if properties else {}},
    }
    meta = parse_variant_json(json.dumps(doc), "pkg-1.0.dist-info/variant.json")
    return WheelVariant(label, meta)


def audit(
    libs: list[FileReport], props: dict[str, list[str]] | None, label: str = "cu12"
) -> dict[str, CheckResult]:
    return by_name(run(context(libs, variant=variant(label, props)), "variant"))


def lib(*device: DeviceCode, cudart: int | None = 12) -> FileReport:
    return library(LIB, device=device, cudart=cudart)


def failures(results: dict[str, CheckResult]) -> dict[str, CheckResult]:
    """The failures that fail the audit (notes aside)."""
    return {n: r for n, r in results.items() if r.is_error}


HONEST = {
    "cuda_version_lower_bound": ["12.8"],
    "cuda_version_upper_bound": ["13"],
    "sm_arch": ["80_real", "90_real", "90_virtual"],
}
CODE = (sass("sm_80"), sass("sm_90"), ptx("compute_90", isa="8.7"))


def test_not_a_variant_and_the_null_variant_are_skipped_saying_why() -> None:
    (result,) = run(context([lib(*CODE)]), "variant")
    assert result.status is Status.SKIP and "not a variant wheel" in result.reason
    (null,) = run(context([lib(*CODE)], variant=variant("null", None)), "variant")
    assert null.status is Status.SKIP and "declares no nvidia properties (the null variant)" in null.reason


def test_an_honest_variant_is_clean() -> None:
    results = audit([lib(*CODE)], HONEST)
    assert not failures(results), failures(results)
    assert results["variant: nvidia :: sm_arch :: 90_real"].status is Status.PASS
    assert "CUDA 12.0 at most" in results["variant: nvidia :: cuda_version_lower_bound :: 12.8"].reason


def test_a_real_arch_without_sass_fails_naming_the_library() -> None:
    props = {**HONEST, "sm_arch": [*HONEST["sm_arch"], "100_real"]}
    results = failures(audit([lib(*CODE)], props))
    assert list(results) == ["variant: nvidia :: sm_arch :: 100_real"]
    r = results["variant: nvidia :: sm_arch :: 100_real"]
    assert (r.rule, r.severity) == ("sm_arch", Severity.ERROR)
    assert "no SASS with kernels runs natively on 10.0 (SASS with kernels: sm_80 sm_90)" in r.reason
    assert r.evidence[0].file == LIB


def test_cubins_without_kernels_do_not_count_for_a_real_arch() -> None:
    """The issue's case: sm_90a cubins, none holding a kernel, under a 90_real claim."""
    code = (sass("sm_80"), sass("sm_90a", kernels=0), ptx("compute_80", isa="8.7"))
    r = failures(audit([lib(*code)], {"sm_arch": ["80_real", "90_real"]}))[
        "variant: nvidia :: sm_arch :: 90_real"
    ]
    assert "sm_90a holds no kernel" in r.reason


def test_a_lower_bound_below_the_ptx_the_driver_jits_fails_naming_the_ptx() -> None:
    # 120_virtual offers the variant to 12.x GPUs, which only JIT compute_90 (PTX ISA 8.7: CUDA 12.8)
    props = {"cuda_version_lower_bound": ["12.0"], "sm_arch": ["90_real", "120_virtual"]}
    results = failures(audit([lib(*CODE)], props))
    assert list(results) == ["variant: nvidia :: cuda_version_lower_bound :: 12.0"]
    r = results["variant: nvidia :: cuda_version_lower_bound :: 12.0"]
    assert r.rule == "lower_bound"
    assert r.reason.startswith(
        "admits drivers for CUDA 12.0, but the binaries need CUDA 12.8: compute_90 PTX"
    )
    assert "PTX ISA 8.7 in libk.so, JIT on 12.0" in r.reason
    # the same lower bound holds where every GPU offered runs SASS (no JIT, minor-version compatibility)
    ok = audit([lib(*CODE)], {"cuda_version_lower_bound": ["12.0"], "sm_arch": ["90_real"]})
    assert ok["variant: nvidia :: cuda_version_lower_bound :: 12.0"].status is Status.PASS


def test_a_lower_bound_below_the_runtime_major_fails() -> None:
    r = audit([lib(*CODE, cudart=13)], {"cuda_version_lower_bound": ["12.8"], "sm_arch": ["90_real"]})
    bad = r["variant: nvidia :: cuda_version_lower_bound :: 12.8"]
    assert bad.status is Status.FAIL and "need CUDA 13.0: libk.so links the CUDA 13 runtime" in bad.reason


def test_an_upper_bound_contradicting_the_runtime_fails() -> None:
    results = failures(
        audit([lib(*CODE, cudart=13)], {"cuda_version_upper_bound": ["13"], "sm_arch": ["90_real"]})
    )
    r = results["variant: nvidia :: cuda_version_upper_bound :: 13"]
    assert r.rule == "upper_bound"
    assert "libk.so links the CUDA 13 runtime: it needs a CUDA 13.x driver" in r.reason
    # an empty range: lower bound at or above the upper
    empty = failures(
        audit([lib(*CODE)], {"cuda_version_lower_bound": ["13.0"], "cuda_version_upper_bound": ["13"]})
    )
    assert "no driver is in the range" in empty["variant: nvidia :: cuda_version_upper_bound :: 13"].reason


def test_values_the_provider_never_reports_match_no_machine() -> None:
    results = failures(
        audit([lib(*CODE)], {"sm_arch": ["86_virtual", "90_real"], "cuda_version_lower_bound": ["12.8.1"]})
    )
    assert set(results) == {
        "variant: nvidia :: sm_arch :: 86_virtual",
        "variant: nvidia :: cuda_version_lower_bound :: 12.8.1",
    }
    assert all(r.rule == "value" for r in results.values())
    assert "80_virtual for a 8.x GPU" in results["variant: nvidia :: sm_arch :: 86_virtual"].reason


def test_arch_specific_sass_offered_to_a_gpu_it_does_not_run_on() -> None:
    """100_real is offered to 10.3 GPUs (B300); sm_100a runs only on 10.0."""
    r = failures(audit([lib(sass("sm_100a"))], {"sm_arch": ["100_real"]}))[
        "variant: nvidia :: sm_arch :: 100_real"
    ]
    assert "offered to 10.3 GPUs by 100_real, but does not run there" in r.reason


def test_device_code_no_machine_picks_is_a_note_with_its_size() -> None:
    results = audit([lib(*CODE)], {"sm_arch": ["90_real"]})
    note = results[UNADMITTED]
    assert (note.status, note.severity, note.rule) == (Status.FAIL, Severity.NOTE, "unadmitted")
    # sm_80 runs on no 9.x GPU; compute_90 is never JIT-compiled where sm_90 runs
    assert note.evidence[0].message == f"{LIB}: sm_80 compute_90 (200 bytes)"
    assert audit([lib(*CODE)], HONEST)[UNADMITTED].status is Status.PASS


def test_justified_properties_of_the_binaries() -> None:
    ctx = context([lib(*CODE)])
    found = [j.property.text for j in justified(ctx)]
    assert found == [
        "nvidia :: cuda_version_lower_bound :: 12.0",
        "nvidia :: cuda_version_upper_bound :: 13",
        "nvidia :: sm_arch :: 80_real",
        "nvidia :: sm_arch :: 90_real",
        "nvidia :: sm_arch :: 90_virtual",
    ]
    # what is justified is clean when declared
    props: dict[str, list[str]] = {}
    for text in found:
        _ns, feature, value = (p.strip() for p in text.split("::"))
        props.setdefault(feature, []).append(value)
    results = audit([lib(*CODE)], props)
    assert not failures(results), failures(results)


def test_a_static_archive_is_linked_not_loaded_and_restricts_nothing() -> None:
    """cumm_cu120's libcudadevrt.a (SASS sm_50 ... sm_90) once made every sm_arch value depend on it."""
    archive = library("pkg/lib/libcudadevrt.a", host(FileFormat.STATIC_LIBRARY), device=[sass("sm_50")])
    found = [j.property.text for j in justified(context([archive, lib(*CODE)]))]
    assert "nvidia :: sm_arch :: 50_real" not in found
    assert "nvidia :: sm_arch :: 80_real" in found
    assert justified(context([archive])) == []
