"""report.py: demangling through the installed demanglers, PTX ISA → CUDA release."""

from __future__ import annotations

import shutil

import pytest

from cudaship.inspection.report import demangle
from cudaship.knowledge.releases import cuda_release_for_ptx

needs_cxxfilt = pytest.mark.skipif(
    not (shutil.which("llvm-cxxfilt") or shutil.which("c++filt")), reason="no Itanium demangler installed"
)
needs_undname = pytest.mark.skipif(
    not (shutil.which("llvm-undname") or shutil.which("undname")), reason="no MSVC demangler installed"
)


@needs_cxxfilt
def test_itanium_names() -> None:
    assert demangle(["_ZN10vecadd_lib11abi_versionEv", "plain_c_name"]) == [
        "vecadd_lib::abi_version()",
        "plain_c_name",
    ]


@needs_undname
def test_msvc_names_and_unreadable_ones_kept() -> None:
    names = ["?foo@@YAHXZ", "?not a name", "?bar@ns@@QEAAXH@Z"]
    assert demangle(names) == ["int __cdecl foo(void)", "?not a name", "public: void __cdecl ns::bar(int)"]


@needs_cxxfilt
@needs_undname
def test_mixed_styles_keep_their_order() -> None:
    out = demangle(["?foo@@YAHXZ", "_ZN3foo3barEv", "x"])
    assert out == ["int __cdecl foo(void)", "foo::bar()", "x"]


def test_empty() -> None:
    assert demangle([]) == []


@pytest.mark.parametrize(
    ("isa", "release"),
    [("7.8", "11.8"), ("8.5", "12.5"), ("9.0", "13.0"), ("99.0", None), ("bogus", None), (None, None)],
    ids=["cuda-11.8", "shared-by-12.5-and-12.6", "cuda-13.0", "newer-than-known", "malformed", "none"],
)
def test_release_for_ptx_isa(isa: str | None, release: str | None) -> None:
    assert cuda_release_for_ptx(isa) == release
