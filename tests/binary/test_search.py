"""The fast search (``memmem`` through ctypes) and the parallel device-code scan built on it.

Both search paths (``memmem`` and the portable ``find``) and every thread/chunk split must give exactly the
sequential scan's result: same containers, same rejected candidates, same order, also when containers nest
or overlap across chunk boundaries.
"""

from __future__ import annotations

import itertools
import mmap
import random
import struct
from collections.abc import Callable, Iterator
from pathlib import Path

import pytest

from cudaship.binary import _search
from cudaship.binary._search import native_available, open_finder
from cudaship.binary.devicescan import (
    _Event,
    _PageReleaser,
    _scan,
    _Scanner,
    is_device_section,
    read_device_file,
    scan_containers,
)
from cudaship.binary.fatbin import CONTAINER_MAGIC_BYTES, EntryBudget, read_container
from cudaship.binary.strings import runtime_markers
from cudaship.pages import read_only_map
from cudaship.records.binary import Section
from cudaship.records.buffer import Buffer

Build = Callable[[str], Path]
MAGIC = CONTAINER_MAGIC_BYTES

needs_native = pytest.mark.skipif(not native_available(), reason="no usable memmem in this C library")
PATHS = [
    pytest.param(False, id="portable"),
    pytest.param(True, id="memmem", marks=needs_native),
]


def every_hit(buf: Buffer, needle: bytes) -> list[int]:
    data = bytes(buf)
    hits, at = [], data.find(needle)
    while at >= 0:
        hits.append(at)
        at = data.find(needle, at + 1)
    return hits


# --- the search primitive -------------------------------------------------------------------------


@pytest.mark.parametrize("native", PATHS)
@pytest.mark.parametrize(
    "make",
    [
        pytest.param(bytes, id="bytes"),
        pytest.param(bytearray, id="bytearray"),
        pytest.param(memoryview, id="memoryview"),
        pytest.param(lambda b: memoryview(b"xx" + b)[2:], id="memoryview-slice"),
    ],
)
def test_find_agrees_with_bytes_find_at_every_boundary(native: bool, make: Callable[[bytes], Buffer]) -> None:
    rng = random.Random(11)
    raw = bytearray(rng.randbytes(4096))
    for at in (0, 9, 17, 100, 2045, 4096 - 4):  # the first byte, unaligned, aligned, the very end
        raw[at : at + 4] = MAGIC
    data = bytes(raw)
    expected = every_hit(data, MAGIC)
    assert {0, 9, 17, 100, 2045, 4092} <= set(expected)
    buf = make(data)
    points = sorted({-5, 0, 1, 8, 9, 10, 17, 99, 100, 101, 2044, 2045, 2046, 4091, 4092, 4093, 4096, 10**9})
    with open_finder(buf, MAGIC, native=native) as finder:
        assert finder.releases_gil is native
        for pos in points:
            for stop in points:
                # ``stop`` bounds where a hit may start, not where it ends: a needle straddling it counts
                want = min((h for h in expected if max(pos, 0) <= h < stop), default=-1)
                assert finder.find(pos, stop) == want, (pos, stop)


@pytest.mark.parametrize("native", PATHS)
def test_finder_on_a_mapped_file(native: bool, tmp_path: Path) -> None:
    path = tmp_path / "data.bin"
    data = b"\0" * 70000 + MAGIC + b"\1" * 9 + MAGIC
    path.write_bytes(data)
    with path.open("rb") as f, mmap.mmap(f.fileno(), 0, access=mmap.ACCESS_READ) as m:
        with open_finder(m, MAGIC, native=native) as finder:
            assert finder.find(0, len(data)) == 70000
            assert finder.find(70001, len(data)) == 70013
            if native:  # the export keeps the map open: it cannot be closed under the search
                with pytest.raises(BufferError):
                    m.close()
        m.close()  # released with the context


