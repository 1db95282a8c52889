"""Drivers (version ↔ CUDA) and GPU names ↔ compute capability."""

from __future__ import annotations

import pytest

from cudaship.errors import KnowledgeError
from cudaship.knowledge.archs import Arch
from cudaship.knowledge.driver import Driver, cuda_for_driver, cuda_from_driver_api, parse_driver
from cudaship.knowledge.gpus import capability_of, group_for, shown_capabilities
from cudaship.knowledge.trains import Train


@pytest.mark.parametrize(
    ("version", "cuda"),
    [
        ("595.45.04", Train(13, 2)),
        ("595.45.03", Train(13, 1)),
        ("580.159.04", Train(13, 0)),  # the lent H200's driver
        ("580.65.06", Train(13, 0)),
        ("575.51.03", Train(12, 9)),
        ("535.104.05", Train(12, 2)),
        ("450.80.02", Train(11, 0)),
        ("620.1", Train(13, 3)),  # newer than the data: the newest release with a known minimum
    ],
    ids=lambda v: v if isinstance(v, str) else "",
)
def test_cuda_for_driver(version: str, cuda: Train) -> None:
    assert cuda_for_driver(version) == cuda


def test_driver_older_than_every_release() -> None:
    assert cuda_for_driver("418.67") is None
    assert "older than" in parse_driver("418.67").describe()


@pytest.mark.parametrize(
    ("text", "version", "cuda"),
    [
        ("595.45.04", "595.45.04", Train(13, 2)),
        ("13.2", None, Train(13, 2)),
        ("cuda13.4", None, Train(13, 4)),
        ("cu130", None, Train(13, 0)),
        ("13020", None, Train(13, 2)),
    ],
    ids=lambda v: v if isinstance(v, str) else "",
)
def test_parse_driver(text: str, version: str | None, cuda: Train) -> None:
    driver = parse_driver(text)
    assert (driver.version, driver.cuda) == (version, cuda)


@pytest.mark.parametrize("text", ["latest", "595.x", "", "13"], ids=repr)
def test_parse_driver_errors(text: str) -> None:
    with pytest.raises(KnowledgeError):
        parse_driver(text)


def test_driver_meets() -> None:
    assert Driver("560.28.03", Train(12, 6)).meets("550.54.14")
    assert not Driver("535.104.05", Train(12, 2)).meets("550.54.14")
    assert Driver(None, Train(13, 2)).meets("580.65.06")  # a driver for 13.2 is at least 595.45.04
    assert not Driver(None, Train(12, 2)).meets("550.54.14")
    assert Driver(None, Train(13, 9)).meets("610.43.02")  # newer than the data: bounded by the newest known
    assert cuda_from_driver_api(12080) == Train(12, 8)


@pytest.mark.parametrize(
    ("name", "capability"),
    [
        ("T4", "7.5"),
        ("A100", "8.0"),
        ("A10G", "8.6"),
        ("NVIDIA A10G", "8.6"),
        ("L4", "8.9"),
        ("NVIDIA GeForce RTX 4090", "8.9"),
        ("Jetson AGX Orin", "8.7"),
        ("NVIDIA H100 80GB HBM3", "9.0"),
        ("NVIDIA H200", "9.0"),
        ("B200", "10.0"),
        ("Jetson Thor", "11.0"),
        ("RTX 5090", "12.0"),
        ("GB10", "12.1"),
        ("V100", "7.0"),
        ("8.6", "8.6"),
    ],
    ids=lambda v: v,
)
def test_gpu_names(name: str, capability: str) -> None:
    assert capability_of(name).capability == capability


def test_unknown_gpu() -> None:
    with pytest.raises(KnowledgeError, match="'Voodoo 5'"):
        capability_of("Voodoo 5")


def test_shown_rows_span_7_0_to_12_1() -> None:
    caps = [a.capability for a in shown_capabilities()]
    assert caps[0] == "7.0" and caps[-1] == "12.1"
    assert "7.2" not in caps and "6.1" not in caps  # Xavier runs JetPack's CUDA; Pascal is not a default row
    group = group_for(Arch(9, 0, "a"))
    assert group is not None and group.generation == "Hopper" and "H200" in group.names
    assert group.label == "9.0 Hopper (H100, H200)"


