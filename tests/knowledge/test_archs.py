"""Arch names and arch lists in every syntax: parsing, printing, round trips and the errors users see."""

from __future__ import annotations

import pytest
from hypothesis import given
from hypothesis import strategies as st

from cudaship.errors import KnowledgeError
from cudaship.knowledge.archs import (
    Arch,
    ArchList,
    Target,
    detect_syntax,
    format_arch_list,
    known_archs,
    parse_arch,
    parse_arch_list,
    sort_arch_names,
    split_arch_name,
)

A = Arch


@pytest.mark.parametrize(
    ("token", "expected"),
    [
        ("sm_90a", A(9, 0, "a")),
        ("compute_120", A(12, 0)),
        ("9.0", A(9, 0)),
        ("90", A(9, 0)),
        ("9.0a", A(9, 0, "a")),
        ("90a", A(9, 0, "a")),
        ("sm_100f", A(10, 0, "f")),
        ("12.0f", A(12, 0, "f")),
        ("121", A(12, 1)),
        ("lto_90", A(9, 0)),
        (" SM_86 ", A(8, 6)),
    ],
    ids=lambda v: str(v).strip(),
)
def test_parse_arch(token: str, expected: Arch) -> None:
    assert parse_arch(token) == expected


def test_arch_names() -> None:
    arch = A(9, 0, "a")
    assert (arch.sm, arch.capability, arch.sass_name, arch.ptx_name, str(arch), arch.dotted) == (
        90,
        "9.0",
        "sm_90a",
        "compute_90a",
        "sm_90a",
        "9.0a",
    )
    assert A(12, 1).generation == "Blackwell"
    assert A(9, 0).generation == "Hopper"


def test_split_keeps_prefix() -> None:
    assert split_arch_name("compute_90a") == ("compute", A(9, 0, "a"))
    assert split_arch_name("9.0") == (None, A(9, 0))


@pytest.mark.parametrize(
    ("token", "message"),
    [
        ("sm_9x", "invalid architecture 'sm_9x'"),
        ("9", "invalid architecture '9'"),
        ("sm_9.0", "not X.Y"),
        ("9.0f", "'f' targets start at sm_100f"),
        ("8.6a", "'a' targets start at sm_90a"),
        ("9.10", "invalid architecture '9.10'"),
        ("090", "invalid architecture '090'"),
        ("", "invalid architecture ''"),
    ],
    ids=[
        "garbage-suffix",
        "single-digit",
        "prefixed-dotted",
        "f-too-old",
        "a-too-old",
        "two-digit-minor",
        "zero",
        "empty",
    ],
)
def test_parse_arch_errors(token: str, message: str) -> None:
    with pytest.raises(KnowledgeError, match=message):
        parse_arch(token)


def test_known_only_names_the_token_and_known() -> None:
    with pytest.raises(KnowledgeError) as info:
        parse_arch("8.5", known_only=True)
    assert "8.5" in str(info.value) and "8.6" in str(info.value)
    assert A(8, 5) == parse_arch("8.5")  # syntactically fine without known_only


def test_ordering() -> None:
    names = ["sm_100", "sm_90a", "sm_75", "sm_90", "compute_90", "sm_100f", "sm_120", "sm_80", "sm_100a"]
    assert sorted(parse_arch(n) for n in names)[0] == A(7, 5)
    assert sort_arch_names(names) == (
        "sm_75",
        "sm_80",
        "sm_90",
        "compute_90",
        "sm_90a",
        "sm_100",
        "sm_100a",
        "sm_100f",
        "sm_120",
    )


def test_sort_unknown_last_and_dedup() -> None:
    assert sort_arch_names(["zzz", "sm_80", "abc", "sm_80"]) == ("sm_80", "abc", "zzz")


def test_known_archs_cover_reference() -> None:
    caps = {a.capability for a in known_archs()}
    assert {"7.5", "8.0", "8.6", "8.7", "8.9", "9.0", "10.0", "10.3", "11.0", "12.0", "12.1"} <= caps


