"""Archive escapes through toolkit extraction (``toolkit/extract.py``: redist .tar.xz/.zip, PyPI wheels).

tests/toolkit/test_extract.py already covers absolute, ``..``, drive, UNC and backslash names, symlinks and
hard links that leave the destination, writing through a link, device files, FIFOs, several top directories,
member-count and size limits, and the same through an install over HTTP. This module adds what those leave
out (names that collide by case, PAX and GNU long names, link chains, a hard link to a symlink, a later member
replacing a link, compression bombs, the wheel path the PyPI source takes), and checks after every refused
archive that nothing next to the destination changed.
"""

from __future__ import annotations

import tarfile
import zipfile
from pathlib import Path

import pytest

from cudaship.errors import ToolkitError
from cudaship.toolkit.extract import ExtractLimits, extract_archive
from tests.security.builders import DIR, HARDLINK, SYMLINK, Jail, M, tar_bytes, zip_bytes

TOP = "cuda_cudart-linux-x86_64-13.0.96-archive"
OK = M(f"{TOP}/include/cuda_runtime.h", b"// runtime\n")
LONG = "d" * 120


def _extract(tmp_path: Path, filename: str, data: bytes, limits: ExtractLimits | None = None) -> Jail:
    jail = Jail(tmp_path / "jail")
    archive = tmp_path / filename
    archive.write_bytes(data)
    try:
        extract_archive(archive, jail.dest, filename=filename, limits=limits)
    finally:
        jail.assert_untouched()
    return jail


REFUSED = [
    pytest.param(
        "a.tar.xz",
        tar_bytes([OK, M(f"{TOP}/include/CUDA_runtime.h", b"other")]),
        "differ only by case",
        id="tar-case-file",
    ),
    pytest.param(
        "a.tar.xz",
        tar_bytes([OK, M(f"{TOP}/Include/x.h")]),
        "differ only by case",
        id="tar-case-directory",
    ),
    pytest.param(
        "a.zip",
        zip_bytes([M(f"{TOP}/bin/cudart64_13.dll"), M(f"{TOP}/bin/CUDART64_13.DLL")]),
        "differ only by case",
        id="zip-case-file",
    ),
    pytest.param(
        "a.zip",
        zip_bytes([M(f"{TOP}/lib", kind=DIR), M(f"{TOP}/LIB/x.lib")]),
        "differ only by case",
        id="zip-case-directory",
    ),
    pytest.param(
        "a.tar.xz",
        tar_bytes([OK, M(f"{TOP}/harmless.h", pax_path="/tmp/cudaship-pax-evil")]),
        "absolute path",
        id="tar-pax-absolute",
    ),
    pytest.param(
        "a.tar.xz",
        tar_bytes([OK, M(f"{TOP}/harmless.h", pax_path=f"{TOP}/../../outside/evil")]),
        "'..' in path",
        id="tar-pax-dotdot",
    ),
    pytest.param(
        "a.tar.gz",
        tar_bytes([OK, M(f"{TOP}/{LONG}/../../../outside/evil")], mode="w:gz", fmt=tarfile.GNU_FORMAT),
        "'..' in path",
        id="tar-gnu-longname-dotdot",
    ),
    pytest.param(
        "a.tar.xz",
        tar_bytes([OK, M(f"{TOP}/lib/a", "b", SYMLINK), M(f"{TOP}/lib/b", "../../../outside", SYMLINK)]),
        "points outside",
        id="tar-symlink-chain",
    ),
    pytest.param(
        "a.tar.xz",
        tar_bytes(
            [OK, M(f"{TOP}/lib/l", "../include", SYMLINK), M(f"{TOP}/lib/h", f"{TOP}/lib/l", HARDLINK)]
        ),
        "hard link",
        id="tar-hardlink-to-symlink",
    ),
    pytest.param(
        "a.zip",
        zip_bytes([M(f"{TOP}/lib", "include", SYMLINK), M(f"{TOP}/lib/evil.dll")]),
        "through a link",
        id="zip-write-through-link",
    ),
    pytest.param(
        "a.zip",
        zip_bytes([M(f"{TOP}/lib/evil", "..\\..\\..\\outside", SYMLINK)]),
        "points outside",
        id="zip-symlink-backslash-escape",
    ),
    pytest.param(
        "w-1.0-py3-none-any.whl", zip_bytes([M("../outside/evil.so")]), "'..' in path", id="whl-dotdot"
    ),
    pytest.param(
        "w-1.0-py3-none-any.whl", zip_bytes([M("/tmp/cudaship-evil.so")]), "absolute", id="whl-absolute"
    ),
    pytest.param("w-1.0-py3-none-any.whl", zip_bytes([M("C:/evil.dll")]), "drive", id="whl-drive"),
    pytest.param("w-1.0-py3-none-any.whl", zip_bytes([M("\\\\host\\share\\evil.dll")]), "UNC", id="whl-unc"),
    pytest.param(
        "w-1.0-py3-none-any.whl",
        zip_bytes([M("nvidia/cu13/lib/x", "../../../../outside", SYMLINK)]),
        "points outside",
        id="whl-symlink-escape",
    ),
]


