"""wheel/archive.py: members as buffers (stored → mmap window, deflated → bounded temp file), wheel facts."""

from __future__ import annotations

import hashlib
import struct
import zipfile
from pathlib import Path

import pytest

from cudaship.errors import WheelError
from cudaship.wheel import archive as archive_mod
from cudaship.wheel.archive import WheelArchive, looks_native, wheel_info

ELF_HEAD = b"\x7fELF\x02\x01\x01" + bytes(9)


def _zip(path: Path, members: list[tuple[str, bytes, int]]) -> Path:
    with zipfile.ZipFile(path, "w") as z:
        for name, data, method in members:
            z.writestr(zipfile.ZipInfo(name, date_time=(2024, 1, 1, 0, 0, 0)), data, compress_type=method)
    return path


@pytest.fixture
def small_wheel(tmp_path: Path) -> Path:
    """A wheel with a stored and a deflated 'library', text members and a dist-info."""
    return _zip(
        tmp_path / "demo_pkg-1.6.0+cu132-cp312-cp312-manylinux_2_28_x86_64.whl",
        [
            ("demo_pkg/__init__.py", b"print('hi')\n", zipfile.ZIP_DEFLATED),
            ("demo_pkg/libstored.so", ELF_HEAD + b"S" * 5000, zipfile.ZIP_STORED),
            ("demo_pkg/libdeflated.so.13", ELF_HEAD + b"D" * 100_000, zipfile.ZIP_DEFLATED),
            ("demo_pkg/no_suffix_binary", b"MZ" + bytes(200), zipfile.ZIP_DEFLATED),
            ("demo_pkg/data.bin", b"\x01\x02\x03" * 10, zipfile.ZIP_STORED),
            (
                "demo_pkg-1.6.0+cu132.dist-info/METADATA",
                b"Metadata-Version: 2.1\nName: demo-pkg\nVersion: 1.6.0+cu132\n",
                zipfile.ZIP_DEFLATED,
            ),
            (
                "demo_pkg-1.6.0+cu132.dist-info/WHEEL",
                b"Wheel-Version: 1.0\nTag: cp312-cp312-manylinux_2_28_x86_64\n",
                zipfile.ZIP_DEFLATED,
            ),
        ],
    )


def test_native_members_chosen_by_name_and_magic(small_wheel: Path) -> None:
    with WheelArchive(small_wheel) as wheel:
        names = [m.name for m in wheel.native_members()]
    assert names == ["demo_pkg/libstored.so", "demo_pkg/libdeflated.so.13", "demo_pkg/no_suffix_binary"]


@pytest.mark.parametrize(
    "member",
    ["demo_pkg/libstored.so", "demo_pkg/libdeflated.so.13", "demo_pkg/no_suffix_binary"],
    ids=["stored", "deflated", "by-magic"],
)
def test_member_buffer_equals_zipfile_bytes(small_wheel: Path, member: str) -> None:
    with zipfile.ZipFile(small_wheel) as z:
        expected = z.read(member)
    with WheelArchive(small_wheel) as wheel:
        (m,) = [x for x in wheel.members() if x.name == member]
        with wheel.member_buffer(m) as buf:
            assert len(buf) == len(expected)
            assert bytes(buf[:]) == expected


def test_stored_member_is_a_window_on_the_wheel_not_a_copy(small_wheel: Path) -> None:
    with WheelArchive(small_wheel) as wheel:
        (m,) = [x for x in wheel.members() if x.name == "demo_pkg/libstored.so"]
        with wheel.member_buffer(m) as buf:
            assert isinstance(buf, memoryview)
            assert isinstance(buf.obj, __import__("mmap").mmap)


def test_wheel_facts_from_name_metadata_and_wheel(small_wheel: Path) -> None:
    with WheelArchive(small_wheel) as wheel:
        info = wheel.info()
    assert info.name == "demo-pkg"
    assert info.version == "1.6.0+cu132"
    assert info.local == "cu132"
    assert info.tags == ("cp312-cp312-manylinux_2_28_x86_64",)
    assert info.filename == small_wheel.name


@pytest.mark.parametrize(
    ("filename", "tags"),
    [
        (
            "nvidia_cuda_runtime-13.5.37-py3-none-manylinux2014_x86_64.manylinux_2_17_x86_64.whl",
            ("py3-none-manylinux2014_x86_64", "py3-none-manylinux_2_17_x86_64"),
        ),
        ("executorch-1.6.0+cu132-cp312-cp312-win_amd64.whl", ("cp312-cp312-win_amd64",)),
    ],
    ids=["compressed-tag-set", "local-version"],
)
def test_wheel_info_from_filename_only(filename: str, tags: tuple[str, ...]) -> None:
    info = wheel_info(filename)
    assert info.tags == tags
    assert info.local == ("cu132" if "+cu132" in filename else None)


