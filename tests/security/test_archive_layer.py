"""The archive layer (:mod:`cudaship.archive`) against hostile zips and tars, and every reader that uses it:
inspect's and the audit's wheel reading, ``program inspect``'s ``.pt2`` and toolkit extraction.

Work is bounded by counting, never by timing: the bytes a read produced (``ZipArchive.produced``, the tar
stream's ``produced``) and tracemalloc's peak.
"""

from __future__ import annotations

import bz2
import io
import struct
import tarfile
import tracemalloc
import zipfile
from collections.abc import Callable
from pathlib import Path

import pytest

from cudaship.archive.limits import CHUNK, ArchiveLimits
from cudaship.archive.zip import ZipArchive
from cudaship.errors import ArchiveError, ToolkitError
from cudaship.inspection.pt2 import read_pt2
from cudaship.inspection.scan import scan as scan_wheel
from cudaship.inspection.walk import inspect_paths
from cudaship.toolkit.extract import extract_archive
from tests.security.builders import HARDLINK, SYMLINK, Jail, M, tar_bytes, zip_bytes

ELF_HEAD = b"\x7fELF\x02\x01\x01" + bytes(9)
BOMB = 96 << 20  #: bytes of zeros in a bomb member: over the 32 MiB floor, so only the ratio lets it through
TOP = "cuda_cudart-linux-x86_64-13.0.96-archive"


def _zip(members: list[tuple[str, bytes, int]]) -> bytes:
    out = io.BytesIO()
    with zipfile.ZipFile(out, "w") as zf:
        for name, data, method in members:
            zf.writestr(zipfile.ZipInfo(name), data, compress_type=method)
    return out.getvalue()


def _forge_size(data: bytes, name: str, size: int) -> bytes:
    """The zip with ``name``'s uncompressed size (local header and central directory) set to ``size``."""
    out = bytearray(data)
    raw = name.encode()
    at = 0
    while (at := out.find(b"PK\x03\x04", at)) >= 0:
        if out[at + 30 : at + 30 + len(raw)] == raw:
            struct.pack_into("<I", out, at + 22, size)
        at += 4
    at = 0
    while (at := out.find(b"PK\x01\x02", at)) >= 0:
        if out[at + 46 : at + 46 + len(raw)] == raw:
            struct.pack_into("<I", out, at + 24, size)
        at += 4
    return bytes(out)


def _bomb_zip(method: int, name: str = "pkg/libbomb.so", declared: int | None = None) -> bytes:
    data = _zip([(name, ELF_HEAD + bytes(BOMB - len(ELF_HEAD)), method)])
    return _forge_size(data, name, declared) if declared is not None else data


def _peak(run: Callable[[], object]) -> int:
    tracemalloc.start()
    try:
        run()
        return tracemalloc.get_traced_memory()[1]
    finally:
        tracemalloc.stop()


METHODS = [
    pytest.param(zipfile.ZIP_DEFLATED, id="deflate"),
    pytest.param(zipfile.ZIP_BZIP2, id="bzip2"),
    pytest.param(zipfile.ZIP_LZMA, id="lzma"),
]


@pytest.fixture(scope="module")
def bombs() -> dict[int, bytes]:
    return {m: _bomb_zip(m) for m in (zipfile.ZIP_DEFLATED, zipfile.ZIP_BZIP2, zipfile.ZIP_LZMA)}


@pytest.mark.parametrize("method", METHODS)
def test_bomb_refused_before_inflating(bombs: dict[int, bytes], method: int) -> None:
    archive = ZipArchive(bombs[method])
    (member,) = archive.files()
    with pytest.raises(ArchiveError, match="zip bomb"):
        list(archive.chunks(member))
    assert archive.produced == 0


