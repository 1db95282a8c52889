"""binary/strings.py: library names stored as strings: whole strings of plausible names, and where a name
glued to other bytes starts.

The layouts are those of real libraries: libtorch_cuda.so (torch 2.14.1) stores ``libcuda.so.1`` right after
the unterminated text ``... skipping registration o``, so walking back over name characters used to report
``olibcuda.so.1`` and the driver linkage read "none"; libnccl.so.2 (nvidia-nccl-cu12 2.27.3) has
``4Blibmlx5.so`` after two NULs (a constant, then the name) and the format string ``%s-%s.so``, which were
reported as libraries ``4Blibmlx5.so`` and ``s.so``.
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
        pytest.param(b"\0mylibrary_v2.so\0", ("mylibrary_v2.so",), id="lib-not-near-the-start"),
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
    assert names(b"\0" + name.encode() + b"\0") == (name,)
    assert names(b"\x01" + name.encode() + b"\0") == (name,)


@pytest.mark.parametrize(
    ("data", "expected"),
    [
        pytest.param(b"\0%s-%s.so\0", (), id="format-string"),
        pytest.param(b"\0%s/Plugin: %s\0%s-%s.so\0Using", (), id="format-string-nccl"),
        pytest.param(b"\0s.so\0", (), id="one-letter-stem"),
        pytest.param(b"\0-x.so\0", (), id="stem-starts-with-a-dash"),
        pytest.param(
            b"\x00\x004Blibmlx5.so\0libmlx5.so.1\0", ("libmlx5.so", "libmlx5.so.1"), id="nccl-constant"
        ),
        pytest.param(b"\x0042.dll\0", (), id="digits-only"),
        pytest.param(b"\0cannot open mylib_v2.so\0", (), id="a-name-in-a-sentence"),
        pytest.param(b"\0failed to load libfoo.so.1\0", ("libfoo.so.1",), id="a-lib-name-at-a-sentence-end"),
    ],
)
def test_only_whole_strings_of_plausible_names(data: bytes, expected: tuple[str, ...]) -> None:
    """A string counts when it is a whole C string (or the end of a binary constant) holding a plausible
    name: a stem of two characters or more that starts with a letter or ``_``; the tail of a text only when it
    is a ``lib`` name, as the linker's string merging leaves them."""
    assert names(data) == expected


def test_wide_names_must_be_plausible() -> None:
    data = "\0s.dll\0nvcuda.dll\0".encode("utf-16-le")
    assert library_names(data, [(0, len(data))], wide=True) == ("nvcuda.dll",)
