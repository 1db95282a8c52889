"""The test suite's own shared caches: a build or download is made once however many test processes ask
for it at the same time (pytest-xdist workers), and a half-made one is never seen."""

from __future__ import annotations

import multiprocessing
import subprocess
import threading
import zipfile
from pathlib import Path

import pytest

from tests.fixtures import COMPLETE, EVENTS, built_once, content_key
from tests.fixtures import wheels as wheel_fixtures


def _build_counting(directory: str, counter: str) -> str:
    def build(work: Path) -> None:
        with open(counter, "a") as f:
            f.write("built\n")
        (work / "out.bin").write_bytes(b"x" * 4096)

    return str(built_once(Path(directory), build) / "out.bin")


def test_built_once_across_processes(tmp_path: Path) -> None:
    directory, counter = tmp_path / "cache" / "thing-1234", tmp_path / "count.txt"
    context = multiprocessing.get_context("fork")
    with context.Pool(4) as pool:
        outs = pool.starmap(_build_counting, [(str(directory), str(counter))] * 8)
    assert set(outs) == {str(directory / "out.bin")}
    assert counter.read_text() == "built\n"
    assert (directory / COMPLETE).is_file() and (directory / "out.bin").read_bytes() == b"x" * 4096
    assert sorted(p.name for p in directory.parent.iterdir()) == ["thing-1234", "thing-1234.lock"]


def test_failed_build_leaves_nothing_and_is_retried(tmp_path: Path) -> None:
    directory = tmp_path / "thing"

    def broken(work: Path) -> None:
        (work / "half").write_bytes(b"partial")
        raise RuntimeError("compiler crashed")

    with pytest.raises(RuntimeError, match="compiler crashed"):
        built_once(directory, broken)
    assert not directory.exists() and [p.name for p in tmp_path.iterdir()] == ["thing.lock"]
    assert (built_once(directory, lambda work: (work / "ok").write_text("1")) / "ok").read_text() == "1"


def test_content_key_separates_parts() -> None:
    assert content_key("ab", "c") != content_key("a", "bc")
    assert content_key("nvcc 13.0", "-arch=sm_90") == content_key("nvcc 13.0", "-arch=sm_90")


