"""Strict extraction: every unsafe member kind is refused with one line, and nothing lands outside."""

from __future__ import annotations

import io
import stat
import tarfile
import zipfile
from pathlib import Path

import pytest

from cudaship.errors import ToolkitError
from cudaship.toolkit import download
from cudaship.toolkit.extract import ExtractLimits, check_member_name, extract_archive
from cudaship.toolkit.install import InstallRequest, install
from cudaship.toolkit.records import Platform, Source
from tests.toolkit.builders import LINUX, WINDOWS, build_redist, serve

TOP = "cuda_cudart-linux-x86_64-13.0.96-archive"


def _tar(*members: tuple[str, str, bytes | str]) -> bytes:
    """(kind, name, data-or-linkname) members; kinds: file, dir, sym, hard, chr, blk, fifo."""
    kinds = {
        "file": tarfile.REGTYPE,
        "dir": tarfile.DIRTYPE,
        "sym": tarfile.SYMTYPE,
        "hard": tarfile.LNKTYPE,
        "chr": tarfile.CHRTYPE,
        "blk": tarfile.BLKTYPE,
        "fifo": tarfile.FIFOTYPE,
    }
    buffer = io.BytesIO()
    with tarfile.open(fileobj=buffer, mode="w:xz", format=tarfile.GNU_FORMAT) as tf:
        for kind, name, payload in members:
            info = tarfile.TarInfo(name)
            info.type = kinds[kind]
            info.mode = 0o644
            if kind == "file":
                assert isinstance(payload, bytes)
                info.size = len(payload)
                tf.addfile(info, io.BytesIO(payload))
            else:
                if kind in ("sym", "hard"):
                    assert isinstance(payload, str)
                    info.linkname = payload
                tf.addfile(info)
    return buffer.getvalue()


def _zip(*members: tuple[str, str, bytes]) -> bytes:
    """(kind, name, data) members; kinds: file, sym (data = target), chr."""
    buffer = io.BytesIO()
    with zipfile.ZipFile(buffer, "w") as zf:
        for kind, name, payload in members:
            info = zipfile.ZipInfo(name)
            mode = {"file": stat.S_IFREG | 0o644, "sym": stat.S_IFLNK | 0o777, "chr": stat.S_IFCHR | 0o644}[
                kind
            ]
            info.external_attr = mode << 16
            info.create_system = 3
            info.compress_type = zipfile.ZIP_DEFLATED
            zf.writestr(info, payload)
    return buffer.getvalue()


OK_FILE = ("file", f"{TOP}/include/ok.h", b"ok\n")

TAR_CASES = [
    pytest.param(_tar(OK_FILE, ("file", f"{TOP}/../../evil.txt", b"x")), "'..' in path", id="tar-dotdot"),
    pytest.param(_tar(("file", "/tmp/cudaship-evil.txt", b"x")), "absolute path", id="tar-absolute"),
    pytest.param(_tar(OK_FILE, ("file", "C:/Windows/evil.dll", b"x")), "Windows drive path", id="tar-drive"),
    pytest.param(_tar(("file", "\\\\server\\share\\evil.txt", b"x")), "UNC path", id="tar-unc"),
    pytest.param(
        _tar(OK_FILE, ("file", f"{TOP}\\..\\..\\evil.txt", b"x")), "'..' in path", id="tar-backslash-dotdot"
    ),
    pytest.param(
        _tar(OK_FILE, ("sym", f"{TOP}/lib/evil", "/etc/passwd")), "absolute target", id="tar-symlink-absolute"
    ),
    pytest.param(
        _tar(OK_FILE, ("sym", f"{TOP}/lib/evil", "../../outside")), "points outside", id="tar-symlink-escape"
    ),
    pytest.param(
        _tar(OK_FILE, ("sym", f"{TOP}/lib/here", "."), ("file", f"{TOP}/lib/here/x.h", b"x")),
        "written through a link",
        id="tar-write-through-link",
    ),
    pytest.param(
        _tar(OK_FILE, ("hard", f"{TOP}/lib/evil", "../../etc/passwd")), "unsafe", id="tar-hardlink-escape"
    ),
    pytest.param(
        _tar(OK_FILE, ("hard", f"{TOP}/lib/evil", f"{TOP}/lib/not-extracted")),
        "outside the files it extracted",
        id="tar-hardlink-unknown",
    ),
    pytest.param(_tar(OK_FILE, ("chr", f"{TOP}/lib/null", b"")), "device file", id="tar-char-device"),
    pytest.param(_tar(OK_FILE, ("blk", f"{TOP}/lib/sda", b"")), "device file", id="tar-block-device"),
    pytest.param(_tar(OK_FILE, ("fifo", f"{TOP}/lib/pipe", b"")), "FIFO", id="tar-fifo"),
    pytest.param(
        _tar(OK_FILE, ("file", "other-top/x.h", b"x")), "more than one top directory", id="tar-two-tops"
    ),
    pytest.param(b"\xfd7zXZ\x00 not really", "not a readable tar archive", id="tar-corrupt"),
]