T = Target


@pytest.mark.parametrize(
    ("text", "syntax", "targets"),
    [
        (
            "8.0;8.6;9.0+PTX",
            "torch",
            [T(A(8, 0), True, False), T(A(8, 6), True, False), T(A(9, 0), True, True)],
        ),
        (
            "8.0;8.6 9.0+PTX",
            "torch",
            [T(A(8, 0), True, False), T(A(8, 6), True, False), T(A(9, 0), True, True)],
        ),
        ("9.0a", "torch", [T(A(9, 0, "a"), True, False)]),
        ("Hopper", "torch", [T(A(9, 0), True, True)]),
        ("Ampere;Ada", "torch", [T(A(8, 0), True, False), T(A(8, 6), True, True), T(A(8, 9), True, True)]),
        ("80-real;90-virtual", "cmake", [T(A(8, 0), True, False), T(A(9, 0), False, True)]),
        ("120a-real", "cmake", [T(A(12, 0, "a"), True, False)]),
        ("80;86", "cmake", [T(A(8, 0), True, True), T(A(8, 6), True, True)]),
        (
            "-gencode arch=compute_90a,code=[sm_90a,compute_90a] -arch=sm_80",
            "gencode",
            [T(A(8, 0), True, True), T(A(9, 0, "a"), True, True)],
        ),
        ("-gencode=arch=compute_80,code=sm_86", "gencode", [T(A(8, 6), True, False)]),
        ('--generate-code arch=compute_80,code="sm_80,compute_80"', "gencode", [T(A(8, 0), True, True)]),
        ("-arch=compute_80", "gencode", [T(A(8, 0), False, True)]),
        ("-arch compute_80 -code sm_86,sm_89", "gencode", [T(A(8, 6), True, False), T(A(8, 9), True, False)]),
        ("sm_90a compute_120", "list", [T(A(9, 0, "a"), True, False), T(A(12, 0), False, True)]),
        ("['sm_75', 'sm_80', 'compute_80']", "list", [T(A(7, 5), True, False), T(A(8, 0), True, True)]),
        ("9.0 8.6", "plain", [T(A(8, 6), True, False), T(A(9, 0), True, False)]),  # auto: torch, same list
        ("90 100f", "plain", [T(A(9, 0), True, False), T(A(10, 0, "f"), True, False)]),
    ],
    ids=lambda v: v if isinstance(v, str) else "",
)
def test_parse_each_syntax(text: str, syntax: str, targets: list[Target]) -> None:
    expected = ArchList(tuple(targets))
    assert parse_arch_list(text, syntax) == expected
    assert detect_syntax(text) == ("torch" if text == "9.0 8.6" else syntax)
    assert parse_arch_list(text) == expected  # auto


def test_all_and_all_major_need_a_train() -> None:
    with pytest.raises(KnowledgeError, match="give a train"):
        parse_arch_list("all")
    full = parse_arch_list("all", "cmake", train="cu130")
    major = parse_arch_list("-arch=all-major", train="13.0")
    assert set(major.archs()) < set(full.archs())
    assert full.ptx_names() == major.ptx_names() == ("compute_120",)


