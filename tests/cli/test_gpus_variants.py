"""``cudaship gpus`` and ``cudaship doctor`` on variant wheels of one release (made from the synthetic Linux
wheel: real nvcc output, SASS sm_80 86 89 90 100 120 and PTX compute_120, linked to the CUDA 13 runtime):
which variant each GPU row (or this machine, as the NVIDIA provider sees it) gets, whether it runs there, and
where no variant fits."""

from __future__ import annotations

import json
from collections.abc import Callable
from pathlib import Path
from typing import Any

import jsonschema  # type: ignore[import-untyped]
import pytest

from cudaship.cli.main import main
from cudaship.knowledge.archs import parse_arch
from cudaship.knowledge.driver import parse_driver
from cudaship.probe.records import GpuInfo, ProbeResult
from tests.cli.test_gpus_cli import schema
from tests.fixtures.variant_wheels import make_variant, variant_document

pytestmark = pytest.mark.slow

HONEST = {
    "cuda_version_lower_bound": ["13.0"],
    "cuda_version_upper_bound": ["14"],
    "sm_arch": ["80_real", "86_real", "89_real", "90_real", "100_real", "120_real", "120_virtual"],
}
#: a lower bound below what the CUDA 13 runtime it links needs from the driver
LYING = {**HONEST, "cuda_version_lower_bound": ["12.0"]}


@pytest.fixture
def release(synthetic_wheel: Callable[[str], Path], tmp_path: Path) -> tuple[Path, Path]:
    linux = synthetic_wheel("linux")
    return (
        make_variant(linux, tmp_path, "cu13", {"nvidia": HONEST}),
        make_variant(linux, tmp_path, "null", None),
    )


def gpus_json(capsys: pytest.CaptureFixture[str], *argv: str) -> tuple[int, dict[str, Any]]:
    code = main(["gpus", "--format", "json", *argv])
    doc: dict[str, Any] = json.loads(capsys.readouterr().out)
    jsonschema.validate(doc, schema())
    return code, doc


def picks(doc: dict[str, Any]) -> list[tuple[Any, ...]]:
    (release,) = doc["variant_releases"]
    return [(p["gpu"], p["cuda"], p["cuda_to"], p["variant"], p["runs"]) for p in release["picks"]]


def test_each_gpu_row_gets_a_variant_under_the_driver_given(
    release: tuple[Path, Path], capsys: pytest.CaptureFixture[str]
) -> None:
    cu13, null = release
    code, doc = gpus_json(capsys, str(cu13), str(null), "--gpu", "H100", "--gpu", "7.5", "--driver", "13.0")
    assert code == 0
    assert doc["variant_releases"][0]["labels"] == ["cu13", "null"]
    # 7.5: the provider offers no sm_arch value the variant declares: the null variant, nothing fits
    assert picks(doc) == [("7.5", "13.0", None, "null", None), ("9.0", "13.0", None, "cu13", True)]
    assert [p["fits"] for p in doc["variant_releases"][0]["picks"]] == [False, True]
    code, doc = gpus_json(capsys, str(cu13), str(null), "--gpu", "9.0", "--driver", "12.8")
    assert picks(doc) == [("9.0", "12.8", None, "null", None)]


def test_without_a_driver_each_row_gets_ranges_of_drivers(
    release: tuple[Path, Path], capsys: pytest.CaptureFixture[str]
) -> None:
    cu13, null = release
    code, doc = gpus_json(capsys, str(cu13), str(null), "--gpu", "9.0")
    assert code == 0
    got = picks(doc)
    assert got[0][:2] == ("9.0", "11.0") and got[0][3] == "null"
    assert got[1][:2] == ("9.0", "13.0") and got[1][3:] == ("cu13", True)
    assert len(got) == 2
    assert main(["gpus", str(cu13), str(null), "--gpu", "9.0"]) == 0
    out = capsys.readouterr().out
    assert "variants of " in out and ": cu13, null" in out
    assert "  9.0   CUDA 13.0-" in out
    assert "no variant fits 1 of the 2 lines above (the null variant or nothing installed)" in out
    assert main(["gpus", str(cu13), str(null), "--gpu", "9.0", "-f", "markdown"]) == 0
    out = capsys.readouterr().out
    assert "### Variants of executorch 1.6.0+cu130: cu13, null" in out
    assert "| 9.0 | CUDA 13.0-" in out and "| `cu13` | yes | sm_90 (built for it) |" in out


