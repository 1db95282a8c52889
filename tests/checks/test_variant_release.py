"""A release's variants together, on hand-built wheels: PEP 825's ordering with the NVIDIA provider's values,
which machine gets which variant, a gap in the coverage, a variant picked where it cannot run, the null
variant."""

from __future__ import annotations

import json

from cudaship.analysis.variant_pick import order
from cudaship.checks.context import AuditContext
from cudaship.checks.variant_release import ReleaseReport, release
from cudaship.knowledge.archs import parse_arch
from cudaship.knowledge.variant_provider import supported_values
from cudaship.records.binary import DeviceCode
from cudaship.records.findings import CheckResult, Status
from cudaship.wheel.variant import parse_variant_json
from tests.checks.handmade import context, library, ptx, sass
from tests.checks.test_variant_props import variant


def wheel(
    label: str, props: dict[str, list[str]] | None, *device: DeviceCode, cudart: int | None
) -> AuditContext:
    libs = [library("pkg/lib/libk.so", device=device, cudart=cudart)] if device or cudart else []
    return context(libs, variant=variant(label, props))


SM = ["80_real", "90_real"]
SM_NEW = ["80_real", "90_real", "100_real", "120_real", "120_virtual"]
OLD = (sass("sm_80"), sass("sm_90"))
NEW = (sass("sm_80"), sass("sm_90"), sass("sm_100"), sass("sm_120"))


def release_of(*wheels: AuditContext, **kwargs: object) -> ReleaseReport:
    return release(list(wheels), **kwargs)  # type: ignore[arg-type]


def four_plus_null(cu128_sm: list[str] | None = None) -> list[AuditContext]:
    """cu118, cu126, cu128, cu130 and null; the lower bounds leave drivers for CUDA 12.0-12.5 uncovered."""
    return [
        wheel(
            "cu118",
            {"cuda_version_lower_bound": ["11.8"], "cuda_version_upper_bound": ["12"], "sm_arch": SM},
            *OLD,
            ptx("compute_90", isa="7.8"),
            cudart=11,
        ),
        wheel(
            "cu126",
            {"cuda_version_lower_bound": ["12.6"], "cuda_version_upper_bound": ["13"], "sm_arch": SM},
            *OLD,
            ptx("compute_90", isa="8.5"),
            cudart=12,
        ),
        wheel(
            "cu128",
            {
                "cuda_version_lower_bound": ["12.8"],
                "cuda_version_upper_bound": ["13"],
                "sm_arch": cu128_sm or SM_NEW,
            },
            *NEW,
            ptx("compute_120", isa="8.7"),
            cudart=12,
        ),
        wheel(
            "cu130",
            {"cuda_version_lower_bound": ["13.0"], "cuda_version_upper_bound": ["14"], "sm_arch": SM_NEW},
            *NEW,
            ptx("compute_120", isa="9.0"),
            cudart=13,
        ),
        wheel("null", None, cudart=None),
    ]


def checks(report: ReleaseReport) -> dict[str, CheckResult]:
    return {c.name: c for c in report.checks}


def picked(report: ReleaseReport, gpu: str, cuda: str) -> str | None:
    (p,) = [p for p in report.picks if (p.capability, p.cuda) == (gpu, cuda)]
    return p.label


def test_the_provider_and_pep_825_pick_the_newest_fitting_variant() -> None:
    report = release_of(*four_plus_null())
    assert picked(report, "9.0", "11.8") == "cu118"
    assert picked(report, "9.0", "12.6") == "cu126"
    assert picked(report, "9.0", "12.9") == "cu128"  # lower bound 12.8 ranks above 12.6
    assert picked(report, "9.0", "13.0") == "cu130"  # cu128's upper bound 13 excludes a 13.0 driver
    assert picked(report, "12.0", "12.6") == "null"  # cu126 has no 12.x SASS and declares no 120 value
    assert picked(report, "12.0", "12.8") == "cu128"
    assert picked(report, "8.6", "12.8") == "cu128"  # 80_real is offered to 8.6
    assert picked(report, "7.5", "13.0") == "null"