@pytest.mark.parametrize(
    ("text", "syntax", "message"),
    [
        ("native", "cmake", "needs a GPU"),
        ("-arch=native", "gencode", "needs a GPU"),
        ("OFF", "cmake", "no list"),
        ("80;all", "cmake", "only entry"),
        ("8.5", "torch", "unknown compute capability 8.5"),
        ("8.0;Hoper", "torch", "'Hoper'"),
        ("90", "torch", "'90'"),
        ("80-fake", "cmake", "'80-fake'"),
        ("-gencode arch=compute_90,code=lto_90", "gencode", "LTO-IR"),
        ("-O3 -arch=sm_80", "gencode", "'-O3'"),
        ("-code=sm_80", "gencode", "needs -arch"),
        ("-arch", "gencode", "has no value"),
        ("-arch=sm_80 -arch=sm_90", "gencode", "given twice"),
        ("-gencode arch=compute_80", "gencode", "invalid -gencode"),
        ("sm_80 86", "list", "'86'"),
        ("sm_80", "plain", "'sm_80'"),
        ("   ", "auto", "empty"),
        ("8.0", "bazel", "unknown arch-list syntax"),
    ],
    ids=lambda v: v if isinstance(v, str) else "",
)
def test_parse_errors_name_the_token(text: str, syntax: str, message: str) -> None:
    with pytest.raises(KnowledgeError, match=message):
        parse_arch_list(text, syntax)


LIST = ArchList((T(A(8, 0), True, False), T(A(9, 0, "a"), True, False), T(A(12, 0), True, True)))


@pytest.mark.parametrize(
    ("syntax", "text"),
    [
        ("torch", "8.0;9.0a;12.0+PTX"),
        ("cmake", "80-real;90a-real;120"),
        (
            "gencode",
            "-gencode arch=compute_80,code=sm_80 -gencode arch=compute_90a,code=sm_90a "
            "-gencode arch=compute_120,code=[sm_120,compute_120]",
        ),
        ("list", "sm_80 sm_90a sm_120 compute_120"),
    ],
    ids=lambda v: v if v in ("torch", "cmake", "gencode", "list") else "",
)
def test_format(syntax: str, text: str) -> None:
    assert format_arch_list(LIST, syntax) == text
    assert parse_arch_list(text, syntax) == LIST


@pytest.mark.parametrize(
    ("archs", "syntax", "message"),
    [
        (ArchList((T(A(8, 0), False, True),)), "torch", "PTX without SASS"),
        (ArchList((T(A(8, 0), True, True),)), "plain", "cannot say PTX"),
        (LIST, "yaml", "unknown arch-list syntax"),
    ],
    ids=["torch-ptx-only", "plain-ptx", "unknown-syntax"],
)
def test_format_errors(archs: ArchList, syntax: str, message: str) -> None:
    with pytest.raises(KnowledgeError, match=message):
        format_arch_list(archs, syntax)


def test_archlist_helpers() -> None:
    merged = ArchList((T(A(9, 0), True, False), T(A(8, 0), True, False), T(A(9, 0), False, True)))
    assert merged.targets == (T(A(8, 0), True, False), T(A(9, 0), True, True))
    assert merged.sass_names() == ("sm_80", "sm_90")
    assert merged.ptx_names() == ("compute_90",)
    assert merged.newest() == A(9, 0)
    assert ArchList().newest() is None
    assert ArchList.of(["8.0", "sm_86", A(9, 0)]).with_newest_ptx().ptx_names() == ("compute_90",)
    with pytest.raises(KnowledgeError):
        Target(A(8, 0), False, False)


_KNOWN = [a for a in known_archs() if a.sm >= 50]
_archs = st.sampled_from(
    _KNOWN
    + [A(a.major, a.minor, "a") for a in _KNOWN if a.sm >= 90]
    + [A(a.major, a.minor, "f") for a in _KNOWN if a.sm >= 100]
)
_targets = (
    st.tuples(_archs, st.booleans(), st.booleans()).filter(lambda t: t[1] or t[2]).map(lambda t: Target(*t))
)


@given(st.lists(_targets, min_size=1, max_size=8))
def test_round_trip(targets: list[Target]) -> None:
    archs = ArchList(tuple(targets))
    for syntax in ("cmake", "gencode", "list"):
        assert parse_arch_list(format_arch_list(archs, syntax), syntax) == archs
    if all(t.sass for t in archs):
        assert parse_arch_list(format_arch_list(archs, "torch"), "torch") == archs
    if not any(t.ptx for t in archs):
        assert parse_arch_list(format_arch_list(archs, "plain"), "plain") == archs
