"""Reading ExecuTorch programs built in the layout of executorch's program.fbs, holding real libraries."""

from __future__ import annotations

from pathlib import Path

import pytest

from cudaship.errors import ProgramError
from cudaship.inspection.program import read_program
from cudaship.inspection.program_records import MemberRole
from cudaship.inspection.pte import read_pte
from tests.program.builders import gxx_library, make_pte


@pytest.fixture
def library(tmp_path: Path) -> bytes:
    return gxx_library(tmp_path / "lib", "aoti").read_bytes()


@pytest.mark.parametrize("extended", [True, False], ids=["extended-header", "plain-flatbuffer"])
def test_finds_the_library_blob(tmp_path: Path, library: bytes, extended: bool) -> None:
    named = [("9f2c_so_blob", library), ("77aa_weights_blob", bytes(range(256)) * 4)]
    if not extended:  # without the extended header the segments cannot be located: no named data then
        named = []
    path = make_pte(tmp_path / "model.pte", named, extended_header=extended)
    info = read_program(path)
    assert info.kind.value == "pte"
    assert info.models == ("forward",) and info.backends == ("CudaBackend",)
    assert info.device == "cuda"
    wrappers = [m for m in info.members if m.role is MemberRole.WRAPPER]
    if extended:
        assert [m.name for m in wrappers] == ["named:9f2c_so_blob"]
        assert wrappers[0].size == len(library)
        assert info.platform == "linux" and info.machine == "x86_64"
        assert any(m.role is MemberRole.WEIGHTS for m in info.members)
    else:
        assert wrappers == []
        assert any("no compiled library" in n for n in info.notes)


def test_ptd_beside_is_noted(tmp_path: Path, library: bytes) -> None:
    path = make_pte(tmp_path / "model.pte", [("k_so_blob", library)])
    (tmp_path / "model_aoti_cuda_blob.ptd").write_bytes(b"\0\0\0\0FT01")
    assert any("model_aoti_cuda_blob.ptd" in n for n in read_program(path).notes)


def test_truncated_segments(tmp_path: Path, library: bytes) -> None:
    path = make_pte(tmp_path / "model.pte", [("k_so_blob", library)])
    data = path.read_bytes()
    path.write_bytes(data[: len(data) - len(library) // 2])
    with pytest.raises(ProgramError, match="truncated program") as e:
        read_program(path)
    assert str(path) in str(e.value)


@pytest.mark.parametrize(
    "patch",
    [
        pytest.param((0, b"\xff\xff\xff\x7f"), id="root-offset-out-of-range"),
        pytest.param((12, b"\x04\x00\x00\x00"), id="extended-header-size"),
    ],
)
def test_corrupt_header(tmp_path: Path, library: bytes, patch: tuple[int, bytes]) -> None:
    path = make_pte(tmp_path / "model.pte", [("k_so_blob", library)])
    data = bytearray(path.read_bytes())
    offset, value = patch
    data[offset : offset + len(value)] = value
    with pytest.raises(ProgramError, match="corrupt program"):
        read_pte(bytes(data), "model.pte")


def test_not_a_program(tmp_path: Path) -> None:
    with pytest.raises(ProgramError, match="no ET"):
        read_pte(b"\0" * 64, "x.pte")
    other = tmp_path / "x.pte"
    other.write_bytes(b"hello world, not a program")
    with pytest.raises(ProgramError, match="not a program"):
        read_program(other)


DATA = Path(__file__).parent / "data"


def test_real_executorch_cuda_program() -> None:
    """The demo MLP lowered by executorch 1.5.1's CudaBackend on an H200 (see scripts/)."""
    path = DATA / "demo_mlp_cuda.pte"
    info = read_program(path)
    assert info.models == ("forward",) and info.backends == ("CudaBackend",)
    (wrapper,) = [m for m in info.members if m.role is MemberRole.WRAPPER]
    assert wrapper.name.startswith("named:") and wrapper.name.endswith("_so_blob")
    assert wrapper.report is not None and wrapper.report.host is not None
    assert "libcuda.so.1" in [i.library for i in wrapper.report.host.imports]
    # Independent count: each embedded kernel is a whole EM_CUDA ELF inside the library's bytes.
    data = path.read_bytes()
    blob_start = data.index(b"\x7fELF")
    blob = data[blob_start : blob_start + wrapper.size]
    embedded = [
        i
        for i in range(1, len(blob))
        if blob.startswith(b"\x7fELF", i) and blob[i + 18 : i + 20] == b"\xbe\x00"
    ]
    sass = [d for _, d in info.device_code if d.kind.value == "sass"]
    assert len(sass) == len(embedded) > 0
    assert info.sass == ("sm_90a",)
    assert any("aoti_cuda_blob.ptd" in n for n in info.notes)
