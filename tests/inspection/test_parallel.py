"""Reading on several workers (``-j``): the same reports as one worker, every member inflated at most once,
progress hooks that add up, audit of several wheels and of a directory, and pages of the wheel's map dropped
without changing what is read."""

from __future__ import annotations

import base64
import hashlib
import json
import mmap
import threading
import zipfile
from collections import Counter
from collections.abc import Iterator
from pathlib import Path

import pytest

from cudaship.archive.pool import CompressedPages, Workers, worker_count
from cudaship.archive.zip import ZipArchive, ZipMember
from cudaship.checks.engine import AuditObserver, audit_wheels
from cudaship.checks.table import load_policy
from cudaship.cli.main import main
from cudaship.config import load_config
from cudaship.inspection.walk import InspectObserver, inspect_paths
from cudaship.render import audit_json, gpus_json, inspect_json
from cudaship.render.style import Style

EXAMPLE = Path(__file__).resolve().parents[2] / "examples" / "libvecadd.so"


def _b64(data: bytes) -> str:
    return base64.urlsafe_b64encode(hashlib.sha256(data).digest()).rstrip(b"=").decode()


def make_wheel(directory: Path, name: str, libraries: int, *, stored: bool = False) -> Path:
    """A wheel holding ``libraries`` copies of the nvcc-built example library (deflated, or stored), Python
    sources and a dist-info whose RECORD hashes every member."""
    lib = EXAMPLE.read_bytes()
    files: dict[str, bytes] = {f"{name}/__init__.py": b"# package\n" * 50}
    for i in range(libraries):
        files[f"{name}/lib/libvecadd{i}.so"] = lib + bytes(i)  # different sizes: a different order by size
        files[f"{name}/data{i}.bin"] = bytes(range(256)) * (i + 1)
    dist = f"{name}-1.0.dist-info"
    files[f"{dist}/METADATA"] = f"Metadata-Version: 2.1\nName: {name}\nVersion: 1.0\n".encode()
    files[f"{dist}/WHEEL"] = (
        b"Wheel-Version: 1.0\nRoot-Is-Purelib: false\nTag: py3-none-manylinux_2_28_x86_64\n"
    )
    record = [f"{n},sha256={_b64(d)},{len(d)}" for n, d in files.items()] + [f"{dist}/RECORD,,"]
    files[f"{dist}/RECORD"] = ("\n".join(record) + "\n").encode()
    path = directory / f"{name}-1.0-py3-none-manylinux_2_28_x86_64.whl"
    method = zipfile.ZIP_STORED if stored else zipfile.ZIP_DEFLATED
    with zipfile.ZipFile(path, "w", method) as zf:
        for n, d in files.items():
            zf.writestr(n, d)
    return path


class CountingChunks:
    """Counts full reads (not heads) of each member, across threads: streamed (``chunks``) or in one step
    (``small``, when it gives the bytes)."""

    def __init__(self, monkeypatch: pytest.MonkeyPatch) -> None:
        self.full: Counter[str] = Counter()
        self.lock = threading.Lock()
        original = ZipArchive.chunks
        original_small = ZipArchive.small

        def chunks(archive: ZipArchive, member: ZipMember, **kwargs: object) -> Iterator[bytes]:
            if kwargs.get("stop") is None:
                with self.lock:
                    self.full[member.name] += 1
            return original(archive, member, **kwargs)  # type: ignore[arg-type]

        def small(archive: ZipArchive, member: ZipMember) -> bytes | None:
            data = original_small(archive, member)
            if data is not None:
                with self.lock:
                    self.full[member.name] += 1
            return data

        monkeypatch.setattr(ZipArchive, "chunks", chunks)
        monkeypatch.setattr(ZipArchive, "small", small)


