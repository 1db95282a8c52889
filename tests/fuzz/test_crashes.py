"""Every input a fuzzer found that broke the contract, run again: it must now give records or a one-line
CudashipError. The inputs are the files under tests/fuzz/crashes/TARGET/, as the fuzzer wrote them."""

from __future__ import annotations

import io
import zipfile
from pathlib import Path

import pytest
from fuzz._harness import Finding, load_target, outcome

CRASHES = Path(__file__).parent / "crashes"
CASES = sorted(p for p in CRASHES.glob("*/*") if p.is_file())


@pytest.mark.parametrize("path", [pytest.param(p, id=f"{p.parent.name}/{p.name}") for p in CASES])
def test_crash_input_is_handled(path: Path) -> None:
    target = load_target(path.parent.name)
    try:
        result = outcome(target, path.read_bytes())
    except Finding as e:
        pytest.fail(f"{path.parent.name}/{path.name}: {e}")
    assert result == "ok" or "\n" not in result


# -- crashes whose input is generated (the fuzzer's were large real wheels) ----------------------------------


def _wheel(members: dict[str, bytes], compression: int = zipfile.ZIP_DEFLATED) -> bytearray:
    buffer = io.BytesIO()
    with zipfile.ZipFile(buffer, "w", compression) as zf:
        for name, data in members.items():
            zf.writestr(zipfile.ZipInfo(name) if name == "" else name, data, compress_type=compression)
    return bytearray(buffer.getvalue())


_DIST = {
    "pkg-1.0.dist-info/METADATA": b"Metadata-Version: 2.1\nName: pkg\nVersion: 1.0\n",
    "pkg-1.0.dist-info/WHEEL": b"Wheel-Version: 1.0\nRoot-Is-Purelib: false\nTag: py3-none-linux_x86_64\n",
    "pkg-1.0.dist-info/RECORD": b"",
}


def _corrupt_deflate() -> bytes:
    """A deflated .so whose compressed stream is damaged in the middle (zlib.error while unpacking)."""
    library = b"\x7fELF\x02\x01\x01" + bytes(range(256)) * 64
    data = _wheel({"pkg/libx.so": library, **_DIST})
    at = data.index(b"pkg/libx.so") + len("pkg/libx.so") + 20  # inside the first member's data
    data[at : at + 8] = b"\xff" * 8
    return bytes(data)


def _empty_member_name() -> bytes:
    """A member whose name is empty (zipfile's ZipInfo.is_dir() raises IndexError on it)."""
    return bytes(_wheel({"": b"x", "pkg/libx.so": b"\x7fELF", **_DIST}, zipfile.ZIP_STORED))


GENERATED = {
    "wheel/corrupt-deflate-stream": ("wheel", _corrupt_deflate),
    "wheel/empty-member-name": ("wheel", _empty_member_name),
    "program/empty-member-name": ("program", _empty_member_name),
    "extract/empty-member-name": ("extract", _empty_member_name),
    "extract/corrupt-deflate-stream": ("extract", _corrupt_deflate),
}


@pytest.mark.parametrize("case", sorted(GENERATED), ids=sorted(GENERATED))
def test_generated_crash_input_is_handled(case: str) -> None:
    name, make = GENERATED[case]
    try:
        result = outcome(load_target(name), make())
    except Finding as e:
        pytest.fail(f"{case}: {e}")
    assert result == "ok" or "\n" not in result