ZIP_CASES = [
    pytest.param(_zip(OK_FILE, ("file", f"{TOP}/../../evil.txt", b"x")), "'..' in path", id="zip-dotdot"),
    pytest.param(_zip(("file", "/tmp/cudaship-evil.txt", b"x")), "absolute path", id="zip-absolute"),
    pytest.param(_zip(("file", "C:\\Windows\\evil.dll", b"x")), "Windows drive path", id="zip-drive"),
    pytest.param(_zip(("file", "\\\\server\\share\\evil.txt", b"x")), "UNC path", id="zip-unc"),
    pytest.param(_zip(("file", "//server/share/evil.txt", b"x")), "UNC path", id="zip-unc-slashes"),
    pytest.param(
        _zip(OK_FILE, ("file", f"{TOP}\\..\\..\\evil.txt", b"x")), "'..' in path", id="zip-backslash-dotdot"
    ),
    pytest.param(
        _zip(OK_FILE, ("sym", f"{TOP}/lib/evil", b"../../../outside")),
        "points outside",
        id="zip-symlink-escape",
    ),
    pytest.param(
        _zip(OK_FILE, ("sym", f"{TOP}/lib/evil", b"/etc/passwd")),
        "absolute target",
        id="zip-symlink-absolute",
    ),
    pytest.param(_zip(OK_FILE, ("chr", f"{TOP}/lib/null", b"")), "device file", id="zip-device"),
    pytest.param(b"PK\x03\x04 truncated", "not a readable zip archive", id="zip-corrupt"),
]


def _outside_untouched(tmp_path: Path) -> None:
    assert not (tmp_path / "evil.txt").exists()
    assert not (tmp_path / "outside").exists()
    assert not Path("/tmp/cudaship-evil.txt").exists()


@pytest.mark.parametrize(("data", "message"), TAR_CASES)
def test_unsafe_tar_members(tmp_path: Path, data: bytes, message: str) -> None:
    archive = tmp_path / "a.tar.xz"
    archive.write_bytes(data)
    dest = tmp_path / "stage" / "inner"
    dest.mkdir(parents=True)
    with pytest.raises(ToolkitError, match=message) as info:
        extract_archive(archive, dest, filename="a.tar.xz")
    assert str(info.value).startswith("a.tar.xz: ")
    assert "\n" not in str(info.value)
    _outside_untouched(tmp_path)


@pytest.mark.parametrize(("data", "message"), ZIP_CASES)
def test_unsafe_zip_members(tmp_path: Path, data: bytes, message: str) -> None:
    archive = tmp_path / "a.zip"
    archive.write_bytes(data)
    dest = tmp_path / "stage" / "inner"
    dest.mkdir(parents=True)
    with pytest.raises(ToolkitError, match=message) as info:
        extract_archive(archive, dest, filename="a.zip")
    assert str(info.value).startswith("a.zip: ")
    _outside_untouched(tmp_path)