# -- a newcomer's inputs (issue 14) ---------------------------------------------------------------------


def test_driver_phrase_never_doubles_the_word() -> None:
    from cudaship.knowledge.driver import parse_driver

    assert parse_driver("12.2").phrase == "a driver for CUDA 12.2"
    assert parse_driver("535.104.05").phrase == "driver 535.104.05 (CUDA 12.2)"


def test_future_driver_branch_is_a_lower_bound_not_a_release() -> None:
    from cudaship.knowledge.driver import newest_known_branch, parse_driver

    newest = newest_known_branch()
    assert newest is not None
    known = parse_driver(f"{newest}.10")
    assert not known.future and "newer than cudaship knows" not in known.describe()
    future = parse_driver("999.1")
    assert future.future and future.cuda is not None
    assert (
        future.describe()
        == f"999.1 (a branch newer than cudaship knows: CUDA {future.cuda.version} or newer)"
    )


def test_no_verdict_stopped_by_the_driver_names_the_driver_that_runs_it() -> None:
    from cudaship.knowledge.runs_on import VerdictKind, runs_on
    from cudaship.records.binary import Compression, DeviceCode, DeviceCodeKind

    sass = DeviceCode(
        kind=DeviceCodeKind.SASS,
        arch="sm_86",
        sm=86,
        variant="",
        section=".nv_fatbin",
        relocatable=False,
        compression=Compression.NONE,
        stored_size=64,
        uncompressed_size=64,
        offset=0,
    )
    old = runs_on([sass], "8.6", "535.104.05", build_cuda="13.0")
    assert old.verdict is VerdictKind.NO
    unbound = runs_on([sass], "8.6", None, build_cuda="13.0")
    assert old.min_driver == unbound.min_driver == "580.65.06"
    unrelated = runs_on([sass], "9.0", "535.104.05", build_cuda="13.0")  # no SASS for 9.0 with any driver
    assert unrelated.verdict is VerdictKind.NO and unrelated.min_driver is None


@pytest.mark.parametrize(
    ("name", "capability"),
    [
        ("RTX 6000 Ada", "8.9"),
        ("rtx 6000 ada", "8.9"),
        ("NVIDIA GeForce RTX 4090", "8.9"),
        ("Quadro RTX 8000", "7.5"),
        ("RTX 8000", "7.5"),
        ("nvidia a10g", "8.6"),
    ],
)
def test_capability_of_loose_names(name: str, capability: str) -> None:
    from cudaship.knowledge.gpus import capability_of

    assert capability_of(name).capability == capability


def test_unknown_gpu_message_suggests_and_hides_files() -> None:
    from cudaship.errors import KnowledgeError
    from cudaship.knowledge.gpus import capability_of

    with pytest.raises(KnowledgeError) as caught:
        capability_of("RTX")  # a word of many capabilities' names
    message = caught.value.message
    assert "did you mean" in message and "toml" not in message


def test_volta_is_a_default_row_while_cuda_12_builds_for_it() -> None:
    """7.0 (V100) was left out of the default ``gpus`` rows and docs/gpus.md's table although the newest CUDA
    12 release still compiles for sm_70 (issue 35): the rows start there, and the docs name the rows shown."""
    from pathlib import Path

    from cudaship.knowledge.releases import releases

    newest_12 = max((r for r in releases() if r.train.major == 12), key=lambda r: r.train)
    assert 70 in newest_12.sms
    shown = [a.capability for a in shown_capabilities()]
    volta = group_for("7.0")
    assert shown[0] == "7.0" and volta is not None and "V100" in volta.names
    doc = (Path(__file__).resolve().parents[2] / "docs" / "gpus.md").read_text()
    # the rows of an input of unknown machine are every row shown (docs/gpus.md says so)
    assert f"every row {shown[0]} to {shown[-1]} when no machine is known" in " ".join(doc.split())
