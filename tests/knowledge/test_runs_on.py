"""The runs-on rule, table-driven against the reference facts (cuda-binaries.md §3-4), then on nvcc output."""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path

import pytest
from hypothesis import given
from hypothesis import strategies as st

from cudaship.inspection.walk import inspect_file
from cudaship.knowledge.archs import Arch, split_arch_name
from cudaship.knowledge.gpus import shown_capabilities
from cudaship.knowledge.runs_on import VerdictKind, build_cuda_of, runs_on
from cudaship.knowledge.trains import Train
from cudaship.records.binary import Compression, DeviceCode, DeviceCodeKind

NATIVE, JIT, NO = VerdictKind.NATIVE, VerdictKind.JIT, VerdictKind.NO


def entry(
    name: str,
    *,
    isa: str | None = None,
    zstd: bool = False,
    relocatable: bool = False,
    lto: bool = False,
    toolkit: str | None = None,
) -> DeviceCode:
    """A DeviceCode as the readers make it: ``sm_90a`` → SASS, ``compute_120`` → PTX (ISA ``isa``)."""
    prefix, arch = split_arch_name(name)
    kind = DeviceCodeKind.LTOIR if lto else DeviceCodeKind.PTX if prefix == "compute" else DeviceCodeKind.SASS
    return DeviceCode(
        kind=kind,
        arch=name,
        sm=arch.sm,
        variant=arch.variant,
        section=".nv_fatbin",
        relocatable=relocatable,
        compression=Compression.ZSTD if zstd else Compression.NONE,
        stored_size=64,
        uncompressed_size=None,
        offset=0,
        version=isa if prefix == "compute" else "1.8",
        toolkit_version=toolkit,
    )


def e(*names: str, **kw: object) -> tuple[DeviceCode, ...]:
    return tuple(entry(n, **kw) for n in names)  # type: ignore[arg-type]