def test_a_gap_in_the_coverage_is_caught_naming_the_machines() -> None:
    report = release_of(*four_plus_null())
    found = checks(report)
    assert found["variant release: picked variants run"].status is Status.PASS
    assert found["variant release: metadata agree"].status is Status.PASS
    gap = found["variant release: coverage"]
    assert gap.status is Status.FAIL and gap.rule == "release"
    messages = [f.message for f in gap.evidence]
    assert any(
        m.startswith("GPU 9.0, driver for CUDA 12.0: no variant (drivers for CUDA 11.8 and ")
        for m in messages
    )
    assert {f.version for f in gap.evidence} == {"12.0", "12.1", "12.2", "12.3", "12.4", "12.5"}
    # without the gap (cu126 from 12.0), the coverage is whole
    fixed = four_plus_null()
    fixed[1] = wheel(
        "cu126",
        {"cuda_version_lower_bound": ["12.0"], "cuda_version_upper_bound": ["13"], "sm_arch": SM},
        *OLD,
        ptx("compute_90", isa="8.0"),
        cudart=12,
    )
    assert checks(release_of(*fixed))["variant release: coverage"].status is Status.PASS


def test_a_variant_picked_where_it_cannot_run() -> None:
    """cu128 claims 120_real but carries neither sm_120 nor PTX: 12.0 GPUs with a 12.8 driver get it."""
    broken = four_plus_null()
    broken[2] = wheel(
        "cu128",
        {"cuda_version_lower_bound": ["12.8"], "cuda_version_upper_bound": ["13"], "sm_arch": SM_NEW},
        sass("sm_80"),
        sass("sm_90"),
        sass("sm_100"),
        cudart=12,
    )
    bad = checks(release_of(*broken))["variant release: picked variants run"]
    assert bad.status is Status.FAIL
    assert bad.evidence[0].message.startswith(
        "GPU 12.0, driver for CUDA 12.8: gets 'cu128', which does not run"
    )


def test_no_null_variant_and_a_null_variant_with_cuda_code() -> None:
    no_null = four_plus_null()[:-1]
    result = checks(release_of(*no_null))["variant release: null variant"]
    assert (result.status, result.rule) == (Status.FAIL, "null")
    with_cuda = [*no_null, wheel("null", None, *OLD, cudart=12)]
    result = checks(release_of(*with_cuda))["variant release: null variant"]
    assert result.status is Status.FAIL and "carries CUDA code" in result.reason


def test_one_machine_which_variant_here() -> None:
    report = release_of(*four_plus_null(), capabilities=[parse_arch("9.0")], drivers=[(12, 8)])
    assert [(p.capability, p.cuda, p.label, p.runs) for p in report.picks] == [("9.0", "12.8", "cu128", True)]


def test_order_ranks_by_namespace_feature_value_then_label() -> None:
    wheels = four_plus_null()
    descriptions = [w.scan.dist.variant.description for w in wheels if w.scan.dist.variant]
    first = wheels[0].scan.dist.variant
    assert first is not None
    priorities = first.metadata.priorities
    supported = {("nvidia", f): v for f, v in supported_values((12, 9), parse_arch("9.0")).items()}
    assert [d.label for d in order(descriptions, priorities, supported)] == ["cu128", "cu126", "null"]


def test_the_index_file_lists_the_release_and_must_agree_with_the_wheels() -> None:
    wheels = four_plus_null()
    index_doc = {
        "default-priorities": {"namespace": ["nvidia"]},
        "providers": {"nvidia": {"requires": ["nvidia-variant-provider>=0.0.1,<1.0.0"]}},
        "variants": {
            w.scan.dist.variant.label: {
                ns: {
                    f: list(w.scan.dist.variant.description.values(ns, f))
                    for f in ("cuda_version_lower_bound", "cuda_version_upper_bound", "sm_arch")
                    if w.scan.dist.variant.description.values(ns, f)
                }
                for ns in w.scan.dist.variant.description.namespaces()
            }
            for w in wheels
            if w.scan.dist.variant is not None
        },
    }
    index = parse_variant_json(json.dumps(index_doc), "torch-2.9.0-variants.json")
    # the index alone names every variant; a machine whose pick has no wheel given is not judged
    report = release(wheels[3:], index, capabilities=[parse_arch("9.0")], drivers=[(12, 9), (13, 0)])
    assert checks(report)["variant release: metadata agree"].status is Status.PASS
    assert [(p.cuda, p.label, p.runs) for p in report.picks] == [
        ("12.9", "cu128", None),
        ("13.0", "cu130", True),
    ]
    # a wheel whose variant.json says otherwise than the index
    index_doc["variants"]["cu130"]["nvidia"]["sm_arch"] = ["90_real"]  # type: ignore[index]
    other = parse_variant_json(json.dumps(index_doc), "torch-2.9.0-variants.json")
    bad = checks(release(wheels, other))["variant release: metadata agree"]
    assert bad.status is Status.FAIL and "describe 'cu130' differently" in bad.reason
