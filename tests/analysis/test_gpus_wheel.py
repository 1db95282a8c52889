"""A wheel's GPU verdicts on hand-built per-library verdicts: variants count by their best, and a library no
other file imports that fails alone does not sink a GPU the others serve (issue 12: torch on a T4,
bitsandbytes on an RTX 5090)."""

from __future__ import annotations

from collections.abc import Mapping
from pathlib import Path

import pytest

from cudaship.analysis.gpus import CapabilityVerdict, FileVerdicts, combine_wheel
from cudaship.knowledge.archs import Arch
from cudaship.knowledge.runs_on import Verdict, VerdictKind
from cudaship.knowledge.trains import Train

CAPS = (Arch(7, 5), Arch(9, 0), Arch(12, 0))
N, J, X = VerdictKind.NATIVE, VerdictKind.JIT, VerdictKind.NO
DRIVER = {11: "450.80.02", 12: "525.60.13", 13: "580.65.06"}


def lib(
    path: str, kinds: tuple[VerdictKind, ...], *, imports: tuple[str, ...] = (), major: int = 13
) -> FileVerdicts:
    verdicts = tuple(
        CapabilityVerdict(
            cap, Verdict(kind, None, f"{path} {kind.value}", DRIVER[major] if kind is not X else None)
        )
        for cap, kind in zip(CAPS, kinds, strict=True)
    )
    return FileVerdicts(path, "w.whl", "linux", Train(major, 0), verdicts, imports=imports)


def kinds(files: list[FileVerdicts]) -> Mapping[str, VerdictKind]:
    group = combine_wheel("w.whl", files, CAPS)
    return {cv.capability.capability: cv.verdict.verdict for cv in group.verdicts}


def test_libraries_loaded_together_take_the_worst() -> None:
    files = [lib("t/libcore.so", (N, N, N)), lib("t/libuser.so", (X, N, N), imports=("libcore.so",))]
    # libcore.so is imported by libuser.so; libuser.so is imported by nothing but the core fails nowhere:
    assert kinds(files) == {"7.5": N, "9.0": N, "12.0": N}  # libuser.so alone fails 7.5: on demand
    files = [lib("t/libcore.so", (X, N, N)), lib("t/libuser.so", (N, N, N), imports=("libcore.so",))]
    assert kinds(files)["7.5"] is X  # an imported library that fails sinks the wheel


def test_on_demand_library_names_itself_in_the_reason() -> None:
    files = [
        lib("torch/lib/libtorch_cuda.so", (N, N, N)),
        lib("torch/lib/libtorch_cuda_linalg.so", (X, N, N)),
    ]
    group = combine_wheel("w.whl", files, CAPS)
    t4 = group.verdicts[0]
    assert t4.verdict.verdict is N
    assert "except libtorch_cuda_linalg.so (loaded on demand" in t4.verdict.reason
    assert t4.file == "w.whl!torch/lib/libtorch_cuda_linalg.so"


def test_every_library_failing_is_no() -> None:
    files = [lib("t/liba.so", (X, N, N)), lib("t/libb.so", (X, N, N))]
    assert kinds(files)["7.5"] is X


def test_variants_take_the_best_and_say_who_serves() -> None:
    files = [
        lib("b/libk_cuda118.so", (N, N, X), major=11),
        lib("b/libk_cuda128.so", (N, N, N), major=12),
        lib("b/libk_cuda130.so", (N, J, N), major=13),
        lib("b/libk_cpu.so", (X, X, X)),
    ]
    group = combine_wheel("w.whl", files, CAPS)
    rtx = group.verdicts[2]
    assert rtx.verdict.verdict is N
    assert rtx.verdict.reason == "native with the cuda128, cuda130 variants"
    assert rtx.verdict.min_driver == DRIVER[12]  # the served variant needing the oldest driver
    (variants,) = group.variant_groups
    served = {v.name: v.serves for v in variants.variants}
    assert served == {
        "cpu": (),
        "cuda118": ("7.5", "9.0"),
        "cuda128": ("7.5", "9.0", "12.0"),
        "cuda130": ("7.5", "9.0", "12.0"),
    }
    assert [v.name for v in variants.variants][:1] == ["cpu"]  # sorted by train, the CPU variant has none


