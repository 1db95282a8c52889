"""survey/remote: one wheel read by ranges, only what its rows need, over a local index on 127.0.0.1 (the
provider tests' server: byte ranges, every request and byte counted) or a file:// wheelhouse; the member
cache by sha256 (JSON, never pickle)."""

from __future__ import annotations

import hashlib
import json
import os
import random
import re
import threading
import zipfile
from collections.abc import Callable, Iterator
from http.server import ThreadingHTTPServer
from pathlib import Path

import pytest

from cudaship.inspection.walk import inspect_paths
from cudaship.records.codec import from_json, to_json
from cudaship.records.files import FileReport
from cudaship.survey.records import SurveyOptions, WheelRef
from cudaship.survey.remote import MemberCache, WheelRead, read_wheel
from tests.fixtures.plant import record_hash
from tests.providers.conftest import LocalIndex, _handler


@pytest.fixture
def served(tmp_path: Path) -> Iterator[LocalIndex]:
    """The provider tests' local index (byte ranges; requests, bytes and ranges counted); wheels added with
    ``add`` are at ``{url}/files/NAME`` where ``url`` is the server's root."""
    root = tmp_path / "served"
    root.mkdir()
    index = LocalIndex(root)
    server = ThreadingHTTPServer(("127.0.0.1", 0), _handler(index))
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    index.url = f"http://127.0.0.1:{server.server_address[1]}"
    try:
        yield index
    finally:
        server.shutdown()
        server.server_close()


def build_wheel(
    directory: Path,
    name: str,
    version: str,
    files: dict[str, bytes],
    *,
    tag: str = "py3-none-manylinux_2_28_x86_64",
    requires: tuple[str, ...] = (),
    claims: dict[str, str] | None = None,
) -> Path:
    """A wheel written with zipfile (deflated): METADATA, WHEEL, RECORD (each file's true hash, or the one
    ``claims`` names for it: a lie) and ``files``."""
    dist = re.sub(r"[-_.]+", "_", name)
    path = directory / f"{dist}-{version}-{tag}.whl"
    info = f"{dist}-{version}.dist-info"
    meta = ["Metadata-Version: 2.1", f"Name: {name}", f"Version: {version}"]
    meta += [f"Requires-Dist: {r}" for r in requires]
    members = dict(files)
    members[f"{info}/METADATA"] = ("\n".join(meta) + "\n").encode()
    members[f"{info}/WHEEL"] = f"Wheel-Version: 1.0\nRoot-Is-Purelib: false\nTag: {tag}\n".encode()
    claimed = claims or {}
    record = [f"{m},{claimed.get(m, record_hash(d))},{len(d)}" for m, d in members.items()]
    members[f"{info}/RECORD"] = ("\n".join([*record, f"{info}/RECORD,,"]) + "\n").encode()
    with zipfile.ZipFile(path, "w", compression=zipfile.ZIP_DEFLATED) as zf:
        for member, data in members.items():
            zf.writestr(member, data)
    return path


def noise(n: int, seed: int = 7) -> bytes:
    """``n`` bytes that do not compress (a large non-native member: model weights, data)."""
    return random.Random(seed).randbytes(n)


def ref_for(wheel: Path, url: str, *, size: bool = True) -> WheelRef:
    return WheelRef("pkg", "1.0", wheel.name, url, wheel.stat().st_size if size else None)


def http_ref(index: LocalIndex, wheel: Path, *, size: bool = True) -> WheelRef:
    index.add(wheel)
    return ref_for(wheel, f"{index.url}/files/{wheel.name}", size=size)


def file_ref(wheel: Path) -> WheelRef:
    return ref_for(wheel, wheel.resolve().as_uri())


def options(tmp_path: Path, **kw: object) -> SurveyOptions:
    return SurveyOptions(cache_dir=str(tmp_path / "survey-cache"), **kw)  # type: ignore[arg-type]


LOADER = b"import ctypes, os\nctypes.CDLL(os.path.join(os.path.dirname(__file__), 'libmulti.so'))\n"


@pytest.fixture
def big_data_wheel(tmp_path: Path, nvcc_build: Callable[[str], Path]) -> Path:
    """Two nvcc-built libraries, a tool not native by its name, a Python file that loads one of them, a
    header, and 3 MB of incompressible data between them."""
    (tmp_path / "wheels").mkdir(exist_ok=True)
    lib = nvcc_build("multi_arch").read_bytes()
    files = {
        "pkg/__init__.py": LOADER,
        "pkg/libmulti.so": lib,
        "pkg/data/weights.bin": noise(3 << 20),
        "pkg/include/kernels.h": b"int f(void);\n" * 1000,
        "pkg/bin/tool": nvcc_build("blackwell").read_bytes(),
        "pkg/data/more.bin": noise(1 << 20, seed=8),
    }
    return build_wheel(tmp_path / "wheels", "pkg", "1.0", files)


