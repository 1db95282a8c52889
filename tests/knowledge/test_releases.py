"""The release table against the reference facts, and the all/all-major expansion against nvcc itself."""

from __future__ import annotations

import re
import subprocess
from pathlib import Path

import pytest

from cudaship.errors import UnknownTrainError
from cudaship.knowledge.archs import Arch, ArchList, Target
from cudaship.knowledge.releases import (
    isa_tuple,
    known_trains,
    minor_compat_floor,
    release_for,
    release_for_ptx_isa,
    releases,
    zstd_min_driver,
)
from cudaship.knowledge.trains import Train


@pytest.mark.parametrize(
    ("train", "isa", "linux", "windows"),
    [
        ("11.8", "7.8", "520.61.05", "520.06"),
        ("12.0", "8.0", "525.60.13", "527.41"),
        ("12.4", "8.4", "550.54.14", "551.61"),
        ("12.6", "8.5", "560.28.03", "560.76"),
        ("12.8", "8.7", "570.26", "570.65"),
        ("12.9", "8.8", "575.51.03", "576.02"),
        ("13.0", "9.0", "580.65.06", None),
        ("13.1", "9.1", "590.44.01", None),
        ("13.2", "9.2", "595.45.04", None),
        ("13.3", "9.3", "610.43.02", None),
    ],
    ids=lambda v: v if isinstance(v, str) and v.count(".") == 1 and len(v) <= 4 else "",
)
def test_reference_facts(train: str, isa: str, linux: str, windows: str | None) -> None:
    release = release_for(train)
    assert release.ptx_isa == isa
    assert release.min_driver("linux") == linux
    assert release.min_driver("windows") == windows


def test_table_is_consistent() -> None:
    rows = releases()
    assert [r.train for r in rows] == sorted(r.train for r in rows)
    isas = [isa_tuple(r.ptx_isa) for r in rows]
    assert isas == sorted(isas), "PTX ISA never goes backwards"
    for row in rows:
        assert row.oldest <= row.newest
        if row.family_specific:
            assert row.arch_specific


@pytest.mark.parametrize(
    ("train", "oldest", "newest"),
    [("11.0", "3.5", "8.0"), ("12.0", "5.0", "9.0"), ("12.9", "5.0", "12.1"), ("13.0", "7.5", "12.1")],
    ids=["11.0-dropped-sm30", "12.0-dropped-sm35", "12.9-sm121", "13.0-dropped-sm50-72"],
)
def test_dropped_architectures(train: str, oldest: str, newest: str) -> None:
    release = release_for(train)
    assert (release.oldest.capability, release.newest.capability) == (oldest, newest)


def test_sm101_renamed_sm110() -> None:
    assert 101 in release_for("12.9").sms and 110 not in release_for("12.9").sms
    assert 110 in release_for("13.0").sms and 101 not in release_for("13.0").sms


def test_f_targets_from_12_9() -> None:
    assert next(r.train.version for r in releases() if r.family_specific) == "12.9"


def test_ptx_isa_lookup() -> None:
    assert release_for_ptx_isa("9.0").train == Train(13, 0)
    assert release_for_ptx_isa("8.5").train == Train(12, 5)  # 12.5 and 12.6 both write 8.5
    assert release_for_ptx_isa("9.4").train == Train(13, 4)
    assert release_for_ptx_isa("99.0") is None


def test_compat_floors() -> None:
    assert minor_compat_floor(13) == "580.65.06"
    assert minor_compat_floor(12) == "525.60.13"
    assert minor_compat_floor(11) == "450.80.02"
    assert minor_compat_floor(12, "windows") == "527.41"
    assert minor_compat_floor(9) is None
    assert zstd_min_driver() == "550.54.14"


def test_unknown_train_names_known_ones() -> None:
    with pytest.raises(UnknownTrainError) as info:
        release_for("cu99")
    assert "cu99" in str(info.value) and "cu132" in str(info.value)
    assert Train(13, 4) in known_trains()


def _nvcc_images(nvcc: str, arch: str, tmp: Path) -> ArchList:
    """What ``nvcc -arch=<arch>`` puts in the fatbin, read from its ``--dryrun`` fatbinary command."""
    src = tmp / "k.cu"
    src.write_text("__global__ void k() {}\n")
    done = subprocess.run(
        [nvcc, f"-arch={arch}", "--dryrun", "-c", str(src), "-o", str(tmp / "k.o")],
        capture_output=True,
        text=True,
        check=True,
        cwd=tmp,
    )
    line = next(x for x in done.stderr.splitlines() if "fatbinary" in x)
    targets = []
    for kind, sm in re.findall(r"kind=(elf|ptx),sm=(\d+)", line):
        targets.append(Target(Arch.from_sm(int(sm)), kind == "elf", kind == "ptx"))
    return ArchList(tuple(targets))


@pytest.mark.parametrize("keyword", ["all", "all-major"], ids=str)
def test_all_matches_nvcc(keyword: str, nvcc_version: str, tmp_path: Path) -> None:
    import shutil

    nvcc = shutil.which("nvcc")
    assert nvcc is not None
    measured = _nvcc_images(nvcc, keyword, tmp_path)
    release = release_for(nvcc_version)
    assert measured == (release.all if keyword == "all" else release.all_major)
