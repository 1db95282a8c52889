"""The one platform table (knowledge/data/platforms.toml): the machine a platform tag names is the machine the
readers find in real binaries built for it, this interpreter's spellings map onto it, and NVIDIA's redist keys
are the toolkit's platforms."""

from __future__ import annotations

import platform
import sys
from collections.abc import Callable
from pathlib import Path

import pytest
from packaging.markers import default_environment

from cudaship.binary.elf import read_elf
from cudaship.binary.pe import read_pe
from cudaship.errors import KnowledgeError
from cudaship.knowledge.platforms import (
    cuda_machines,
    cuda_platform_for,
    cuda_platforms,
    machine_of,
    marker_values,
    normalize_machine,
    os_of,
    platform_from_tag,
    platform_names,
    redist_keys,
)
from cudaship.toolkit.records import Platform


@pytest.mark.parametrize(
    ("dll", "tag"),
    [
        ("cuda_consumer.dll", "win_amd64"),
        ("cuda_consumer_x86.dll", "win32"),
        ("cuda_consumer_arm64.dll", "win_arm64"),
    ],
)
def test_a_windows_tag_names_the_machine_of_dlls_built_for_it(
    mingw_build: Callable[[str], Path], dll: str, tag: str
) -> None:
    target = platform_from_tag(tag)
    assert target.os == "windows"
    assert read_pe(mingw_build(dll).read_bytes()).machine.value == target.machine


def test_this_machine_spelled_by_python_is_the_machine_of_what_nvcc_builds_here(
    nvcc_builds: dict[str, Path],
) -> None:
    built = read_elf(nvcc_builds["multi_arch"].read_bytes()).machine.value
    assert machine_of(platform.machine()) == built
    assert platform_from_tag(f"manylinux_2_28_{platform.machine()}").machine == built
    assert os_of(sys.platform) == "linux"


def test_marker_values_of_this_platform_are_what_packaging_evaluates_here() -> None:
    here = marker_values(os_of(sys.platform), machine_of(platform.machine()))
    env = default_environment()
    assert here == {key: env[key] for key in here}  # type: ignore[literal-required]


def test_marker_values_of_other_platforms_use_their_python_spelling() -> None:
    assert marker_values("windows", "x86_64") == {
        "os_name": "nt",
        "sys_platform": "win32",
        "platform_system": "Windows",
        "platform_machine": "AMD64",
    }
    assert marker_values("macos", "aarch64")["platform_machine"] == "arm64"
    assert marker_values("linux", None)["platform_machine"] == ""


def test_every_pip_tag_of_a_cuda_platform_names_that_platform() -> None:
    for p in cuda_platforms():
        assert p.pip_tags, p.name
        for tag in p.pip_tags:
            target = platform_from_tag(tag)
            assert (target.os, target.machine) == (p.os, p.machine), tag


def test_the_toolkit_platforms_are_the_redist_keys() -> None:
    assert [p.value for p in Platform] == list(redist_keys())
    assert Platform.LINUX_SBSA.pypi_platform_tags[0] == "manylinux_2_28_aarch64"
    assert Platform.WINDOWS_X86_64.is_windows and not Platform.LINUX_SBSA.is_windows


def test_names_machines_and_the_nearest_cuda_platform() -> None:
    assert cuda_machines() == ("x86_64", "aarch64")
    assert platform_names()["linux-sbsa"] == platform_names()["linux-aarch64"] == ("linux", "aarch64")
    assert [normalize_machine(m) for m in ("AMD64", "x64", "arm64", "SBSA")] == ["x86_64"] * 2 + [
        "aarch64"
    ] * 2
    with pytest.raises(KnowledgeError, match=r"unknown machine 'ppc64le' \(known: x86_64, aarch64\)"):
        normalize_machine("ppc64le")
    assert cuda_platform_for("windows", "aarch64").redist == "windows-x86_64"
    assert cuda_platform_for("macos", "aarch64").redist == "linux-sbsa"
    assert cuda_platform_for("linux", "ppc64le").redist == "linux-x86_64"