def test_inspect_same_report_with_any_number_of_workers(wheels: list[Path], tmp_path: Path) -> None:
    inputs = [*wheels, EXAMPLE, tmp_path / "missing.so"]
    reference = inspect_json.render(inspect_paths(inputs, workers=1), Style())
    for workers in (2, 4, 16):
        assert inspect_json.render(inspect_paths(inputs, workers=workers), Style()) == reference
    assert json.loads(reference)  # the report is real JSON, with the libraries read
    assert reference.count("libvecadd") >= 12


def test_inspect_inflates_each_native_member_once_and_skips_the_rest(
    wheels: list[Path], monkeypatch: pytest.MonkeyPatch
) -> None:
    counting = CountingChunks(monkeypatch)
    report = inspect_paths(wheels, workers=4)
    deflated_libraries = {f"alpha/lib/libvecadd{i}.so" for i in range(5)} | {
        f"gamma/lib/libvecadd{i}.so" for i in range(4)
    }
    read = {f.path for f in report.files if f.container is not None}
    assert {p for p in read if "libvecadd" in p} >= deflated_libraries
    # a stored library is a window on the archive: never streamed; a deflated native one exactly once; data
    # and sources never (data: only its first bytes, to see that it is no binary); METADATA and WHEEL once
    metadata = {
        f"{w}-1.0.dist-info/{leaf}": 1 for w in ("alpha", "beta", "gamma") for leaf in ("METADATA", "WHEEL")
    }
    assert dict(counting.full) == {name: 1 for name in deflated_libraries} | metadata


def test_audit_hashes_every_member_once(wheels: list[Path], monkeypatch: pytest.MonkeyPatch) -> None:
    counting = CountingChunks(monkeypatch)
    report = audit_wheels(wheels, load_policy(load_config(None)), workers=4)
    assert not report.errors
    members = Counter(m for w in wheels for m in zipfile.ZipFile(w).namelist())
    assert (
        counting.full == members
    )  # dist-info read once and hashed from those bytes; every other member once


class AuditRecorder(AuditObserver):
    def __init__(self) -> None:
        self.calls: list[tuple[str, object]] = []
        self.advanced_bytes = 0
        self.active = 0
        self.overlapped = False
        self.lock = threading.Lock()

    def _enter(self) -> None:
        if not self.lock.acquire(blocking=False):  # hooks must never run concurrently
            self.overlapped = True
            self.lock.acquire()

    def wheels_planned(self, count: int, total_bytes: int) -> None:
        self._enter()
        self.calls.append(("wheels_planned", (count, total_bytes)))
        self.lock.release()

    def planned(self, total_bytes: int) -> None:
        self._enter()
        self.calls.append(("planned", total_bytes))
        self.lock.release()

    def advanced(self, nbytes: int) -> None:
        self._enter()
        self.advanced_bytes += nbytes
        self.lock.release()

    def wheel_started(self, path: str) -> None:
        self._enter()
        self.calls.append(("started", Path(path).name))
        self.lock.release()

    def wheel_finished(self, path: str) -> None:
        self._enter()
        self.calls.append(("finished", Path(path).name))
        self.lock.release()


def test_audit_of_several_wheels_at_once(wheels: list[Path]) -> None:
    policy = load_policy(load_config(None))
    reference = audit_json.render(audit_wheels(wheels, policy, workers=1), Style())
    recorder = AuditRecorder()
    report = audit_wheels(wheels, policy, workers=3, observer=recorder)
    assert audit_json.render(report, Style()) == reference
    assert [w.facts.filename for w in report.wheels] == [w.name for w in wheels]  # input order
    total = sum(w.stat().st_size for w in wheels)
    # one progress display: one plan for all wheels, none per wheel, and the bytes add up to it exactly
    assert [c for c in recorder.calls if c[0] in ("wheels_planned", "planned")] == [
        ("wheels_planned", (3, total))
    ]
    assert recorder.advanced_bytes == total
    assert sorted(str(c[1]) for c in recorder.calls if c[0] == "started") == sorted(w.name for w in wheels)
    assert sorted(str(c[1]) for c in recorder.calls if c[0] == "finished") == sorted(w.name for w in wheels)
    assert not recorder.overlapped