def test_only_the_directory_and_the_needed_members_are_fetched(
    tmp_path: Path, served: LocalIndex, big_data_wheel: Path
) -> None:
    read = read_wheel(http_ref(served, big_data_wheel), options(tmp_path))
    size = big_data_wheel.stat().st_size
    assert read.fetched_bytes == served.bytes  # every byte the server sent is counted
    assert read.fetched_bytes < size - (3 << 20)  # the weights were never fetched (only the heads of both)
    read_names = {r.name for r in read.results}
    assert {"pkg/libmulti.so", "pkg/bin/tool", "pkg/__init__.py"} <= read_names
    assert "pkg/data/weights.bin" in read.unfetched and "pkg/include/kernels.h" in read.unfetched
    assert {n for n, r in ((r.name, r) for r in read.results) if r.report is not None} == {
        "pkg/libmulti.so",
        "pkg/bin/tool",  # native by its first bytes (no .so in its name): fetched whole after its head
    }
    loads = [r.loads for r in read.results if r.loads is not None]
    assert loads and loads[0].file == "pkg/__init__.py"


def test_file_url_reads_what_http_reads(tmp_path: Path, served: LocalIndex, big_data_wheel: Path) -> None:
    remote = read_wheel(http_ref(served, big_data_wheel), options(tmp_path / "a"))
    local = read_wheel(file_ref(big_data_wheel), options(tmp_path / "b"))

    def facts(read: WheelRead) -> list[tuple[str, bytes | None, FileReport | None]]:
        return sorted(((r.name, r.digest, r.report) for r in read.results), key=lambda t: t[0])

    assert facts(remote) == facts(local)
    assert remote.unfetched == local.unfetched
    assert local.fetched_bytes < big_data_wheel.stat().st_size - (3 << 20)


def test_unknown_size_is_asked_of_the_server(
    tmp_path: Path, served: LocalIndex, big_data_wheel: Path
) -> None:
    read = read_wheel(http_ref(served, big_data_wheel, size=False), options(tmp_path))
    assert read.size == big_data_wheel.stat().st_size
    assert {r.name for r in read.results if r.report} == {"pkg/libmulti.so", "pkg/bin/tool"}


def test_neighbouring_ranges_are_one_request(
    tmp_path: Path, served: LocalIndex, nvcc_build: Callable[[str], Path]
) -> None:
    """Small members side by side (a package's Python files) are fetched in one range; a gap larger than
    GAP between them (a data member) splits the requests."""
    files = {f"pkg/m{i:02}.py": f"import ctypes  # {i}\n".encode() * 50 for i in range(30)}
    files["pkg/data/weights.bin"] = noise(2 << 20)
    files.update({f"pkg/z{i:02}.py": b"import ctypes\n" * 40 for i in range(10)})
    (tmp_path / "w").mkdir()
    wheel = build_wheel(tmp_path / "w", "pkg", "1.0", files)
    ref = http_ref(served, wheel)
    served.ranges.clear()
    read = read_wheel(ref, options(tmp_path))
    member_ranges = len(served.ranges)
    # the tail (directory and dist-info) in one range, the m*.py in one, the z*.py in one (or with the tail)
    assert member_ranges <= 3, served.ranges
    assert len([r for r in read.results if r.name.endswith(".py")]) == 40
    served.ranges.clear()
    read_wheel(ref, options(tmp_path / "nogap"), gap=-1)
    assert len(served.ranges) >= 30  # one request per member when no gap is allowed (the tail's excepted)


def test_file_report_json_round_trip(nvcc_build: Callable[[str], Path]) -> None:
    """The member cache stores a FileReport as JSON and reads back the same record (every nested record,
    enum and tuple), for real nvcc builds of every kind the cache holds."""
    paths = [
        nvcc_build(n) for n in ("multi_arch", "cudart_shared", "compress_size", "static_lib", "fatbin_mixed")
    ]
    for report in inspect_paths(paths, details=True).files:
        doc = json.loads(json.dumps(to_json(report)))
        assert from_json(FileReport, doc) == report


def test_cache_refuses_what_is_not_its_own_entry(tmp_path: Path, nvcc_build: Callable[[str], Path]) -> None:
    report = inspect_paths([nvcc_build("cudart_shared")]).files[0]
    cache = MemberCache(tmp_path)
    digest = hashlib.sha256(b"x").hexdigest()
    cache.put(digest, report, details=False)
    assert cache.get(digest, details=False) == (report, False)
    assert cache.get(digest, details=True) == (None, False)  # stored without details: not enough
    path = cache.path(digest)
    other = hashlib.sha256(b"y").hexdigest()
    os.makedirs(cache.path(other).parent, exist_ok=True)
    cache.path(other).write_bytes(path.read_bytes())  # an entry under another member's name
    assert cache.get(other, details=False) == (None, True)
    path.write_bytes(b'{"version": 1, "report": {"__reduce__": "os.system"}')  # not JSON of a report
    assert cache.get(digest, details=False) == (None, True)
