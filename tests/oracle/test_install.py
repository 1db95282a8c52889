"""install: which interpreter takes a wheel, and what is asked of pip."""

from __future__ import annotations

import platform
import sys

import pytest

from cudaship.errors import OracleError
from cudaship.oracle.install import choose_interpreter, host_requirements, supported


def test_with_pins_a_host_package_of_the_same_name_and_adds_the_rest() -> None:
    assert host_requirements(("torch", "jax"), ("Torch==2.9.1", "numpy<3")) == (
        "Torch==2.9.1",
        "jax",
        "numpy<3",
    )
    assert host_requirements((), ()) == ()
    with pytest.raises(OracleError, match="--with 'torch=='"):
        host_requirements((), ("torch==",))


def test_tags_are_matched_against_this_interpreter() -> None:
    here = sys.version_info[:2]
    cp = f"cp{here[0]}{here[1]}"
    assert supported([f"{cp}-{cp}-manylinux_2_17_x86_64"], here) == (
        sys.platform == "linux" and platform.machine() == "x86_64"
    )
    assert supported(["py3-none-any"], here)
    assert not supported([f"{cp}-{cp}-win_amd64"], here) or sys.platform == "win32"
    assert not supported(["cp27-cp27mu-manylinux1_x86_64"], here)


def test_no_interpreter_for_the_tags_is_one_line_naming_them() -> None:
    if sys.platform == "win32":
        pytest.skip("the tag below is this machine's")
    python, why = choose_interpreter(["cp311-cp311-win_amd64"])
    assert python is None
    assert why.startswith(
        "no interpreter here matches the wheel's tags (cp311-cp311-win_amd64); tried Python"
    )
    python, why = choose_interpreter(["py3-none-any"])
    assert python == sys.executable and why.startswith(f"Python {sys.version_info[0]}.{sys.version_info[1]}")
