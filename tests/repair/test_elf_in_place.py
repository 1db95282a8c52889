"""Issue 31, classes 6 and 9: DT_NEEDED and RPATH/RUNPATH edits in place when the new strings fit (the
library keeps its size; ``readelf -d`` is the oracle), patchelf when they do not, and a writer whose largest
buffer is bounded by its block size, not by the member it writes."""

from __future__ import annotations

import io
import json
import random
import shutil
import subprocess
import zipfile
from pathlib import Path

import pytest

from cudaship.cli.main import main
from cudaship.repair import elfedit, zipwrite
from tests.repair.rebuild import rebuild

EXT = f"cudemo/_ext{__import__('sysconfig').get_config_var('EXT_SUFFIX')}"

needs_tools = pytest.mark.skipif(
    shutil.which("gcc") is None or shutil.which("readelf") is None, reason="needs gcc and readelf"
)


def _readelf(path: Path, *flags: str) -> str:
    return subprocess.run(
        ["readelf", "-W", *flags, str(path)], capture_output=True, text=True, check=True
    ).stdout


def _dynamic(path: Path) -> dict[str, list[str]]:
    """NEEDED, RPATH and RUNPATH as readelf -d prints them."""
    out: dict[str, list[str]] = {"NEEDED": [], "RPATH": [], "RUNPATH": []}
    for line in _readelf(path, "-d").splitlines():
        for tag in out:
            if f"({tag})" in line:
                out[tag].append(line.rsplit("[", 1)[1].rstrip("]"))
    return out


OLD = "libalongname-0123abcd.so"


@pytest.fixture
def gcc_library(tmp_path: Path) -> Path:
    """``libuser.so``, built by gcc, needing ``libalongname-0123abcd.so`` (a hashed copy's name) with a
    DT_RUNPATH of ``$ORIGIN/../user.libs``, as auditwheel leaves a library."""
    if shutil.which("gcc") is None:
        pytest.skip("needs gcc")
    (tmp_path / "dep.c").write_text("int dep(void) { return 7; }\n")
    (tmp_path / "user.c").write_text("int dep(void);\nint user(void) { return dep() + 1; }\n")
    cc = ["gcc", "-shared", "-fPIC", "-o"]
    subprocess.run([*cc, str(tmp_path / OLD), str(tmp_path / "dep.c"), f"-Wl,-soname,{OLD}"], check=True)
    subprocess.run(
        [
            *cc,
            str(tmp_path / "libuser.so"),
            str(tmp_path / "user.c"),
            str(tmp_path / OLD),
            "-Wl,--enable-new-dtags,-rpath,$ORIGIN/../user.libs",
        ],
        check=True,
    )
    return tmp_path / "libuser.so"


@needs_tools
def test_shorter_names_are_written_in_place(gcc_library: Path) -> None:
    assert _dynamic(gcc_library)["NEEDED"][0] == OLD
    assert _dynamic(gcc_library)["RUNPATH"] == ["$ORIGIN/../user.libs"]
    size = gcc_library.stat().st_size
    how = elfedit.edit_file(gcc_library, ((OLD, "libalongname.so"),), ("$ORIGIN/../lib",))
    assert how == elfedit.IN_PLACE
    assert gcc_library.stat().st_size == size
    dyn = _dynamic(gcc_library)
    assert dyn["NEEDED"][0] == "libalongname.so" and OLD not in dyn["NEEDED"]
    assert dyn["RUNPATH"] == ["$ORIGIN/../lib"] and dyn["RPATH"] == []
    assert b"0123abcd" not in gcc_library.read_bytes()  # the freed name is zeroed


@needs_tools
def test_a_search_path_is_removed_in_place(gcc_library: Path) -> None:
    size = gcc_library.stat().st_size
    assert elfedit.edit_file(gcc_library, (), ()) == elfedit.IN_PLACE
    assert gcc_library.stat().st_size == size
    assert _dynamic(gcc_library) == {"NEEDED": [OLD], "RPATH": [], "RUNPATH": []}