# (entries, capability, driver, verdict, chosen entry, words the reason must contain)
CASES = [
    # plain SASS: same major, minor at least
    ("sm80-on-8.0", e("sm_80"), "8.0", None, NATIVE, "sm_80", ""),
    ("sm80-on-8.6", e("sm_80"), "8.6", None, NATIVE, "sm_80", "runs on 8.6"),
    ("sm80-on-8.7", e("sm_80"), "8.7", None, NATIVE, "sm_80", ""),
    ("sm80-on-8.9", e("sm_80"), "8.9", None, NATIVE, "sm_80", ""),
    ("sm86-not-on-8.0", e("sm_86"), "8.0", None, NO, None, "sm_86 needs 8.6 or newer"),
    ("sm90-not-on-10.0", e("sm_90"), "10.0", None, NO, None, "no SASS for 10.x (has sm_90)"),
    ("sm100-not-on-12.0", e("sm_100"), "12.0", None, NO, None, "no SASS for 12.x"),
    ("sm90-not-on-8.9", e("sm_90"), "8.9", None, NO, None, "no SASS for 8.x"),
    ("best-sass-wins", e("sm_80", "sm_86", "sm_89"), "8.9", None, NATIVE, "sm_89", ""),
    ("newest-fitting-sass", e("sm_80", "sm_86", "sm_90"), "8.7", None, NATIVE, "sm_86", ""),
    # 'a': exactly one capability
    ("sm90a-on-9.0", e("sm_90a"), "9.0", None, NATIVE, "sm_90a", ""),
    ("sm90a-not-on-10.0", e("sm_90a"), "10.0", None, NO, None, "sm_90a runs only on 9.0"),
    ("sm100a-not-on-10.3", e("sm_100a"), "10.3", None, NO, None, "sm_100a runs only on 10.0"),
    ("a-preferred-on-exact", e("sm_90", "sm_90a"), "9.0", None, NATIVE, "sm_90a", ""),
    # 'f': within its family
    ("sm100f-on-10.0", e("sm_100f"), "10.0", None, NATIVE, "sm_100f", ""),
    ("sm100f-on-10.3", e("sm_100f"), "10.3", None, NATIVE, "sm_100f", ""),
    ("sm100f-not-on-12.0", e("sm_100f"), "12.0", None, NO, None, "sm_100f runs only in the 10.x family"),
    ("sm100f-not-on-11.0", e("sm_100f"), "11.0", None, NO, None, "10.x family"),
    ("sm120f-on-12.1", e("sm_120f"), "12.1", None, NATIVE, "sm_120f", ""),
    ("sm103f-not-on-10.0", e("sm_103f"), "10.0", None, NO, None, "sm_103f needs 10.3 or newer"),
    # PTX: JIT on any capability at least its own, any major
    ("ptx80-on-12.0", e("compute_80", isa="9.0"), "12.0", None, JIT, "compute_80", "first launch compiles"),
    ("ptx90-on-9.0", e("compute_90", isa="9.0"), "9.0", None, JIT, "compute_90", ""),
    ("ptx90-not-on-8.9", e("compute_90", isa="9.0"), "8.9", None, NO, None, "compute_90 needs 9.0 or newer"),
    ("newest-ptx", e("compute_80", "compute_90", isa="9.0"), "12.0", None, JIT, "compute_90", ""),
    ("sass-before-ptx", e("sm_90", "compute_90", isa="9.0"), "9.0", None, NATIVE, "sm_90", ""),
    (
        "ptx90a-not-on-10.0",
        e("compute_90a", isa="9.0"),
        "10.0",
        None,
        NO,
        None,
        "compute_90a runs only on 9.0",
    ),
    ("ptx120f-on-12.1", e("compute_120f", isa="9.0"), "12.1", None, JIT, "compute_120f", ""),
    ("ptx100f-not-on-12.0", e("compute_100f", isa="9.0"), "12.0", None, NO, None, "10.x family"),
    # the driver's PTX JIT knows only ISAs up to its CUDA version
    (
        "ptx-13.4-on-driver-13.2",
        e("compute_90", isa="9.4"),
        "12.0",
        "13.2",
        NO,
        None,
        "newer than the driver knows",
    ),
    ("ptx-13.4-on-595", e("compute_90", isa="9.4"), "9.0", "595.45.04", NO, None, "PTX ISA 9.4 (CUDA 13.4)"),
    ("ptx-13.2-on-driver-13.2", e("compute_90", isa="9.2"), "12.0", "13.2", JIT, "compute_90", ""),
    ("sass-13.4-on-driver-13.2", e("sm_90", "compute_90", isa="9.4"), "9.0", "13.2", NATIVE, "sm_90", ""),
    ("ptx-isa-unknown-to-data", e("compute_90", isa="99.0"), "9.0", "13.2", NO, None, "newer than every"),
    # CUDA major newer than the driver
    ("cuda13-on-driver-12.8", e("sm_90", toolkit="13.0"), "9.0", "570.26", NO, None, "newer CUDA major"),
    (
        "cuda13-ptx-on-driver-12.9",
        e("compute_90", isa="9.0"),
        "9.0",
        "12.9",
        NO,
        None,
        "built with CUDA 13.0",
    ),
    ("cuda12-on-driver-13", e("sm_90", toolkit="12.8"), "9.0", "580.65.06", NATIVE, "sm_90", ""),
    # ZSTD-compressed entries on a driver too old for them
    ("zstd-on-535", e("sm_90", zstd=True, toolkit="12.4"), "9.0", "535.104.05", NO, None, "ZSTD-compressed"),
    ("zstd-on-560", e("sm_90", zstd=True, toolkit="12.4"), "9.0", "560.28.03", NATIVE, "sm_90", ""),
    (
        "zstd-sass-raw-ptx",
        (*e("sm_90", zstd=True), *e("compute_80", isa="7.8")),
        "9.0",
        "535.104.05",
        JIT,
        "compute_80",
        "",
    ),
    # entries that never count
    (
        "relocatable-only",
        e("sm_90", "compute_90", isa="9.0", relocatable=True),
        "9.0",
        None,
        NO,
        None,
        "relocatable",
    ),
    ("lto-only", e("sm_90", lto=True), "9.0", None, NO, None, "LTO-IR"),
    ("no-device-code", (), "9.0", None, NO, None, "no device code"),
    (
        "relocatable-ignored",
        (*e("sm_80", relocatable=True), *e("sm_90")),
        "8.0",
        None,
        NO,
        None,
        "no SASS for 8.x",
    ),
    ("no-ptx-said", e("sm_80"), "7.5", None, NO, None, "no PTX to JIT"),
]