@pytest.mark.parametrize("method", METHODS)
def test_declared_size_is_not_trusted(bombs: dict[int, bytes], method: int) -> None:
    """A member that says it is 1 MiB but inflates to 96 MiB: stopped one chunk past what it declares."""
    name = "pkg/libbomb.so"
    archive = ZipArchive(_forge_size(bombs[method], name, 1 << 20))
    (member,) = archive.files()
    produced: list[int] = []

    def drain() -> None:
        with pytest.raises(ArchiveError, match="more data than the declared"):
            for chunk in archive.chunks(member):
                produced.append(len(chunk))

    peak = _peak(drain)
    assert sum(produced) <= (1 << 20) + CHUNK and archive.produced <= (1 << 20) + CHUNK
    assert peak < 16 << 20, f"peak {peak}"  # lzma's 8 MiB dictionary is a constant


@pytest.mark.parametrize("method", METHODS)
def test_ratio_is_checked_against_the_bytes_stored(method: int) -> None:
    """The cap comes from the compressed bytes actually stored, whatever size the member declares: with a
    1 MiB floor and a 10:1 ratio, a member of a few KiB stops at 1 MiB even while declaring 96 MiB."""
    limits = ArchiveLimits(max_ratio=10, ratio_floor=1 << 20, total_floor=1 << 20)
    data = _zip([("pkg/zeros.bin", bytes(BOMB), method)])
    archive = ZipArchive(data, limits=limits)
    (member,) = archive.files()
    with pytest.raises(ArchiveError, match="zip bomb"):
        list(archive.chunks(member))
    assert archive.produced == 0  # refused from the sizes alone
    archive = ZipArchive(_forge_size(data, "pkg/zeros.bin", 1 << 20), limits=limits)
    (member,) = archive.files()
    with pytest.raises(ArchiveError):
        list(archive.chunks(member))
    assert archive.produced <= (1 << 20) + CHUNK


def test_total_budget_over_many_members() -> None:
    """Each member under its own cap, all together over the archive's."""
    limits = ArchiveLimits(max_ratio=100, ratio_floor=4 << 20, total_floor=8 << 20)
    data = _zip([(f"pkg/z{i}.bin", bytes(3 << 20), zipfile.ZIP_DEFLATED) for i in range(8)])
    archive = ZipArchive(data, limits=limits)
    with pytest.raises(ArchiveError, match="in all"):
        for member in archive.files():
            for _ in archive.chunks(member):
                pass
    assert archive.produced <= limits.total_cap(len(data)) + CHUNK


def test_central_directory_entries_sharing_one_local_header_are_refused() -> None:
    """Many central-directory entries pointing at one local header (the overlapping zip bomb): refused as
    zipfile refuses them since 3.12, in one linear pass."""
    one = _zip([("pkg/a.so", b"x" * 1000, zipfile.ZIP_DEFLATED)])
    cd_at = one.find(b"PK\x01\x02")
    eocd_at = one.find(b"PK\x05\x06")
    entry = one[cd_at:eocd_at]
    n = 20_000
    eocd = bytearray(one[eocd_at:])
    struct.pack_into("<HHII", eocd, 8, n, n, len(entry) * n, cd_at)
    forged = one[:cd_at] + entry * n + bytes(eocd)
    with pytest.raises(ArchiveError, match="overlap"):
        ZipArchive(forged)


def test_members_overlapping_the_central_directory_are_refused() -> None:
    data = bytearray(_zip([("pkg/a.so", b"x" * 1000, zipfile.ZIP_STORED)]))
    name = b"pkg/a.so"
    cd_at = data.find(b"PK\x01\x02")
    size = cd_at - (30 + len(name)) + 20  # the data now runs 20 bytes into the central directory
    assert 30 + len(name) + size < len(data)
    struct.pack_into("<II", data, cd_at + 20, size, size)  # compressed, uncompressed
    struct.pack_into("<II", data, 18, size, size)
    assert data[30 : 30 + len(name)] == name
    with pytest.raises(ArchiveError, match="overlaps the central directory"):
        ZipArchive(bytes(data))