def test_zip_bomb_member_is_a_clean_error(tmp_path: Path) -> None:
    bomb_size = archive_mod.RATIO_FLOOR + (1 << 20)
    path = tmp_path / "bomb-1.0-py3-none-any.whl"
    with (
        zipfile.ZipFile(path, "w", compression=zipfile.ZIP_DEFLATED, compresslevel=9) as z,
        z.open("bomb/libbomb.so", "w", force_zip64=False) as f,
    ):
        f.write(ELF_HEAD)
        chunk = bytes(1 << 20)
        written = len(ELF_HEAD)
        while written < bomb_size:
            f.write(chunk[: min(len(chunk), bomb_size - written)])
            written += min(len(chunk), bomb_size - written)
    with WheelArchive(path) as wheel:
        (m,) = list(wheel.native_members())
        assert m.size > archive_mod.MAX_RATIO * m.compressed_size
        bomb = r"libbomb\.so: compression ratio \d+:1 .*zip bomb"
        with pytest.raises(WheelError, match=bomb), wheel.member_buffer(m):
            pass


def test_member_lying_about_its_size_is_a_clean_error(tmp_path: Path) -> None:
    """The central directory says 100 bytes; the deflated data holds 5000: unpacking stops with an error."""
    path = _zip(tmp_path / "liar-1.0-py3-none-any.whl", [("liar/libliar.so", ELF_HEAD + b"x" * 5000, 8)])
    raw = bytearray(path.read_bytes())
    central = raw.rfind(b"PK\x01\x02")
    struct.pack_into("<I", raw, central + 24, 100)  # uncompressed size in the central directory
    local = raw.find(b"PK\x03\x04")
    struct.pack_into("<I", raw, local + 22, 100)
    path.write_bytes(bytes(raw))
    with WheelArchive(path) as wheel:
        (m,) = [x for x in wheel.members() if x.name.endswith(".so")]
        with pytest.raises(WheelError, match=r"libliar\.so"), wheel.member_buffer(m) as buf:
            bytes(buf[:])


@pytest.mark.network
def test_truncated_wheel_is_a_clean_error(bitsandbytes_linux_wheel: Path, tmp_path: Path) -> None:
    cut = tmp_path / "cut-1.0-py3-none-any.whl"
    with bitsandbytes_linux_wheel.open("rb") as f:
        cut.write_bytes(f.read(1 << 20))
    with pytest.raises(WheelError, match="not a readable zip archive"):
        WheelArchive(cut)


def test_not_a_zip_is_a_clean_error(tmp_path: Path) -> None:
    path = tmp_path / "text-1.0-py3-none-any.whl"
    path.write_text("hello\n")
    with pytest.raises(WheelError, match=r"text-1\.0-py3-none-any\.whl: not a readable zip"):
        WheelArchive(path)


def test_stored_member_past_the_end_is_a_clean_error(small_wheel: Path, tmp_path: Path) -> None:
    with WheelArchive(small_wheel) as wheel:
        (m,) = [x for x in wheel.members() if x.name == "demo_pkg/libstored.so"]
    raw = bytearray(small_wheel.read_bytes())
    # point the member's local header at garbage: its signature check must fail cleanly
    raw[m.header_offset : m.header_offset + 4] = b"JUNK"
    broken = tmp_path / small_wheel.name
    broken.write_bytes(bytes(raw))
    with WheelArchive(broken) as wheel:
        (m2,) = [x for x in wheel.members() if x.name == "demo_pkg/libstored.so"]
        with pytest.raises(WheelError, match="bad local header"), wheel.member_buffer(m2):
            pass


@pytest.mark.network
@pytest.mark.parametrize(
    "fixture",
    ["bitsandbytes_linux_wheel", "bitsandbytes_windows_wheel", "cudart_linux_wheel", "cudart_windows_wheel"],
    ids=["bnb-linux", "bnb-windows", "cudart-linux", "cudart-windows"],
)
def test_real_wheel_members_match_zipfile(fixture: str, request: pytest.FixtureRequest) -> None:
    path: Path = request.getfixturevalue(fixture)
    with WheelArchive(path) as wheel, zipfile.ZipFile(path) as z:
        native = list(wheel.native_members())
        assert native, "every one of these wheels ships native libraries"
        for m in native:
            with wheel.member_buffer(m) as buf:
                digest = hashlib.sha256(buf).hexdigest()
            expected = hashlib.sha256()
            with z.open(m.name) as f:
                for chunk in iter(lambda: f.read(1 << 20), b""):
                    expected.update(chunk)
            assert digest == expected.hexdigest(), m.name
        names = {m.name for m in native}
        assert not any(n.endswith((".py", "/METADATA", "/RECORD")) for n in names)


@pytest.mark.parametrize(
    ("name", "head", "expected"),
    [
        ("lib/libfoo.so.12.4.1", b"", True),
        ("bin/cudart64_13.dll", b"", True),
        ("pkg/_C.cpython-312-x86_64-linux-gnu.so", b"", True),
        ("pkg/kernels.fatbin", b"", True),
        ("pkg/blob", b"\xcf\xfa\xed\xfe", True),
        ("pkg/blob", b"\x50\xed\x55\xba\x01\x00\x10\x00", True),
        ("pkg/README", b"hello", False),
        ("pkg/Foo.class", b"\xca\xfe\xba\xbe\x00\x00\x00\x34", False),
        ("pkg/fat", b"\xca\xfe\xba\xbe\x00\x00\x00\x02", True),
    ],
    ids=[
        "versioned-so",
        "dll",
        "extension",
        "fatbin",
        "macho-magic",
        "fatbin-magic",
        "text",
        "java-class",
        "fat-macho",
    ],
)
def test_looks_native(name: str, head: bytes, expected: bool) -> None:
    assert looks_native(name, head) is expected