def test_finder_refuses_use_after_release() -> None:
    with open_finder(b"abc" + MAGIC, MAGIC) as finder:
        assert finder.find(0, 10) == 3
    with pytest.raises(ValueError, match="released"):
        finder.find(0, 10)


@needs_native
def test_a_strided_buffer_falls_back_to_the_portable_search() -> None:
    data = bytes(range(256)) * 8
    strided = memoryview(data)[::2]
    with open_finder(strided, b"\x02\x04", native=None) as finder:
        assert not finder.releases_gil
        assert finder.find(0, len(strided)) == 1
    with pytest.raises(RuntimeError, match="memmem"), open_finder(strided, b"\x02", native=True):
        pass  # pragma: no cover - not reached


def test_environment_switch_disables_memmem(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv(_search.DISABLE_ENV, "1")
    assert not native_available()
    with open_finder(b"xx" + MAGIC, MAGIC) as finder:
        assert not finder.releases_gil
        assert finder.find(0, 6) == 2


@needs_native
def test_threads_loading_memmem_at_once_share_one_loader(monkeypatch: pytest.MonkeyPatch) -> None:
    """Threads that start scanning together load ``memmem`` once: two loads used to give the shared
    ``PyObject_GetBuffer`` two ``Py_buffer`` types, and a search failed with a ctypes ArgumentError."""
    import threading

    monkeypatch.setattr(_search, "_native", None)
    start = threading.Barrier(8)
    loaded: list[object] = []
    found: list[int] = []

    def work() -> None:
        start.wait()
        loaded.append(_search._load_native())
        with open_finder(b"xyz" + MAGIC, MAGIC, native=True) as finder:
            found.append(finder.find(0, 3 + len(MAGIC)))

    threads = [threading.Thread(target=work) for _ in range(8)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    assert len(loaded) == 8 and all(item is loaded[0] for item in loaded)
    assert found == [3] * 8


# --- the parallel scan is the sequential scan -----------------------------------------------------


@pytest.fixture(scope="module")
def blob(nvcc_build: Build) -> bytes:
    """A real three-entry container (sm_80 and sm_100f cubins uncompressed, compute_120 PTX zstd)."""
    return nvcc_build("fatbin_mixed").read_bytes()


def small_container(blob: bytes) -> bytes:
    """The blob's last entry (compressed PTX) alone in a container of its own: a real, small container."""
    last = read_device_file(blob).entries[-1]
    entries = blob[last.offset : len(blob)]
    return struct.pack("<IHHQ", 0xBA55ED50, 1, 16, len(entries)) + entries


def nested(blob: bytes, inner: bytes) -> bytes:
    """The blob with ``inner`` written into its uncompressed sm_100f cubin payload, 8-aligned: still a valid
    container (payloads are not validated), so a scanner that starts inside it finds ``inner``; a sequential
    scan jumps over it."""
    entry = read_device_file(blob).entries[1]
    data = bytearray(blob)
    at = (entry.offset + 256 + 7) & ~7
    assert at + len(inner) < entry.offset + entry.stored_size
    data[at : at + len(inner)] = inner
    return bytes(data)


def layout(blob: bytes, seed: int) -> tuple[bytes, list[Section]]:
    """A few hundred KB mixing every case: containers back to back, padding, nested containers, a container
    swallowing its neighbour (rejected, then the neighbour found), random host bytes with planted magics
    (aligned and unaligned, some with plausible headers), and executable sections (not searched)."""
    rng = random.Random(seed)
    inner = small_container(blob)
    outer = nested(blob, inner)
    swallowing = bytearray(blob + blob)
    struct.pack_into("<Q", swallowing, 8, len(blob) - 16 + 64)
    pieces = [blob, inner, outer, bytes(swallowing), nested(outer, inner)]
    data = bytearray()
    sections: list[Section] = []
    while len(data) < 300_000:
        choice = rng.random()
        if choice < 0.45:
            data += rng.choice(pieces)
        elif choice < 0.6:
            data += b"\0" * rng.choice((8, 16, 24, 3, 5))
        else:
            noise = bytearray(rng.randbytes(rng.randrange(64, 4000)))
            for _ in range(rng.randrange(0, 4)):
                at = rng.randrange(0, len(noise) - 24)
                noise[at : at + 4] = MAGIC
                if rng.random() < 0.5:
                    struct.pack_into("<HHQ", noise, at + 4, 1, 16, rng.randrange(0, 1 << 20))
            if rng.random() < 0.2:
                sections.append(Section(".text", len(data), len(noise), executable=True))
            data += noise
    return bytes(data), sections


def sequential(buf: Buffer, sections: list[Section], native: bool) -> tuple[object, ...]:
    result = _scan(buf, sections, native=native, workers=1)
    return result.containers, result.rejected


@pytest.mark.parametrize("seed", range(6), ids=lambda s: f"seed{s}")
def test_parallel_scan_equals_sequential_on_pathological_layouts(blob: bytes, seed: int) -> None:
    data, sections = layout(blob, seed)
    reference = sequential(data, sections, native=False)
    assert reference[0], "the layout holds containers"
    for native in (False, True) if native_available() else (False,):
        assert sequential(data, sections, native) == reference
        with open_finder(data, MAGIC, native=native) as finder:
            scanner = _Scanner(data, sections, finder)
            walked, _ = scanner.walk(0, len(data), _PageReleaser(data))
            for workers, chunks in ((2, 2), (2, 7), (3, 40), (4, 331), (2, 5000)):
                assert scanner.parallel(workers, chunks) == walked, (native, workers, chunks)


def test_chunk_boundaries_inside_containers_are_really_disputed(blob: bytes) -> None:
    """The layouts above are not easy: workers starting inside a container do find containers nested in it
    that the sequential scan must not report, and the merge drops them."""
    data, sections = layout(blob, 3)
    with open_finder(data, MAGIC, native=False) as finder:
        scanner = _Scanner(data, sections, finder)
        walked, _ = scanner.walk(0, len(data), _PageReleaser(data))
        real = {e.hit for e in walked if e.container is not None}
        chunks = scanner.chunks(331)
        assert len(chunks) > 300
        from_workers = set()
        for lo, hi in chunks:
            events, _ = scanner.walk(lo, hi, _PageReleaser(data))
            from_workers |= {e.hit for e in events if e.container is not None}
        assert from_workers - real, "some worker found a nested container"
        assert scanner.parallel(4, 331) == walked


def test_chunks_cover_the_file_and_balance_searched_bytes(blob: bytes) -> None:
    data, sections = layout(blob, 1)
    with open_finder(data, MAGIC, native=False) as finder:
        scanner = _Scanner(data, sections, finder)
        for count in (1, 2, 3, 8, 100):
            chunks = scanner.chunks(count)
            assert chunks[0][0] == 0 and chunks[-1][1] == len(data)
            assert all(a[1] == b[0] and a[0] < a[1] for a, b in itertools.pairwise(chunks))
            assert len(chunks) <= count + 1


@pytest.fixture()
def mapped_layout(blob: bytes, tmp_path: Path) -> Iterator[tuple[mmap.mmap, bytes, list[Section]]]:
    data, _ = layout(blob, 4)
    big = data * 40  # ~12 MB: pages really released behind the workers
    path = tmp_path / "lib.bin"
    path.write_bytes(big)
    with path.open("rb") as f, mmap.mmap(f.fileno(), 0, access=mmap.ACCESS_READ) as m:
        yield m, big, []


def test_parallel_scan_of_a_mapped_file_with_page_release(
    mapped_layout: tuple[mmap.mmap, bytes, list[Section]], monkeypatch: pytest.MonkeyPatch
) -> None:
    m, data, sections = mapped_layout
    monkeypatch.setattr(_PageReleaser, "WINDOW", 1 << 16)  # release often, so released pages are re-read
    reference = sequential(data, sections, native=False)
    for native in (False, True) if native_available() else (False,):
        assert _scan(m, sections, native=native, workers=1) == _scan(data, sections, native=False, workers=1)
        assert _scan(m, sections, native=native, workers=3) == _scan(data, sections, native=False, workers=1)
    assert scan_containers(m, sections).containers == reference[0]


# --- runtime markers through the same search ------------------------------------------------------


@pytest.mark.parametrize("native", ["", "1"], ids=["memmem", "portable"])
@pytest.mark.parametrize(
    ("data", "ranges", "skip", "expected"),
    [
        pytest.param(b"\0cudaGetExportTable\0", [(0, 20)], (), ("cudaGetExportTable",), id="after-nul"),
        pytest.param(b"cudaGetExportTable\0", [(0, 19)], (), ("cudaGetExportTable",), id="at-range-start"),
        pytest.param(b"xcudaGetExportTable\0", [(0, 20)], (), (), id="inside-a-longer-string"),
        pytest.param(b"\0cudaGetExportTable\0", [(0, 19)], (), (), id="nul-outside-the-range"),
        pytest.param(b"\0cudaGetExportTable\0", [(0, 20)], (1,), (), id="skipped-offset"),
        pytest.param(
            b"x__cudaRegisterFatBinary\0\0__cudaRegisterFatBinary\0\0cudaGetExportTable\0",
            [(0, 200)],
            (),
            ("__cudaRegisterFatBinary", "cudaGetExportTable"),
            id="second-occurrence-counts",
        ),
        pytest.param(b"\0cudaGetExportTablecudaGetExportTable\0", [(0, 100)], (), (), id="run-together"),
    ],
)
def test_runtime_markers_are_whole_strings(
    monkeypatch: pytest.MonkeyPatch,
    native: str,
    data: bytes,
    ranges: list[tuple[int, int]],
    skip: tuple[int, ...],
    expected: tuple[str, ...],
) -> None:
    monkeypatch.setenv(_search.DISABLE_ENV, native)
    assert runtime_markers(data, ranges, skip=skip) == expected


def test_small_container_is_real(blob: bytes) -> None:
    inner = small_container(blob)
    assert read_container(inner, 0).size == len(inner)
    outer = nested(blob, inner)
    assert read_container(outer, 0).size == len(blob)
    assert [c.offset for c in scan_containers(outer).containers] == [0]


def test_only_read_only_maps_have_pages_released(
    blob: bytes, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Dropping pages of a private or anonymous map would bring them back as zeros: such maps are searched
    without releasing anything, and the parallel scan (which re-reads chunk edges) still sees their bytes."""
    data, sections = layout(blob, 5)
    data = data * 8
    path = tmp_path / "lib.bin"
    path.write_bytes(data)
    monkeypatch.setattr(_PageReleaser, "WINDOW", 1 << 12)
    reference = _scan(data, sections, native=False, workers=1)
    anonymous = mmap.mmap(-1, len(data), flags=mmap.MAP_PRIVATE | mmap.MAP_ANONYMOUS)
    anonymous[:] = data
    with path.open("rb") as f, mmap.mmap(f.fileno(), 0, access=mmap.ACCESS_COPY) as private, anonymous:
        shared = mmap.mmap(f.fileno(), 0, access=mmap.ACCESS_READ)
        assert [read_only_map(b) is not None for b in (shared, private, anonymous, data)] == [
            True,
            False,
            False,
            False,
        ]
        for buf in (shared, private, anonymous):
            for workers in (1, 3):
                assert _scan(buf, sections, workers=workers) == reference
        shared.close()


@needs_native
@pytest.mark.parametrize("held", [1, 5, 7, 64], ids=lambda h: f"held{h}")
def test_search_split_at_the_held_window_misses_nothing(monkeypatch: pytest.MonkeyPatch, held: int) -> None:
    """Each search looks at its first ``HELD`` start positions holding the GIL, then at the rest releasing it:
    a needle starting just before, on, or just after that split, or straddling it, is found all the same."""
    monkeypatch.setattr(_search._MemmemFinder, "HELD", held)
    rng = random.Random(held)
    raw = bytearray(rng.randbytes(600))
    for at in (3, 61, 64, 66, 130, 596):
        raw[at : at + 4] = MAGIC
    data = bytes(raw)
    expected = every_hit(data, MAGIC)
    with open_finder(data, MAGIC, native=True) as finder:
        for pos in range(0, 600, 3):
            for stop in (pos + 1, pos + 5, pos + 8, pos + 70, 600, 10**6):
                want = min((h for h in expected if pos <= h < stop), default=-1)
                assert finder.find(pos, stop) == want, (pos, stop)


# --- searching for the header's first 8 bytes outside device sections (all_rejected=False) ----------


def with_device_sections(blob: bytes, seed: int) -> tuple[bytes, list[Section]]:
    """The pathological layout, plus device sections (``.nv_fatbin``, ``__nv_relfatbin``, a Mach-O style
    ``__NV_CUDA,__nv_fatbin``) over parts of it, some overlapping each other, some overlapping the executable
    sections, and bare magics with a wrong version or header size planted inside and outside them."""
    rng = random.Random(seed)
    data, sections = layout(blob, seed)
    raw = bytearray(data)
    for _ in range(60):
        at = rng.randrange(0, len(raw) - 16) & ~7
        raw[at : at + 4] = MAGIC
        struct.pack_into("<HH", raw, at + 4, *rng.choice([(2, 16), (1, 24), (0, 0), (1, 16)]))
    names = [".nv_fatbin", "__nv_relfatbin", "__NV_CUDA,__nv_fatbin", ".nv_fatb", ".rodata"]
    for _ in range(8):
        start = rng.randrange(0, len(raw) - 1000)
        sections.append(Section(rng.choice(names), start, rng.randrange(500, 60_000)))
    return bytes(raw), sections


@pytest.mark.parametrize("seed", range(6), ids=lambda s: f"seed{s}")
def test_header_search_finds_the_same_containers_and_device_rejections(blob: bytes, seed: int) -> None:
    data, sections = with_device_sections(blob, seed)
    everything = _scan(data, sections, native=False, workers=1)
    in_device_sections = tuple(r for r in everything.rejected if is_device_section(r.section))
    assert everything.containers and in_device_sections, "the layout is not trivial"
    assert len(in_device_sections) < len(everything.rejected), "some rejections lie outside device sections"
    for native in (False, True) if native_available() else (False,):
        for workers in (1, 2, 3):
            found = _scan(data, sections, native=native, workers=workers, all_rejected=False)
            assert found.containers == everything.containers, (native, workers)
            assert found.rejected == in_device_sections, (native, workers)
    assert scan_containers(data, sections, all_rejected=False).containers == everything.containers


def test_header_search_skips_bare_magics_outside_device_sections() -> None:
    """Outside device sections a magic not followed by version 1 and header size 16 is not even a candidate
    (counted: the scan validates no header there); inside one it is rejected as before."""
    bad = MAGIC + struct.pack("<HHQ", 2, 16, 0)
    data = b"\0" * 64 + bad + b"\0" * 40 + bad + b"\0" * 40
    fatbin = Section(".nv_fatbin", 120, 60)
    assert [r.offset for r in scan_containers(data, [fatbin]).rejected] == [64, 120]
    calls: list[int] = []
    real_step = _Scanner.step

    def counting_step(self: _Scanner, hit: int, budget: EntryBudget) -> _Event:
        calls.append(hit)
        return real_step(self, hit, budget)

    with pytest.MonkeyPatch.context() as patch:
        patch.setattr(_Scanner, "step", counting_step)
        result = scan_containers(data, [fatbin], all_rejected=False)
    assert [r.offset for r in result.rejected] == [120]
    assert "version 2" in result.rejected[0].reason
    assert calls == [120]