@pytest.mark.parametrize("method", METHODS)
def test_inspect_reports_a_lying_member_and_stays_bounded(
    tmp_path: Path, bombs: dict[int, bytes], method: int
) -> None:
    wheel = tmp_path / "bomb-1.0-py3-none-any.whl"
    wheel.write_bytes(_forge_size(bombs[method], "pkg/libbomb.so", 1 << 20))
    report = {}

    def run() -> None:
        report["r"] = inspect_paths([wheel])

    peak = _peak(run)
    (member,) = [f for f in report["r"].files if f.path == "pkg/libbomb.so"]
    assert member.error is not None and "declared" in member.error and "\n" not in member.error
    assert peak < 16 << 20, f"peak {peak}"


@pytest.mark.parametrize("method", METHODS)
def test_audit_scan_reports_a_bomb_member(tmp_path: Path, bombs: dict[int, bytes], method: int) -> None:
    dist = "bomb-1.0.dist-info"
    members = [
        ("pkg/libbomb.so", ELF_HEAD + bytes(BOMB - len(ELF_HEAD)), method),
        (f"{dist}/METADATA", b"Metadata-Version: 2.1\nName: bomb\nVersion: 1.0\n", zipfile.ZIP_DEFLATED),
        (
            f"{dist}/WHEEL",
            b"Wheel-Version: 1.0\nRoot-Is-Purelib: false\nTag: py3-none-any\n",
            zipfile.ZIP_DEFLATED,
        ),
        (f"{dist}/RECORD", b"", zipfile.ZIP_DEFLATED),
    ]
    wheel = tmp_path / "bomb-1.0-py3-none-any.whl"
    wheel.write_bytes(_forge_size(_zip(members), "pkg/libbomb.so", 1 << 20))
    scanned = {}
    peak = _peak(lambda: scanned.setdefault("s", scan_wheel(wheel, workers=1)))
    unreadable = dict(scanned["s"].unreadable)
    assert "declared" in unreadable["pkg/libbomb.so"]
    assert peak < 16 << 20, f"peak {peak}"


@pytest.mark.parametrize("method", METHODS)
def test_pt2_bomb_member_is_a_member_error(bombs: dict[int, bytes], method: int) -> None:
    name = "model/data/aotinductor/model/x.wrapper.so"
    data = _forge_size(_bomb_zip(method, name), name, 1 << 20)
    info = read_pt2(data, "bomb.pt2")
    (member,) = [m for m in info.members if m.name == name]
    assert member.report is not None and member.report.error and "declared" in member.report.error


@pytest.mark.parametrize("method", METHODS)
def test_toolkit_zip_bomb_member(tmp_path: Path, method: int) -> None:
    name = f"{TOP}/lib/libbomb.so"
    data = _forge_size(_bomb_zip(method, name), name, 1 << 20)
    jail = Jail(tmp_path / "jail")
    archive = tmp_path / "a.zip"
    archive.write_bytes(data)
    with pytest.raises(ToolkitError, match="declared"):
        extract_archive(archive, jail.dest, filename="a.zip")
    jail.assert_untouched()


def _long_name_bomb(size: int) -> bytes:
    """A tar whose first header is a GNU long name claiming ``size`` bytes, all zeros, bzip2-compressed."""
    header = tarfile.TarInfo("././@LongLink")
    header.type = tarfile.GNUTYPE_LONGNAME
    header.size = size
    block = header.tobuf(format=tarfile.GNU_FORMAT)
    compressor = bz2.BZ2Compressor(9)
    out = [compressor.compress(block)]
    zeros = bytes(1 << 20)
    for _ in range(size >> 20):
        out.append(compressor.compress(zeros))
    out.append(compressor.flush())
    return b"".join(out)