def test_concurrent_wheel_fetch_downloads_once(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("CUDASHIP_TEST_CACHE", str(tmp_path))
    monkeypatch.delenv(EVENTS, raising=False)  # no download of this run: not in its summary
    wheel = wheel_fixtures.RealWheel("demo-pkg", "1.0", "manylinux_2_17_x86_64")
    calls: list[list[str]] = []

    def fake_pip(command: list[str], **_: object) -> subprocess.CompletedProcess[str]:
        calls.append(command)
        dest = Path(command[command.index("--dest") + 1])
        assert dest.parent == tmp_path / "wheels" and dest.name.startswith(".download-")
        (dest / "demo_pkg-1.0-py3-none-manylinux_2_17_x86_64.whl").write_bytes(b"PK\x05\x06" + bytes(18))
        return subprocess.CompletedProcess(command, 0, "", "")

    monkeypatch.setattr(wheel_fixtures.subprocess, "run", fake_pip)
    start = threading.Barrier(6)
    got: list[Path] = []

    def fetch() -> None:
        start.wait()
        got.append(wheel_fixtures.fetch(wheel))

    threads = [threading.Thread(target=fetch) for _ in range(6)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    assert len(calls) == 1
    assert len(got) == 6 and len(set(got)) == 1 and got[0].parent == tmp_path / "wheels"
    assert sorted(p.name for p in (tmp_path / "wheels").iterdir()) == [
        "demo-pkg-1.0-manylinux_2_17_x86_64.lock",
        "demo_pkg-1.0-py3-none-manylinux_2_17_x86_64.whl",
    ]


@pytest.mark.network
def test_wheel_head_holds_the_real_metadata_and_nothing_else(
    cudart_linux_wheel: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """fetch_head's sparse copy: the real size and central directory, the .dist-info members byte for byte,
    holes elsewhere (on disk: what was fetched), and a library member read from it fails its CRC check."""
    monkeypatch.setenv("CUDASHIP_TEST_CACHE", str(tmp_path))
    monkeypatch.delenv(EVENTS, raising=False)
    try:
        head = wheel_fixtures._download_head(wheel_fixtures.WHEELS["cudart_linux_wheel"])
    except OSError as e:
        pytest.skip(f"no range requests to the index here: {e}")
    assert head.name == cudart_linux_wheel.name and head.parent == tmp_path / "wheel-heads"
    assert head.stat().st_size == cudart_linux_wheel.stat().st_size
    assert head.stat().st_blocks * 512 < cudart_linux_wheel.stat().st_size // 4
    with zipfile.ZipFile(head) as part, zipfile.ZipFile(cudart_linux_wheel) as whole:
        assert [(i.filename, i.CRC, i.header_offset) for i in part.infolist()] == [
            (i.filename, i.CRC, i.header_offset) for i in whole.infolist()
        ]
        meta = [n for n in whole.namelist() if n.split("/", 1)[0].endswith(".dist-info")]
        assert any(n.endswith("/METADATA") for n in meta)
        for name in meta:
            assert part.read(name) == whole.read(name)
        library = next(n for n in whole.namelist() if ".so" in n)
        with pytest.raises(zipfile.BadZipFile):
            part.read(library)


def test_wheel_head_ranges_cover_each_member_and_its_local_header() -> None:
    def member(name: str, offset: int, size: int) -> zipfile.ZipInfo:
        info = zipfile.ZipInfo(name)
        info.header_offset, info.compress_size = offset, size
        return info

    near = [member("a.dist-info/RECORD", 5000, 100), member("a.dist-info/METADATA", 2000, 10)]
    assert wheel_fixtures._spans(near, 1 << 30) == [(2000, 5000 + 30 + 18 + 1024 + 100)]
    far = [member("a.dist-info/METADATA", 0, 10), member("a.dist-info/RECORD", 8 << 20, 10)]
    end = (8 << 20) + 100  # the central directory starts there
    assert wheel_fixtures._spans(far, end) == [(0, 30 + 20 + 1024 + 10), (8 << 20, end)]


def _pip_writing(wheels: dict[str, bytes], calls: list[str]) -> object:
    """A stand-in for ``pip download`` (the network is not what is tested here) writing a real zip."""

    def run(command: list[str], **_: object) -> subprocess.CompletedProcess[str]:
        project = command[-1].split("==")[0]
        calls.append(project)
        dest = Path(command[command.index("--dest") + 1])
        name = f"{project.replace('-', '_')}-1.0-py3-none-manylinux_2_17_x86_64.whl"
        with zipfile.ZipFile(dest / name, "w") as zf:
            for member, data in wheels.items():
                zf.writestr(member.replace("PKG", project.replace("-", "_")), data)
        return subprocess.CompletedProcess(command, 0, "", "")

    return run


def test_an_environment_is_kept_without_its_wheels(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """build_env unpacks a wheel it had to download and deletes it; the environment is reused by its pins,
    with no download. One made by an earlier suite (only its file ``complete``, keyed by the wheels' file
    names) is taken as it is, and one made here keeps that file right, so an earlier suite takes it too."""
    from tests.fixtures import envs

    monkeypatch.setenv("CUDASHIP_TEST_CACHE", str(tmp_path))
    monkeypatch.delenv(EVENTS, raising=False)
    calls: list[str] = []
    members = {"PKG/lib/libdemo.so": b"\x7fELF demo", "PKG-1.0.dist-info/METADATA": b"Name: x\n"}
    monkeypatch.setattr(wheel_fixtures.subprocess, "run", _pip_writing(members, calls))
    pins = (
        wheel_fixtures.RealWheel("demo-a", "1.0", "manylinux_2_17_x86_64"),
        wheel_fixtures.RealWheel("demo-b", "1.0", "manylinux_2_17_x86_64"),
    )
    site = envs.build_env("demo", pins)
    assert sorted(calls) == ["demo-a", "demo-b"]
    assert (site / "demo_a" / "lib" / "libdemo.so").read_bytes() == b"\x7fELF demo"
    assert (site / "demo_b-1.0.dist-info" / "RECORD").is_file()
    assert list((tmp_path / "wheels").glob("*.whl")) == []  # and no download directory left behind
    assert [p.name for p in (tmp_path / "wheels").iterdir() if p.name.startswith(".")] == []
    assert envs.build_env("demo", pins) == site and len(calls) == 2
    names = tuple(Path(f"{w.project.replace('-', '_')}-1.0-py3-none-manylinux_2_17_x86_64.whl") for w in pins)
    assert (site.parent / "complete").read_text() == envs._key(names)

    # made by an earlier suite: no pins, its wheels cached
    old = envs.build_env("old", pins[:1])
    cached = wheel_fixtures.fetch(pins[0])
    (old.parent / "pins").unlink()
    (old / "marker").write_text("kept")
    assert envs.build_env("old", pins[:1]) == old and (old / "marker").read_text() == "kept"
    assert (old.parent / "pins").read_text() == envs._spec_key(pins[:1])
    assert (old.parent / "complete").read_text() == envs._key((cached,))


def test_a_variant_environment_records_only_the_disk_it_adds(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A variant environment is its base hard-linked plus one project replaced: what the run's summary counts
    for it is the disk it adds, not its apparent size (issue 35: 29.5 GB printed for 8.8 GB on disk)."""
    import json
    import os

    from tests.fixtures import envs

    monkeypatch.setenv("CUDASHIP_TEST_CACHE", str(tmp_path / "cache"))
    events = tmp_path / "events.jsonl"
    monkeypatch.setenv(EVENTS, str(events))
    big = os.urandom(1 << 20)  # 1 MiB per project, not sparse
    members = {"PKG/lib/libdemo.so": big, "PKG-1.0.dist-info/METADATA": b"Name: x\n"}
    monkeypatch.setattr(wheel_fixtures.subprocess, "run", _pip_writing(members, []))
    pins = tuple(wheel_fixtures.RealWheel(p, "1.0", "manylinux_2_17_x86_64") for p in ("demo-a", "demo-b"))
    base = envs.build_env("base", pins)
    variant = envs.variant_env("variant", base, pins[1])
    assert (variant / "demo_a" / "lib" / "libdemo.so").stat().st_nlink == 2  # shared with the base
    lines = map(json.loads, events.read_text().splitlines())
    made = {e["what"]: e["bytes"] for e in lines if e["kind"] == "env"}
    assert made["base"] >= 2 << 20
    assert 1 << 20 <= made["variant"] < (1 << 20) + (256 << 10)  # its own demo-b, not demo-a again


def test_skip_big_skips_instead_of_downloading(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """CUDASHIP_TEST_SKIP_BIG=1: a big wheel not cached is a skip naming it, with no download; a small one is
    downloaded as usual, a big one already cached is used, and an environment needing a big one downloads
    nothing."""
    monkeypatch.setenv("CUDASHIP_TEST_CACHE", str(tmp_path))
    monkeypatch.setenv(wheel_fixtures.SKIP_BIG, "1")
    monkeypatch.delenv(EVENTS, raising=False)
    calls: list[str] = []
    monkeypatch.setattr(
        wheel_fixtures.subprocess, "run", _pip_writing({"PKG-1.0.dist-info/METADATA": b""}, calls)
    )
    big = wheel_fixtures.RealWheel("demo-big", "1.0", "manylinux_2_17_x86_64", big=True)
    with pytest.raises(
        pytest.skip.Exception, match=r"demo-big 1\.0 .* is a big download and CUDASHIP_TEST_SKIP_BIG"
    ):
        wheel_fixtures.fetch(big)
    assert calls == []
    small = wheel_fixtures.RealWheel("demo-small", "1.0", "manylinux_2_17_x86_64")
    assert wheel_fixtures.fetch(small).is_file() and calls == ["demo-small"]
    monkeypatch.setenv(wheel_fixtures.SKIP_BIG, "0")
    cached = wheel_fixtures.fetch(big)
    monkeypatch.setenv(wheel_fixtures.SKIP_BIG, "1")
    assert wheel_fixtures.fetch(big) == cached and calls == ["demo-small", "demo-big"]
    # an environment that needs a big wheel not cached: skipped before any of its wheels is downloaded
    from tests.fixtures import envs

    other = wheel_fixtures.RealWheel("demo-other", "1.0", "manylinux_2_17_x86_64", big=True)
    tiny = wheel_fixtures.RealWheel("demo-tiny", "1.0", "manylinux_2_17_x86_64")
    with pytest.raises(pytest.skip.Exception, match="demo-other"):
        envs.build_env("needs-big", (tiny, other))
    assert calls == ["demo-small", "demo-big"]