@pytest.mark.parametrize(
    ("suffix", "data"),
    [
        pytest.param("tar.xz", _tar(("file", f"{TOP}/lib/big.bin", b"\0" * 200_000)), id="tar"),
        pytest.param("zip", _zip(("file", f"{TOP}/lib/big.bin", b"\0" * 200_000)), id="zip"),
    ],
)
def test_expansion_past_the_limit(tmp_path: Path, suffix: str, data: bytes) -> None:
    archive = tmp_path / f"bomb.{suffix}"
    archive.write_bytes(data)
    assert len(data) < 2_000  # it really is a small archive that expands a lot
    with pytest.raises(ToolkitError, match="expands"):
        extract_archive(
            archive, tmp_path / "out", filename=archive.name, limits=ExtractLimits(max_total_bytes=100_000)
        )
    assert not (tmp_path / "out" / "lib" / "big.bin").exists() or (
        (tmp_path / "out" / "lib" / "big.bin").stat().st_size <= 100_000
    )


def test_member_count_limit(tmp_path: Path) -> None:
    archive = tmp_path / "many.zip"
    archive.write_bytes(_zip(*[("file", f"{TOP}/include/{i}.h", b"") for i in range(20)]))
    with pytest.raises(ToolkitError, match="more than 10 members"):
        extract_archive(archive, tmp_path / "out", filename="many.zip", limits=ExtractLimits(max_members=10))


def test_links_inside_are_kept(tmp_path: Path) -> None:
    archive = tmp_path / "ok.tar.xz"
    archive.write_bytes(
        _tar(
            ("file", f"{TOP}/lib/libx.so.1", b"elf"),
            ("sym", f"{TOP}/lib/libx.so", "libx.so.1"),
            ("hard", f"{TOP}/lib/copy.so.1", f"{TOP}/lib/libx.so.1"),
        )
    )
    result = extract_archive(archive, tmp_path / "out", filename="ok.tar.xz")
    assert result.links == {"lib/libx.so": "libx.so.1"}
    assert (tmp_path / "out" / "lib" / "copy.so.1").read_bytes() == b"elf"
    assert result.total_bytes == 6


@pytest.mark.parametrize(
    ("name", "expected"),
    [
        pytest.param("a/./b//c", "a/b/c", id="dots-and-doubles"),
        pytest.param("a\\b\\c.dll", "a/b/c.dll", id="backslashes"),
    ],
)
def test_member_names_normalized(name: str, expected: str) -> None:
    assert check_member_name(name) == expected


@pytest.mark.parametrize(
    ("suffix", "platform", "data", "message"),
    [
        pytest.param(
            "tar.xz",
            LINUX,
            _tar(OK_FILE, ("file", f"{TOP}/../../evil.txt", b"x")),
            "'..' in path",
            id="traversal",
        ),
        pytest.param(
            "tar.xz",
            LINUX,
            _tar(OK_FILE, ("sym", f"{TOP}/lib/evil", "../../../outside")),
            "points outside",
            id="symlink-escape",
        ),
        pytest.param(
            "tar.xz",
            LINUX,
            _tar(OK_FILE, ("hard", f"{TOP}/lib/evil", "/etc/passwd")),
            "unsafe",
            id="hardlink-escape",
        ),
        pytest.param(
            "tar.xz", LINUX, _tar(OK_FILE, ("chr", f"{TOP}/lib/null", b"")), "device file", id="device"
        ),
        pytest.param(
            "zip", WINDOWS, _zip(("file", "\\\\server\\share\\evil.dll", b"x")), "UNC path", id="unc"
        ),
        pytest.param("zip", WINDOWS, _zip(("file", "C:\\evil.dll", b"x")), "Windows drive path", id="drive"),
    ],
)
def test_hostile_archives_served_over_http(
    tmp_path: Path, suffix: str, platform: str, data: bytes, message: str
) -> None:
    tree = build_redist(
        tmp_path / "redist",
        platforms=(platform,),
        components=("cuda_cudart",),
        overrides={("cuda_cudart", platform): data},
    )
    dest = tmp_path / "cuda"
    with serve(tree.root) as (base, _), pytest.raises(ToolkitError, match=message):
        install(
            InstallRequest(
                release="13.0.2",
                platform=Platform(platform),
                components=("cudart",),
                dest=dest,
                source=Source.REDIST,
                mirror=base,
                cache_dir=tmp_path / "cache",
                fetch=download.FetchOptions(retries=0),
            )
        )
    assert not dest.exists()
    assert [p.name for p in tmp_path.iterdir() if ".staging-" in p.name] == []
    _outside_untouched(tmp_path)
