"""GNU ld linker scripts (binary.ldscript): recognised by their commands, their inputs read as written."""

from __future__ import annotations

from pathlib import Path

import pytest

from cudaship.binary.ldscript import looks_like_linker_script, read_linker_script
from cudaship.errors import BinaryFormatError
from cudaship.inspection.dispatch import inspect_buffer
from cudaship.records.binary import FileFormat

GLIBC = (
    b"/* GNU ld script\n   Use the shared library, but some functions are only in\n   the static library, so "
    b"try that secondarily.  */\nOUTPUT_FORMAT(elf64-x86-64)\nGROUP ( /lib/x86_64-linux-gnu/libc.so.6 "
    b"/usr/lib/x86_64-linux-gnu/libc_nonshared.a  AS_NEEDED ( /lib64/ld-linux-x86-64.so.2 ) )\n"
)


def test_glibc_libc_so() -> None:
    script = read_linker_script(GLIBC)
    assert script.inputs == (
        "/lib/x86_64-linux-gnu/libc.so.6",
        "/usr/lib/x86_64-linux-gnu/libc_nonshared.a",
        "/lib64/ld-linux-x86-64.so.2",
    )
    assert script.as_needed == ("/lib64/ld-linux-x86-64.so.2",)
    assert script.output_format == "elf64-x86-64"


def test_input_with_commas_and_library_operands() -> None:
    assert read_linker_script(b"INPUT(libfoo.so.1, -lbar)").inputs == ("libfoo.so.1", "-lbar")


@pytest.mark.parametrize(
    "data",
    [b"", b"hello world", b"/* INPUT(libfoo.so.1) */", b"INPUT(libfoo\0.so)", b"SEARCH_DIR(/usr/lib)"],
)
def test_not_a_linker_script(data: bytes) -> None:
    assert not looks_like_linker_script(data)
    with pytest.raises(BinaryFormatError):
        read_linker_script(data)


def test_inspect_reports_it_as_its_own_kind() -> None:
    report = inspect_buffer(GLIBC, "libc.so")
    assert report.error is None
    assert report.format is FileFormat.LINKER_SCRIPT
    assert report.linker_script is not None and report.linker_script.inputs[0].endswith("libc.so.6")


def test_the_systems_own_libc_so() -> None:
    path = Path("/usr/lib/x86_64-linux-gnu/libc.so")
    if not path.is_file():
        pytest.skip("no glibc linker script on this machine")
    assert inspect_buffer(path.read_bytes(), str(path)).format is FileFormat.LINKER_SCRIPT