@pytest.mark.parametrize(
    ("entries", "capability", "driver", "verdict", "chosen", "words"),
    [c[1:] for c in CASES],
    ids=[c[0] for c in CASES],
)
def test_rule(
    entries: tuple[DeviceCode, ...],
    capability: str,
    driver: str | None,
    verdict: VerdictKind,
    chosen: str | None,
    words: str,
) -> None:
    result = runs_on(entries, capability, driver)
    assert result.verdict is verdict, result.reason
    assert (result.entry.arch if result.entry else None) == chosen
    assert words in result.reason
    assert result.runs is (verdict is not NO)


def test_min_driver_native_cuda13() -> None:
    result = runs_on(e("sm_90", toolkit="13.0"), "9.0")
    assert result.min_driver == "580.65.06"
    assert result.min_driver_reason is not None and "CUDA 13" in result.min_driver_reason


def test_min_driver_jit_is_the_ptx_release() -> None:
    result = runs_on(e("compute_90", isa="9.2"), "12.0")
    assert (result.verdict, result.min_driver) == (JIT, "595.45.04")
    assert result.min_driver_reason is not None and "CUDA 13.2" in result.min_driver_reason
    unknown = runs_on(e("compute_90", isa="9.4"), "12.0")
    assert unknown.min_driver == "a driver for CUDA 13.4 or newer"


def test_min_driver_zstd_on_cuda12() -> None:
    result = runs_on(e("sm_90", zstd=True, toolkit="12.0"), "9.0")
    assert (result.min_driver, result.min_driver_reason) == ("550.54.14", "sm_90 is ZSTD-compressed")


def test_build_cuda_from_caller_wins() -> None:
    assert runs_on(e("sm_90"), "9.0", "12.8", build_cuda="cu130").verdict is NO
    assert runs_on(e("sm_90"), "9.0", "12.8").verdict is NATIVE
    assert build_cuda_of(e("compute_90", isa="9.2")) == Train(13, 2)
    assert build_cuda_of(e("sm_90", toolkit="12.8") + e("compute_90", isa="9.0")) == Train(13, 0)
    assert build_cuda_of(e("sm_90")) is None


def test_capability_forms() -> None:
    assert runs_on(e("sm_90a"), Arch(9, 0)).verdict is NATIVE
    assert runs_on(e("sm_90a"), "sm_90a").verdict is NATIVE  # the device's variant is ignored


# ------------------------------------------------------------------------------------- real nvcc output

REAL = [
    ("multi_arch", "8.6", NATIVE, "sm_86"),
    ("multi_arch", "8.7", NATIVE, "sm_86"),
    ("multi_arch", "12.0", JIT, "compute_90"),
    ("multi_arch", "7.0", NO, None),
    ("arch_specific", "9.0", NATIVE, "sm_90a"),
    ("arch_specific", "10.3", NO, None),
    ("arch_specific", "12.0", NATIVE, "sm_120a"),
    ("family_specific", "10.3", NATIVE, "sm_100f"),
    ("family_specific", "12.1", NATIVE, "sm_120f"),
    ("family_specific", "9.0", NO, None),
    ("blackwell", "12.1", NATIVE, "sm_120"),
    ("blackwell", "11.0", NO, None),
    ("ptx_only", "8.6", JIT, "compute_80"),
    ("ptx_only", "12.1", JIT, "compute_120"),
    # -rdc: the device-linked .nv_fatbin holds SASS only; compute_90 lives only in __nv_relfatbin
    ("relocatable", "8.0", NATIVE, "sm_80"),
    ("relocatable", "10.0", NO, None),
    ("cubin_sm86", "8.9", NATIVE, "sm_86"),
    ("cubin_sm86", "8.0", NO, None),
    ("cubin_sm90a", "9.0", NATIVE, "sm_90a"),
    ("cubin_sm100f", "10.3", NATIVE, "sm_100f"),
    ("cubin_sm100f", "12.0", NO, None),
    ("fatbin_mixed", "12.0", JIT, "compute_120"),
    ("fatbin_mixed", "10.3", NATIVE, "sm_100f"),
    ("fatbin_lto", "9.0", NO, None),
    ("ptx_sm90", "10.0", JIT, "compute_90"),
]


