"""The DLL-directory bootstrap (cudaship.wheel.bootstrap): where it goes, and when a file has one."""

from __future__ import annotations

import pytest

from cudaship.errors import WheelError
from cudaship.wheel.bootstrap import MARKER, bootstraps, with_bootstrap

DIRS = ("../nvidia/cu13/bin/x86_64",)


def test_a_written_bootstrap_is_found_and_not_written_twice() -> None:
    once = with_bootstrap(b'"""doc"""\nimport os\n', DIRS)
    assert bootstraps(once) == (DIRS,)
    assert with_bootstrap(once, DIRS) == once
    more = with_bootstrap(once, ("../nvidia/cu13/bin", *DIRS))
    assert bootstraps(more) == (("../nvidia/cu13/bin", *DIRS), DIRS)
    assert more.endswith(once[len(b'"""doc"""\n') :])


@pytest.mark.parametrize(
    "source",
    [
        (MARKER + "\nimport os\n").encode(),
        ("import os  " + MARKER + "\n").encode(),
        ('"""' + MARKER + '"""\n').encode(),
        ("x = 1\n" + MARKER + "\ndef _cudaship_dll_directories():\n    pass\n").encode(),
    ],
    ids=["comment-line", "inline-comment", "docstring", "after-code"],
)
def test_the_marker_alone_is_no_bootstrap(source: bytes) -> None:
    assert bootstraps(source) == ()
    assert bootstraps(with_bootstrap(source, DIRS)) == (DIRS,)


def test_crlf_and_no_final_newline() -> None:
    out = with_bootstrap(b'"""doc"""\r\nfrom __future__ import annotations', DIRS)
    assert out.startswith(b'"""doc"""\r\nfrom __future__ import annotations\r\n' + MARKER.encode() + b"\r\n")
    assert b"\n" not in out.replace(b"\r\n", b"")
    assert bootstraps(out) == (DIRS,)


def test_a_file_that_does_not_tokenize_gets_the_block_first() -> None:
    source = b'x = """never closed\n'
    assert with_bootstrap(source, DIRS).endswith(source)


@pytest.mark.parametrize(
    ("source", "why"),
    [
        (b"x = 1\n# caf\xe9\n", "not UTF-8"),
        (b"\xff\xfex\n", "not UTF-8"),
        (b"# -*- coding: no-such-codec -*-\nx = 1\n", "no coding declaration"),
        (b"# -*- coding: utf-16 -*-\nx = 1\n", "utf-16"),
    ],
)
def test_undecodable_files_are_refused(source: bytes, why: str) -> None:
    with pytest.raises(WheelError, match=why):
        with_bootstrap(source, DIRS, "pkg/__init__.py")