def test_tar_bz2_long_name_bomb_is_refused_unread(tmp_path: Path) -> None:
    data = _long_name_bomb(64 << 20)
    assert len(data) < 64 << 10  # a few KiB that would become 64 MiB of one name
    jail = Jail(tmp_path / "jail")
    archive = tmp_path / "a.tar.bz2"
    archive.write_bytes(data)

    def run() -> None:
        with pytest.raises(ToolkitError, match="extended tar header"):
            extract_archive(archive, jail.dest, filename="a.tar.bz2")

    peak = _peak(run)
    assert peak < 4 << 20, f"peak {peak}"  # the 64 MiB name was never read
    jail.assert_untouched()


def test_tar_stream_total_is_capped(tmp_path: Path) -> None:
    """A .tar.bz2 of one 96 MiB file of zeros (a few KiB): past 200x its size + 32 MiB, extraction stops,
    counted on the decompressed stream."""
    data = tar_bytes([M(f"{TOP}/lib/zeros.bin", bytes(BOMB))], mode="w:bz2")
    jail = Jail(tmp_path / "jail")
    archive = tmp_path / "a.tar.bz2"
    archive.write_bytes(data)
    with pytest.raises(ToolkitError, match=r"bomb|size limit"):
        extract_archive(archive, jail.dest, filename="a.tar.bz2")
    jail.assert_untouched()


@pytest.mark.parametrize(
    "members",
    [
        pytest.param(
            [
                M(f"{TOP}/a", ".", SYMLINK),
                M(f"{TOP}/b", "a/a/a/a/../../../..", SYMLINK),
            ],
            id="climb-through-dot-links",
        ),
        pytest.param(
            [
                M(f"{TOP}/lib/x", ".", SYMLINK),
                M(f"{TOP}/lib/y", "x/x/x/../../../../..", SYMLINK),
            ],
            id="climb-from-a-subdirectory",
        ),
        pytest.param(
            [
                M(f"{TOP}/lib/later", "d/../../..", SYMLINK),
                M(f"{TOP}/lib/d", ".", SYMLINK),
            ],
            id="link-made-unsafe-by-a-later-link",
        ),
        pytest.param(
            [M(f"{TOP}/loop", "loop", SYMLINK), M(f"{TOP}/x", "loop/y", SYMLINK)],
            id="link-loop",
        ),
    ],
)
@pytest.mark.parametrize("fmt", ["tar.xz", "zip"])
def test_link_chains_that_leave_the_destination(tmp_path: Path, members: list[M], fmt: str) -> None:
    data = tar_bytes(members) if fmt == "tar.xz" else zip_bytes(members)
    jail = Jail(tmp_path / "jail")
    archive = tmp_path / f"a.{fmt}"
    archive.write_bytes(data)
    with pytest.raises(ToolkitError, match=r"outside|links to follow|unsafe"):
        extract_archive(archive, jail.dest, filename=archive.name)
    jail.assert_untouched()


def test_file_then_symlink_then_hard_link_copies_no_host_file(tmp_path: Path) -> None:
    """A file, then a symlink of the same name to a host file, then a hard link to that name: the hard link
    must not copy the host file in (and ``verify`` record its hash)."""
    jail = Jail(tmp_path / "jail")
    secret = jail.root / "sentinel.txt"
    members = [
        M(f"{TOP}/lib/f", b"innocent"),
        M(f"{TOP}/lib/f", str(secret), SYMLINK),
        M(f"{TOP}/lib/copy", f"{TOP}/lib/f", HARDLINK),
    ]
    archive = tmp_path / "a.tar.xz"
    archive.write_bytes(tar_bytes(members))
    with pytest.raises(ToolkitError):
        extract_archive(archive, jail.dest, filename="a.tar.xz")
    jail.assert_untouched()
    copy = jail.dest / "lib" / "copy"
    assert not copy.exists() or b"outside" not in copy.read_bytes()


