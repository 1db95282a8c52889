"""The deterministic zip writer: what stdlib zipfile reads back, the same bytes for the same entries, raw
copies, Zip64 past 65,535 members."""

from __future__ import annotations

import io
import zipfile
import zlib

import pytest

from cudaship.repair.zipwrite import DEFLATED, Entry, write_zip


def _write(entries: list[Entry]) -> bytes:
    out = io.BytesIO()
    n = write_zip(out, entries)
    assert n == len(out.getvalue())
    return out.getvalue()


def test_round_trip_and_determinism() -> None:
    payload = b"cuda " * 1000
    compressor = zlib.compressobj(9, zlib.DEFLATED, -15)
    raw = compressor.compress(b"raw member") + compressor.flush()
    entries = [
        Entry("pkg/a.txt", 0o100644, data=payload),
        Entry("pkg/tiny", 0o100755, data=b"x"),
        Entry("pkg/raw.bin", 0o100644, raw=raw, method=DEFLATED, crc=zlib.crc32(b"raw member"), size=10),
        Entry("pkg/ünïcode.txt", 0, data=b""),
    ]
    blob = _write(entries)
    assert _write(entries) == blob
    with zipfile.ZipFile(io.BytesIO(blob)) as zf:
        assert zf.testzip() is None
        assert [i.filename for i in zf.infolist()] == [e.name for e in entries]
        assert zf.read("pkg/a.txt") == payload
        assert zf.read("pkg/raw.bin") == b"raw member"
        assert zf.getinfo("pkg/tiny").external_attr >> 16 == 0o100755
        assert zf.getinfo("pkg/tiny").compress_type == zipfile.ZIP_STORED  # deflate would grow it
        assert {i.date_time for i in zf.infolist()} == {(1980, 1, 1, 0, 0, 0)}


def test_zip64_member_count() -> None:
    count = 0x10000 + 5
    blob = _write([Entry(f"m/{i}", 0, data=b"") for i in range(count)])
    with zipfile.ZipFile(io.BytesIO(blob)) as zf:
        names = zf.namelist()
    assert len(names) == count and names[-1] == f"m/{count - 1}"


def test_large_members_are_deflated_in_blocks_the_same_on_any_thread_count(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    from cudaship.repair import zipwrite

    data = b"".join(i.to_bytes(4, "little") * 3 + b"kernel" for i in range(1_200_000))  # 21.6 MB
    assert len(data) > 2 * zipwrite.BLOCK
    monkeypatch.setattr(zipwrite, "usable_cpus", lambda: 1)
    one = zipwrite.deflate(data)
    monkeypatch.setattr(zipwrite, "usable_cpus", lambda: 3)
    three = zipwrite.deflate(data)
    assert one == three
    inflater = zlib.decompressobj(-15)
    assert inflater.decompress(one) + inflater.flush() == data
    blob = _write([Entry("big.bin", 0, data=data)])
    with zipfile.ZipFile(io.BytesIO(blob)) as zf:
        assert zf.read("big.bin") == data