@pytest.mark.parametrize(
    ("build", "capability", "verdict", "chosen"),
    REAL,
    ids=[f"{b}-on-{c}" for b, c, _, _ in REAL],
)
def test_real_builds(
    nvcc_build: Callable[[str], Path], build: str, capability: str, verdict: VerdictKind, chosen: str | None
) -> None:
    path = nvcc_build(build)
    report = inspect_file(path, path.name)
    assert report.error is None
    result = runs_on(report.device_code, capability)
    assert result.verdict is verdict, result.reason
    assert (result.entry.arch if result.entry else None) == chosen


def test_relocatable_ptx_is_not_jitted(nvcc_build: Callable[[str], Path]) -> None:
    path = nvcc_build("relocatable")
    entries = inspect_file(path, path.name).device_code
    assert any(e.relocatable and e.arch == "compute_90" for e in entries)
    assert "no PTX to JIT" in runs_on(entries, "10.0").reason


def test_real_build_on_old_driver(nvcc_build: Callable[[str], Path], nvcc_version: str) -> None:
    """nvcc 13.0 output on a driver that only knows CUDA 12.9: a newer CUDA major, whatever the GPU."""
    path = nvcc_build("multi_arch")
    report = inspect_file(path, path.name)
    result = runs_on(report.device_code, "9.0", "575.51.03")
    assert result.verdict is NO
    assert f"CUDA {nvcc_version}" in result.reason


# ------------------------------------------------------------------------------------------ properties

_RANK = {NATIVE: 0, JIT: 1, NO: 2}
_CAPS = list(shown_capabilities())
_NAMES = [
    *(f"sm_{a.sm}" for a in _CAPS),
    *(f"sm_{a.sm}a" for a in _CAPS if a.sm >= 90),
    *(f"sm_{a.sm}f" for a in _CAPS if a.sm >= 100),
    *(f"compute_{a.sm}" for a in _CAPS),
    *(f"compute_{a.sm}a" for a in _CAPS if a.sm >= 90),
]


@given(
    st.lists(st.sampled_from(_NAMES), min_size=1, max_size=6), st.sampled_from(_NAMES), st.sampled_from(_CAPS)
)
def test_more_code_never_runs_worse(names: list[str], extra: str, cap: Arch) -> None:
    """Adding an entry to a library never turns native into jit or no, nor jit into no."""
    before = runs_on(e(*names, isa="9.0"), cap)
    after = runs_on(e(*names, extra, isa="9.0"), cap)
    assert _RANK[after.verdict] <= _RANK[before.verdict]


@given(st.sampled_from(_CAPS), st.sampled_from(_CAPS))
def test_plain_sass_rule(built: Arch, device: Arch) -> None:
    verdict = runs_on(e(built.sass_name), device).verdict
    assert (verdict is NATIVE) == (built.major == device.major and device.minor >= built.minor)


@given(st.sampled_from(_CAPS), st.sampled_from(_CAPS))
def test_plain_ptx_rule(built: Arch, device: Arch) -> None:
    verdict = runs_on(e(built.ptx_name, isa="9.0"), device).verdict
    assert (verdict is JIT) == (device >= built)