@pytest.mark.parametrize(("filename", "data", "message"), REFUSED)
def test_refused_and_nothing_outside(tmp_path: Path, filename: str, data: bytes, message: str) -> None:
    strip = not filename.endswith(".whl")
    jail = Jail(tmp_path / "jail")
    archive = tmp_path / filename
    archive.write_bytes(data)
    with pytest.raises(ToolkitError) as info:
        extract_archive(archive, jail.dest, filename=filename, strip_top=strip)
    jail.assert_untouched()
    text = str(info.value)
    assert message in text and "\n" not in text and filename in text


def test_later_member_replaces_a_link_instead_of_writing_through_it(tmp_path: Path) -> None:
    data = tar_bytes([OK, M(f"{TOP}/lib/x", "../include/cuda_runtime.h", SYMLINK), M(f"{TOP}/lib/x", b"new")])
    jail = _extract(tmp_path, "a.tar.xz", data)
    assert not (jail.dest / "lib" / "x").is_symlink()
    assert (jail.dest / "lib" / "x").read_bytes() == b"new"
    assert (jail.dest / "include" / "cuda_runtime.h").read_bytes() == b"// runtime\n"


@pytest.mark.parametrize(
    ("filename", "make"),
    [
        pytest.param("a.zip", zip_bytes, id="zip"),
        pytest.param("a.tar.xz", tar_bytes, id="tar-xz"),
        pytest.param("a.tar.gz", lambda ms: tar_bytes(ms, mode="w:gz"), id="tar-gz"),
    ],
)
def test_compression_bomb_is_stopped_early(tmp_path: Path, filename: str, make: object) -> None:
    """64 MiB of zeros compress to a few KiB: past 200x the archive's size (+32 MiB) extraction stops."""
    data = make([M(f"{TOP}/lib/bomb.bin", bytes(64 << 20))])  # type: ignore[operator]
    assert len(data) < 512 << 10
    with pytest.raises(ToolkitError, match=r"zip bomb|size limit"):
        _extract(tmp_path, filename, data)
    written = sum(p.stat().st_size for p in (tmp_path / "jail" / "dest").rglob("*") if p.is_file())
    assert written <= (32 << 20) + 200 * len(data)


def test_real_redist_archives_still_extract(tmp_path: Path) -> None:
    """The checks refuse nothing a real-shaped archive holds (links inside, one top directory)."""
    data = tar_bytes(
        [
            M(f"{TOP}/lib", kind=DIR),
            M(f"{TOP}/lib/libcudart.so.13.0.96", b"\x7fELF"),
            M(f"{TOP}/lib/libcudart.so.13", "libcudart.so.13.0.96", SYMLINK),
            M(f"{TOP}/lib/libcudart.so", "libcudart.so.13", SYMLINK),
            OK,
        ]
    )
    jail = _extract(tmp_path, "a.tar.xz", data)
    assert (jail.dest / "lib" / "libcudart.so").resolve() == (
        jail.dest / "lib" / "libcudart.so.13.0.96"
    ).resolve()
    assert zipfile.is_zipfile(tmp_path / "a.tar.xz") is False