def test_audit_of_a_directory_and_a_bad_wheel_among_good_ones(
    wheels: list[Path], tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    bad = wheels[0].parent / "broken-1.0-py3-none-any.whl"
    bad.write_bytes(b"not a zip")
    code = main(["audit", "--no-progress", "-j", "4", "--format", "json", str(wheels[0].parent)])
    out, err = capsys.readouterr()
    assert code == 2  # the broken wheel
    assert [w["filename"] for w in json.loads(out)["wheels"]] == [w.name for w in wheels]
    assert err.count("cudaship: error:") == 1 and "broken-1.0-py3-none-any.whl" in err
    empty = tmp_path / "empty"
    empty.mkdir()
    assert main(["audit", "--no-progress", str(empty)]) == 2
    assert "nothing to audit in this directory: audit reads wheels (.whl) and exported programs" in (
        capsys.readouterr().err
    )


def test_gpus_same_report_with_any_number_of_workers(wheels: list[Path]) -> None:
    from cudaship.analysis.gpus import gpu_report

    directory = wheels[0].parent
    reference = gpus_json.render(gpu_report(inspect_paths([directory], workers=1)))
    assert gpus_json.render(gpu_report(inspect_paths([directory], workers=8))) == reference


def test_inspect_progress_hooks_are_serialised_and_add_up(wheels: list[Path]) -> None:
    class Recorder(InspectObserver):
        def __init__(self) -> None:
            self.total = 0
            self.advanced_bytes = 0
            self.lock = threading.Lock()
            self.overlapped = False
            self.done_paths: list[str] = []

        def _enter(self) -> None:
            if not self.lock.acquire(blocking=False):
                self.overlapped = True
                self.lock.acquire()

        def planned(self, total_bytes: int) -> None:
            self.total = total_bytes

        def advanced(self, nbytes: int) -> None:
            self._enter()
            self.advanced_bytes += nbytes
            self.lock.release()

        def done(self, report: object) -> None:
            self._enter()
            self.done_paths.append(getattr(report, "path", ""))
            self.lock.release()

    recorder = Recorder()
    report = inspect_paths(wheels, workers=4, observer=recorder)
    assert recorder.advanced_bytes == recorder.total == sum(w.stat().st_size for w in wheels)
    assert recorder.done_paths == [f.path for f in report.files]  # in report order
    assert not recorder.overlapped


def test_one_worker_runs_tasks_in_order_in_the_calling_thread() -> None:
    seen: list[tuple[int, str]] = []

    def task(i: int) -> int:
        seen.append((i, threading.current_thread().name))
        return i

    with Workers(1) as pool:
        futures = [pool.submit(task, i) for i in range(5)]
        failing = pool.submit(int, "not a number")
    assert [f.result() for f in futures] == list(range(5))
    assert seen == [(i, threading.current_thread().name) for i in range(5)]
    with pytest.raises(ValueError):
        failing.result()
    assert worker_count(3) == 3 and 1 <= worker_count(None) <= 4


def test_dropping_pages_of_the_wheel_map_changes_nothing_read(tmp_path: Path) -> None:
    data = bytes(range(256)) * 40_000  # 10 MB
    path = tmp_path / "data.bin"
    path.write_bytes(data)
    with open(path, "rb") as f, mmap.mmap(f.fileno(), 0, access=mmap.ACCESS_READ) as m:
        pages = CompressedPages(m, 4096 * 3 + 17, len(data) - 20_000, len(data))
        pages.MARGIN = 0
        pages.STEP = 1 << 20
        for _ in range(10):
            pages.produced(len(data) // 10)
        pages.finished()
        assert m[:] == data  # pages dropped from a read-only map of a file come back from the file
    writable = bytearray(data)
    pages = CompressedPages(writable, 0, len(data), len(data))  # not a map: nothing to drop
    pages.produced(len(data))
    pages.finished()
    assert writable == data
