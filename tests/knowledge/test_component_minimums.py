"""NVIDIA component minimums: versions map to the CUDA minor of their release, and a component older than what
a sibling of a newer release needs is a violation naming both, with the rule's source."""

from __future__ import annotations

from cudaship.knowledge.component_minimums import cuda_minor, first_version, rules, violations


def test_wheel_versions_map_to_their_cuda_minor() -> None:
    # the versions torch 2.8.0 pins (CUDA 12.8) and the nvJitLink of CUDA 12.4
    assert cuda_minor("nvidia-cusparse-cu12", "12.5.8.93") == "12.8"
    assert cuda_minor("nvidia-cufft-cu12", "11.3.3.83") == "12.8"
    assert cuda_minor("nvidia-nvjitlink-cu12", "12.8.93") == "12.8"
    assert cuda_minor("nvidia-nvjitlink-cu12", "12.4.127") == "12.4"
    # between 12.8.0's 12.5.7.53 and 12.9.0's 12.5.9.5: still 12.8; the first one of 12.9 is 12.9
    assert cuda_minor("nvidia-cusparse-cu12", "12.5.7.53") == "12.8"
    assert cuda_minor("nvidia-cusparse-cu12", "12.5.9.5") == "12.9"
    assert cuda_minor("nvidia-cusparse", "12.7.10.12") == "13.2"
    assert cuda_minor("nvidia-cusparse-cu12", "11.7.5.86") is None  # older than CUDA 12.0
    assert cuda_minor("torch", "2.8.0") is None
    assert cuda_minor("nvidia-cusparse-cu12", "not a version") is None


def test_downgraded_nvjitlink_is_a_violation_with_the_minimum() -> None:
    found = violations(
        {"nvidia-cusparse-cu12": "12.5.8.93", "nvidia-nvjitlink-cu12": "12.4.127", "torch": "2.8.0"}
    )
    assert len(found) == 1
    v = found[0]
    assert (v.rule.component, v.rule.needs) == ("nvidia-cusparse-cu12", "nvidia-nvjitlink-cu12")
    assert (v.component_cuda, v.needs_cuda, v.minimum) == (
        "12.8",
        "12.4",
        first_version("nvidia-nvjitlink-cu12", "12.8"),
    )
    assert v.minimum == "12.8.61"
    assert v.rule.source


def test_a_newer_dependency_and_a_matching_set_pass() -> None:
    torch_28 = {
        "nvidia-cublas-cu12": "12.8.4.1",
        "nvidia-cufft-cu12": "11.3.3.83",
        "nvidia-cusolver-cu12": "11.7.3.90",
        "nvidia-cusparse-cu12": "12.5.8.93",
        "nvidia-nvjitlink-cu12": "12.8.93",
    }
    assert violations(torch_28) == []
    assert violations({**torch_28, "nvidia-nvjitlink-cu12": "12.9.86"}) == []


def test_every_rule_has_a_source_and_known_projects() -> None:
    assert rules()
    for rule in rules():
        assert rule.source.strip()
        assert cuda_minor(rule.component, "99") is not None
        assert cuda_minor(rule.needs, "99") is not None