def test_relative_symlink_over_a_file_then_hard_link(tmp_path: Path) -> None:
    """The same with a relative link that stays inside: the hard link is refused (a link, not a file)."""
    jail = Jail(tmp_path / "jail")
    members = [
        M(f"{TOP}/lib/real", b"data"),
        M(f"{TOP}/lib/f", b"innocent"),
        M(f"{TOP}/lib/f", "real", SYMLINK),
        M(f"{TOP}/lib/copy", f"{TOP}/lib/f", HARDLINK),
    ]
    archive = tmp_path / "a.tar.xz"
    archive.write_bytes(tar_bytes(members))
    with pytest.raises(ToolkitError, match="hard link"):
        extract_archive(archive, jail.dest, filename="a.tar.xz")
    jail.assert_untouched()


def test_safe_link_chains_still_extract(tmp_path: Path) -> None:
    jail = Jail(tmp_path / "jail")
    members = [
        M(f"{TOP}/lib/libcudart.so.13.0.96", b"\x7fELF"),
        M(f"{TOP}/lib/libcudart.so.13", "libcudart.so.13.0.96", SYMLINK),
        M(f"{TOP}/lib/libcudart.so", "libcudart.so.13", SYMLINK),
        M(f"{TOP}/lib64", "lib", SYMLINK),
        M(f"{TOP}/lib/here", "../lib64/../lib/./libcudart.so", SYMLINK),
        M(f"{TOP}/lib/copy.so", f"{TOP}/lib/libcudart.so.13.0.96", HARDLINK),
    ]
    archive = tmp_path / "a.tar.xz"
    archive.write_bytes(tar_bytes(members))
    result = extract_archive(archive, jail.dest, filename="a.tar.xz")
    jail.assert_untouched()
    assert (jail.dest / "lib" / "here").read_bytes() == b"\x7fELF"
    assert result.files["lib/copy.so"] == 4


def _one_member_zip(data: bytes, method: int = zipfile.ZIP_DEFLATED) -> bytes:
    out = io.BytesIO()
    with zipfile.ZipFile(out, "w", method) as zf:
        zf.writestr("pkg/member.txt", data)
    return out.getvalue()


def test_small_members_in_one_step_only_when_nothing_is_unusual() -> None:
    """``ZipArchive.small`` (the audit's one-step read of small members) gives the bytes of a clean stored or
    deflated member and None for anything unusual, so that the chunked read reports it exactly as before."""
    from cudaship.archive.zip import SMALL_MEMBER, ZipArchive

    text = b"import torch\n" * 400
    for method in (zipfile.ZIP_DEFLATED, zipfile.ZIP_STORED):
        archive = ZipArchive(_one_member_zip(text, method))
        (member,) = archive.files()
        assert archive.small(member) == text
        assert archive.produced == len(text)  # counted against the archive's cap, as chunks() counts

    raw = bytearray(_one_member_zip(text))
    archive = ZipArchive(bytes(raw))
    (member,) = archive.files()
    middle = member.data_offset + member.compressed_size // 2
    corrupt = bytearray(raw)
    corrupt[middle] ^= 0xFF
    bad = ZipArchive(bytes(corrupt))
    (bad_member,) = bad.files()
    got = bad.small(bad_member)
    if got is None:  # the long way says what is wrong, as it always did
        with pytest.raises(ArchiveError, match=r"member pkg/member\.txt: "):
            b"".join(bad.chunks(bad_member, verify_crc=False))
    else:  # a flipped byte that still inflates to the declared size: both ways give the same bytes
        assert got == b"".join(bad.chunks(bad_member, verify_crc=False))

    # a size the central directory gets wrong, either way: never the one-step read
    for wrong in (len(text) - 1, len(text) + 1):
        lying = member._replace(size=wrong)
        assert archive.small(lying) is None
        with pytest.raises(ArchiveError, match=r"member pkg/member\.txt: "):
            b"".join(archive.chunks(lying, verify_crc=False))
    # too large for one step, bzip2, or a bad local header: the long way
    big = member._replace(size=SMALL_MEMBER + 1)
    assert archive.small(big) is None
    assert archive.small(member._replace(method=zipfile.ZIP_BZIP2)) is None
    assert archive.small(member._replace(problem="bad local header signature")) is None
