"""binary/strings.py: library names stored as strings, where a name's first characters are a guess.

The layouts are those of real libraries: libtorch_cuda.so (torch 2.14.1) stores ``libcuda.so.1`` right after
the unterminated text ``... skipping registration o``, so walking back over name characters used to report
``olibcuda.so.1`` and the driver linkage read "none".
"""

from __future__ import annotations

import pytest

from cudaship.binary.strings import library_names


def names(data: bytes) -> tuple[str, ...]:
    return library_names(data, [(0, len(data))])


def test_name_glued_to_unterminated_text_starts_at_lib() -> None:
    data = b"\0item already registered, skipping registration olibcuda.so.1\0Can't get"
    assert names(data) == ("libcuda.so.1",)


@pytest.mark.parametrize(
    ("data", "expected"),
    [
        pytest.param(b"\0libnvidia-ml.so.1\x00118\0", ("libnvidia-ml.so.1",), id="after-a-nul"),
        pytest.param(b"libcuda.so.1\0", ("libcuda.so.1",), id="at-the-range-start"),
        pytest.param(b"\0/usr/lib/olibx.so\0", ("/usr/lib/olibx.so",), id="a-path-is-kept"),
        pytest.param(b"\x01\x02cudnn64_9.dll\0", ("cudnn64_9.dll",), id="dll-after-a-constant"),
        pytest.param(b" mylibrary_v2.so\0", ("mylibrary_v2.so",), id="lib-not-near-the-start"),
        pytest.param(b"\x7fxlibfoo.so.2\0", ("libfoo.so.2",), id="after-a-binary-byte"),
    ],
)
def test_where_names_start(data: bytes, expected: tuple[str, ...]) -> None:
    assert names(data) == expected


def test_a_name_after_a_nul_is_never_cut() -> None:
    # "olib" is a real prefix when a NUL says where the string starts
    assert names(b"\0olibrary.so\0") == ("olibrary.so",)


@pytest.mark.parametrize("name", ["zlib.so", "mylibrary_v2.so", "xlib.so"])
def test_names_with_lib_inside_are_not_cut(name: str) -> None:
    assert names(b" " + name.encode() + b"\0") == (name,)