@needs_tools
def test_strings_that_do_not_fit_fall_back_to_patchelf(gcc_library: Path) -> None:
    from cudaship.repair import elfinplace

    longer = "$ORIGIN/../../nvidia/cuda_runtime/lib:$ORIGIN/../../nvidia/cublas/lib:$ORIGIN"
    with pytest.raises(elfinplace.DoesNotFit, match="the new strings need"):
        elfinplace.patches(gcc_library.read_bytes(), ((OLD, "libalongname.so"),), (longer,))
    size = gcc_library.stat().st_size
    how = elfedit.edit_file(gcc_library, ((OLD, "libalongname.so"),), (longer,))
    assert how == elfedit.PATCHELF
    assert gcc_library.stat().st_size > size
    dyn = _dynamic(gcc_library)
    assert dyn["NEEDED"][0] == "libalongname.so"
    assert dyn["RUNPATH"] == [longer]


@needs_tools
def test_a_name_whose_bytes_a_symbol_shares_is_not_overwritten(tmp_path: Path) -> None:
    """ld merges a string into the tail of a longer one: DT_NEEDED ``dep_impl`` points into the symbol name
    ``my_dep_impl``. Writing over it would rename the symbol, so nothing is freed and patchelf edits."""
    from cudaship.repair import elfinplace

    (tmp_path / "dep.c").write_text("int dep(void) { return 1; }\n")
    (tmp_path / "user.c").write_text("int dep(void);\nint my_dep_impl(void) { return dep(); }\n")
    cc = ["gcc", "-shared", "-fPIC", "-o"]
    subprocess.run(
        [*cc, str(tmp_path / "dep_impl"), str(tmp_path / "dep.c"), "-Wl,-soname,dep_impl"], check=True
    )
    library = tmp_path / "libuser.so"
    subprocess.run([*cc, str(library), str(tmp_path / "user.c"), str(tmp_path / "dep_impl")], check=True)
    data = library.read_bytes()
    assert data.count(b"\0my_dep_impl\0") >= 1 and b"\0dep_impl\0" not in data  # shared, as ld wrote it
    with pytest.raises(elfinplace.DoesNotFit, match="frees 0"):
        elfinplace.patches(data, (("dep_impl", "zz_new"),), None)
    assert elfedit.edit_file(library, (("dep_impl", "zz_new"),), None) == elfedit.PATCHELF
    assert _dynamic(library)["NEEDED"][0] == "zz_new"
    assert " my_dep_impl" in _readelf(library, "--dyn-syms")


@needs_tools
def test_corrupt_tables_give_an_answer_or_a_format_error(gcc_library: Path) -> None:
    """Bytes flipped in the headers, .dynamic, .dynstr and the version tables: every answer is a
    DoesNotFit, a BinaryFormatError, or writes that lie inside the file (never an IndexError, never a
    write past the end)."""
    from cudaship.errors import BinaryFormatError
    from cudaship.repair import elfinplace

    data = gcc_library.read_bytes()
    rng = random.Random(31)
    answers = {"fits": 0, "does not fit": 0, "format error": 0}
    for _ in range(300):
        bad = bytearray(data)
        for _ in range(rng.randint(1, 8)):
            at = rng.randrange(0, min(len(bad), 0x1000)) if rng.random() < 0.5 else rng.randrange(len(bad))
            bad[at] = rng.randrange(256)
        try:
            found = elfinplace.patches(bytes(bad), ((OLD, "libalongname.so"),), ("$ORIGIN/../lib",))
        except elfinplace.DoesNotFit:
            answers["does not fit"] += 1
        except BinaryFormatError:
            answers["format error"] += 1
        else:
            answers["fits"] += 1
            assert all(at >= 0 and at + len(chunk) <= len(bad) for at, chunk in found.writes)
    assert answers["fits"] and sum(answers.values()) == 300


def _repair_json(wheel: Path, out: Path, capsys: pytest.CaptureFixture[str]) -> dict[str, object]:
    code = main(["repair", str(wheel), "-w", str(out), "-f", "json"])
    captured = capsys.readouterr()
    assert code == 0, captured.err
    (result,) = json.loads(captured.out)["wheels"]
    assert isinstance(result, dict)
    return result