def test_no_variant_serving_is_no() -> None:
    files = [lib("b/libk_cuda118.so", (N, N, X), major=11), lib("b/libk_cuda121.so", (N, N, X), major=12)]
    group = combine_wheel("w.whl", files, CAPS)
    assert group.verdicts[2].verdict.verdict is X
    assert group.verdicts[2].verdict.reason.startswith("no variant of b/libk_*.so runs")


# --- issue 32 class 12: one default set of GPUs per input platform ------------------------------------------


def test_default_rows_are_the_gpus_of_the_input_machine() -> None:
    from cudaship.knowledge.gpus import default_capabilities, machine_gpus, shown_capabilities

    x86 = [a.capability for a in default_capabilities(["x86_64"])]
    arm = [a.capability for a in default_capabilities(["aarch64"])]
    assert not {"8.7", "11.0", "12.1"} & set(x86)  # Jetson Orin (Tegra), Thor and GB10 are no x86 GPU
    assert {"11.0", "12.1"} <= set(arm) and not {"8.6", "8.9", "12.0"} & set(arm)
    assert "8.7" not in arm  # Orin runs JetPack's CUDA, not the SBSA stack aarch64 wheels target
    # the same rule audit's coverage reads
    assert set(x86) == {g.arch.capability for g in machine_gpus("x86_64") if g.shown}
    # no machine known (a bare cubin): every row
    assert default_capabilities([None]) == shown_capabilities()
    assert default_capabilities([]) == shown_capabilities()


@pytest.mark.network
def test_gpus_judges_a_wheel_only_against_its_machines_gpus(
    bitsandbytes_linux_wheel: Path, bitsandbytes_windows_wheel: Path
) -> None:
    """x86_64 and Windows wheels: no Arm-only row, and the minimum driver is that of the x86_64 GPUs."""
    from cudaship.analysis.gpus import gpu_report
    from cudaship.inspection.walk import inspect_paths

    for wheel in (bitsandbytes_linux_wheel, bitsandbytes_windows_wheel):
        report = gpu_report(inspect_paths([str(wheel)]))
        caps = {c.capability for c in report.capabilities}
        assert caps and not {"8.7", "11.0", "12.1"} & caps, wheel.name
        assert report.wheels[0].variant_groups
        for group in report.wheels[0].variant_groups:
            for service in group.variants:
                assert not {"8.7", "11.0", "12.1"} & set(service.serves)


@pytest.mark.network
@pytest.mark.parametrize(
    ("fixture", "driver"),
    [("bitsandbytes_linux_wheel", "525.60.13"), ("bitsandbytes_windows_wheel", "527.41")],
)
def test_gpus_cli_gives_the_x86_64_minimum_driver_on_the_real_wheel(
    fixture: str, driver: str, request: pytest.FixtureRequest, capsys: pytest.CaptureFixture[str]
) -> None:
    """Issue 32, class 12, on the wheel it names, through the command a user runs: `gpus` of bitsandbytes
    shows no Arm-only row (Jetson Orin 8.7, Thor 11.0, GB10 12.1) and the minimum driver of the x86_64 GPUs
    (the 12.x floor, 525.60.13 on Linux), not the 575.51.03 that judging it against GB10 gave; each of the
    audit's coverage checks names only capabilities of those rows or older ones (the same GPUs)."""
    import json

    from cudaship.cli.main import main

    wheel: Path = request.getfixturevalue(fixture)
    assert main(["gpus", "-f", "json", str(wheel)]) == 0
    doc = json.loads(capsys.readouterr().out)
    caps = [c["capability"] for c in doc["capabilities"]]
    assert caps[-1] == "12.0" and not {"8.7", "11.0", "12.1"} & set(caps), caps
    (w,) = doc["wheels"]
    assert w["min_driver"] == driver and "575.51.03" not in json.dumps(doc), w["min_driver_reason"]
    main(["audit", "-f", "json", str(wheel)])
    audit = json.loads(capsys.readouterr().out)
    coverage = [c for c in audit["checks"] if c["name"].startswith("archs: GPU coverage of ")]
    assert coverage
    for check in coverage:
        named = check["reason"].split("on x86_64:", 1)[1].split()  # the capabilities it names
        assert not {"8.7", "11.0", "12.1"} & set(named), check["reason"]