def test_a_variant_that_runs_is_judged_once_per_gpu_row(
    release: tuple[Path, Path], capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    """Drivers are judged in ascending order and a newer driver runs what an older one runs: cu13, picked
    under five drivers (CUDA 13.0 to 13.4) of one row, is judged once, not five times."""
    import cudaship.analysis.variant_here as here

    calls: list[str] = []
    judge = here._judge

    def counting(*args: Any) -> tuple[bool, str]:
        calls.append(args[2].capability)
        return judge(*args)

    monkeypatch.setattr(here, "_judge", counting)
    cu13, null = release
    _code, doc = gpus_json(capsys, str(cu13), str(null), "--gpu", "9.0")
    assert picks(doc)[1][3:] == ("cu13", True)
    assert calls == ["9.0"]


def test_a_lying_lower_bound_is_picked_where_it_cannot_run(
    synthetic_wheel: Callable[[str], Path], tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    linux = synthetic_wheel("linux")
    lying = make_variant(linux, tmp_path, "cu13", {"nvidia": LYING})
    code, doc = gpus_json(capsys, str(lying), "--gpu", "9.0", "--driver", "12.8")
    ((gpu, cuda, _to, label, runs),) = picks(doc)
    assert (gpu, cuda, label, runs) == ("9.0", "12.8", "cu13", False)
    assert "CUDA 13" in doc["variant_releases"][0]["picks"][0]["reason"]
    # no null variant: below 12.0 nothing is installed at all
    code, doc = gpus_json(capsys, str(lying), "--gpu", "9.0", "--driver", "11.8")
    assert code == 0  # a report, not a gate (--require gates)
    assert picks(doc) == [("9.0", "11.8", None, None, None)]
    assert doc["variant_releases"][0]["picks"][0]["reason"] == "no variant fits and no null variant"


def test_the_index_variants_json_is_read_among_the_inputs(
    release: tuple[Path, Path], tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    cu13, _null = release
    index = tmp_path / "executorch-1.6.0-variants.json"
    doc = variant_document("cu13", {"nvidia": HONEST})
    doc["variants"]["null"] = {}
    index.write_text(json.dumps(doc))
    # the null variant's wheel is not given: the index lists it, so machines no variant fits get it
    code, out = gpus_json(capsys, str(cu13), str(index), "--gpu", "9.0", "--driver", "12.8")
    assert code == 0
    assert out["variant_releases"][0]["index"] == str(index)
    assert picks(out) == [("9.0", "12.8", None, "null", None)]


def test_a_malformed_variant_is_one_line_exit_2(
    synthetic_wheel: Callable[[str], Path], tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    bad = make_variant(synthetic_wheel("linux"), tmp_path, "cu13", variant_json=b"{not json")
    assert main(["gpus", str(bad), "--gpu", "9.0"]) == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and str(bad) in err[0] and "variant.json" in err[0], err
    # inspect reads on: it does not pick a variant
    assert main(["inspect", str(bad)]) == 0


# --- doctor: the variant this machine gets ------------------------------------------------------------------


def _machine(cap: str, driver: str) -> ProbeResult:
    return ProbeResult(
        driver=parse_driver(driver),
        gpus=(GpuInfo(0, "GPU", parse_arch(cap), 24 * 2**30, True),),
        sources=("cuda-driver-api (libcuda.so.1)",),
    )


@pytest.fixture
def no_override(monkeypatch: pytest.MonkeyPatch) -> pytest.MonkeyPatch:
    for name in ("NV_VARIANT_PROVIDER_FORCE_SM_ARCH", "NV_VARIANT_PROVIDER_FORCE_CUDA_DRIVER_VERSION"):
        monkeypatch.delenv(name, raising=False)
    monkeypatch.delenv("CUDASHIP_LIBCUDA", raising=False)
    return monkeypatch


def test_doctor_says_which_variant_this_machine_gets_and_that_it_runs(
    release: tuple[Path, Path], no_override: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    cu13, null = release
    no_override.setattr("cudaship.cli.doctor_cmd.probe", lambda: _machine("9.0", "595.45.04"))
    assert main(["doctor", str(cu13), str(null)]) == 0
    out = capsys.readouterr().out
    assert "this machine as the NVIDIA provider sees it: GPU 9.0, driver for CUDA 13.2" in out
    assert "  9.0   CUDA 13.2        cu13         yes " in out
    # a driver for CUDA 12.8: no variant fits, the null one is installed
    no_override.setattr("cudaship.cli.doctor_cmd.probe", lambda: _machine("9.0", "570.124.06"))
    # (exit 1: doctor still judges every library given, and the CUDA 13 ones do not run on this driver)
    assert main(["doctor", "-f", "json", str(cu13), str(null)]) == 1
    (rel,) = json.loads(capsys.readouterr().out)["variant_releases"]
    ((p),) = rel["picks"]
    assert (p["gpu"], p["cuda"], p["variant"], p["fits"], p["runs"]) == ("9.0", "12.8", "null", False, None)


def test_doctor_catches_a_lying_variant_picked_here(
    synthetic_wheel: Callable[[str], Path],
    tmp_path: Path,
    no_override: pytest.MonkeyPatch,
    capsys: pytest.CaptureFixture[str],
) -> None:
    lying = make_variant(synthetic_wheel("linux"), tmp_path, "cu13", {"nvidia": LYING})
    no_override.setattr("cudaship.cli.doctor_cmd.probe", lambda: _machine("9.0", "570.124.06"))
    assert main(["doctor", str(lying)]) == 1
    out = capsys.readouterr().out
    assert "  9.0   CUDA 12.8        cu13         NO   " in out


def test_doctor_without_a_gpu_says_so_and_the_override_variables_stand_for_one(
    release: tuple[Path, Path],
    tmp_path: Path,
    no_override: pytest.MonkeyPatch,
    capsys: pytest.CaptureFixture[str],
) -> None:
    cu13, null = release
    no_override.setenv("CUDASHIP_LIBCUDA", str(tmp_path / "libcuda.so.1"))  # a machine without a driver
    # text: the one line, exit 3, as doctor says it
    assert main(["doctor", str(cu13), str(null)]) == 3
    out, err = capsys.readouterr()
    assert out == "" and err.startswith("cudaship: error: no NVIDIA driver on this machine")
    # JSON: the report says so, and that an installer here gets the null variant
    assert main(["doctor", "-f", "json", str(cu13), str(null)]) == 3
    doc = json.loads(capsys.readouterr().out)
    assert doc["no_gpu"].startswith("no NVIDIA driver on this machine")
    ((p),) = doc["variant_releases"][0]["picks"]
    assert (p["variant"], p["runs"]) == ("null", None)
    assert p["reason"].startswith("no NVIDIA driver or GPU here: the provider reports nothing")
    # the provider's override variables stand for the GPU and the driver, as they do for it
    no_override.setenv("NV_VARIANT_PROVIDER_FORCE_SM_ARCH", "12.0")
    no_override.setenv("NV_VARIANT_PROVIDER_FORCE_CUDA_DRIVER_VERSION", "13.0")
    assert main(["doctor", str(cu13), str(null)]) == 0
    out = capsys.readouterr().out
    assert "GPU 12.0, driver for CUDA 13.0 (NV_VARIANT_PROVIDER_FORCE_SM_ARCH set, " in out
    assert "  12.0  CUDA 13.0        cu13         yes " in out