@pytest.mark.slow
@needs_tools
def test_nvcc_extension_is_edited_in_place(
    auditwheel_vendored: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """cudemo's extension (nvcc 13.0), as auditwheel left it: DT_NEEDED libcudart-<hash>.so.13 and DT_RPATH
    $ORIGIN/../cudemo.libs. Repair points both elsewhere without growing the library."""
    result = _repair_json(auditwheel_vendored, tmp_path / "out", capsys)
    with zipfile.ZipFile(auditwheel_vendored) as zf:
        before = zf.read(EXT)
    with zipfile.ZipFile(str(result["output"])) as zf:
        after = zf.read(EXT)
    assert len(after) == len(before)
    assert result["edited"] == [
        {"member": EXT, "how": "in place", "before": len(before), "after": len(after)}
    ]
    (tmp_path / "before.so").write_bytes(before)
    (tmp_path / "after.so").write_bytes(after)
    old, new = _dynamic(tmp_path / "before.so"), _dynamic(tmp_path / "after.so")
    hashed = next(n for n in old["NEEDED"] if n.startswith("libcudart-"))
    assert new["NEEDED"] == [("libcudart.so.13" if n == hashed else n) for n in old["NEEDED"]]
    assert new["RPATH"] == ["$ORIGIN/../nvidia/cu13/lib"] and new["RUNPATH"] == []
    # the version need names the library by its new name too, as patchelf's --replace-needed does
    versions = _readelf(tmp_path / "after.so", "-V")
    assert "File: libcudart.so.13" in versions and hashed not in versions
    code = main(["repair", str(auditwheel_vendored), "-w", str(tmp_path / "text")])
    assert code == 0
    assert f"  edited     {EXT}: in place, size unchanged ({len(after):,} bytes)" in capsys.readouterr().out


@pytest.mark.slow
def test_the_writer_holds_no_member_whole(
    auditwheel_vendored: Path,
    tmp_path: Path,
    capsys: pytest.CaptureFixture[str],
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """Class 9 by counting: the extension made 40 MiB larger (trailing bytes no reader looks at), repaired;
    every buffer handed to deflate is at most one block, never the member."""
    with zipfile.ZipFile(auditwheel_vendored) as zf:
        ext = zf.read(EXT)
    padding = random.Random(0).randbytes(1 << 20) * 40  # 40 MiB, no match within deflate's window
    big = rebuild(auditwheel_vendored, tmp_path / "big.whl", replace={EXT: ext + padding})
    sizes: list[int] = []
    deflate = zipwrite.deflate
    piece = getattr(zipwrite, "_deflate_piece", None)

    def counted_deflate(data: bytes) -> bytes:
        sizes.append(len(data))
        return deflate(data)

    def counted_piece(prime: bytes, block: bytes, last: bool) -> bytes:
        sizes.append(len(block))
        assert piece is not None
        return bytes(piece(prime, block, last))

    monkeypatch.setattr(zipwrite, "deflate", counted_deflate)
    if piece is not None:
        monkeypatch.setattr(zipwrite, "_deflate_piece", counted_piece)
    result = _repair_json(big, tmp_path / "out", capsys)
    assert result["verification"]["failed"] == []  # type: ignore[index]
    assert sizes, "nothing was deflated"
    assert max(sizes) <= zipwrite.BLOCK, f"a buffer of {max(sizes):,} bytes for a {len(ext) + len(padding):,}"
    with zipfile.ZipFile(str(result["output"])) as zf:
        assert zf.read(EXT)[len(ext) :] == padding


def test_a_written_file_member_matches_write_zip_and_stays_bounded(tmp_path: Path) -> None:
    """A member given as a file gives the bytes :func:`write_zip` gives for the same bytes in memory, and
    the writer's largest buffer is a few blocks, not the member."""
    data = bytes(range(256)) * (16 << 10) * 16  # 64 MiB
    (tmp_path / "m").write_bytes(data)
    whole, streamed = io.BytesIO(), io.BytesIO()
    zipwrite.write_zip(whole, [zipwrite.Entry("lib.so", 0o755, data=data)])
    writer = zipwrite.ZipWriter(streamed)
    writer.add(zipwrite.Entry("lib.so", 0o755, path=tmp_path / "m"))
    writer.close()
    assert streamed.getvalue() == whole.getvalue()
    assert writer.largest <= (zipwrite.usable_cpus() + 2) * (zipwrite.BLOCK + (32 << 10))
    assert writer.largest < len(data)
