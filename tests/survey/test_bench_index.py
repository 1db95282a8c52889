"""benchmarks/survey_index.py, the generated index of the survey's scale benchmark: its wheels are valid
(every RECORD hash right, cudaship reads their device code), the vendored runtime is one file wherever it
goes (one per CUDA major and machine), and the server answers PEP 691 JSON, PEP 503 HTML and byte ranges as
the index says."""

from __future__ import annotations

import base64
import hashlib
import json
import shutil
import urllib.request
import zipfile
from pathlib import Path
from typing import Any

import pytest
from benchmarks import survey_index

from cudaship.inspection.scan import scan


@pytest.fixture(scope="module")
def index_dir(tmp_path_factory: pytest.TempPathFactory) -> Path:
    if shutil.which("nvcc") is None and not Path("/usr/local/cuda/bin/nvcc").exists():
        pytest.skip("nvcc builds the index's libraries")
    directory = tmp_path_factory.mktemp("survey-index")
    survey_index.generate(directory, wheels=200, total_mb=8, keep_free_gb=0)
    return directory


def _index(directory: Path) -> dict[str, Any]:
    index: dict[str, Any] = json.loads((directory / "index.json").read_text())
    return index


def _files(directory: Path) -> list[dict[str, Any]]:
    return [f for fs in _index(directory)["projects"].values() for f in fs]


def test_every_record_hash_is_right(index_dir: Path) -> None:
    files = _files(index_dir)
    assert len(files) >= 200
    for f in files:
        path = index_dir / "files" / f["filename"]
        data = path.read_bytes()
        assert len(data) == f["size"] and hashlib.sha256(data).hexdigest() == f["sha256"]
        with zipfile.ZipFile(path) as zf:
            assert zf.testzip() is None
            record = next(n for n in zf.namelist() if n.endswith(".dist-info/RECORD"))
            rows = [line.split(",") for line in zf.read(record).decode().splitlines() if line]
            assert {r[0] for r in rows} == set(zf.namelist())
            for name, digest, length in rows:
                if name == record:
                    continue
                member = zf.read(name)
                expect = (
                    "sha256="
                    + base64.urlsafe_b64encode(hashlib.sha256(member).digest()).rstrip(b"=").decode()
                )
                assert (digest, int(length)) == (expect, len(member)), name


def test_the_scan_reads_the_device_code_of_every_platform(index_dir: Path) -> None:
    seen: set[str] = set()
    for f in _files(index_dir):
        if f["native"] == 0:
            continue
        platform = f["filename"].rsplit("-", 1)[1].removesuffix(".whl")
        if platform in seen:
            continue
        seen.add(platform)
        wheel = scan(index_dir / "files" / f["filename"])
        assert len(wheel.reports) == f["native"], f["filename"]
        assert not wheel.record_problems and not wheel.unreadable
        assert any(r.containers for r in wheel.reports.values()) or "cpu" in str(wheel.reports)
    assert {"manylinux_2_28_x86_64", "win_amd64"} <= seen


def test_vendored_runtimes_are_one_file_wherever_they_go(index_dir: Path) -> None:
    digests: dict[str, set[str]] = {}
    for f in _files(index_dir):
        with zipfile.ZipFile(index_dir / "files" / f["filename"]) as zf:
            for name in zf.namelist():
                base = name.rsplit("/", 1)[-1]
                if base.startswith(("libcudart-", "cudart64_")):
                    digests.setdefault(base, set()).add(hashlib.sha256(zf.read(name)).hexdigest())
    if not digests:
        pytest.skip("no wheel of this small index vendors the runtime")
    assert all(len(d) == 1 for d in digests.values()), digests


def test_a_second_generate_reuses_the_index_and_refuses_other_arguments(index_dir: Path) -> None:
    before = (index_dir / "index.json").stat().st_mtime_ns
    survey_index.generate(index_dir, wheels=200, total_mb=8, keep_free_gb=0)
    assert (index_dir / "index.json").stat().st_mtime_ns == before
    with pytest.raises(SystemExit):
        survey_index.generate(index_dir, wheels=201, total_mb=8, keep_free_gb=0)


def test_the_server_answers_pages_and_ranges(index_dir: Path) -> None:
    index = _index(index_dir)
    project, files = sorted(index["projects"].items())[0]
    with survey_index.serving(index_dir, processes=2) as url:  # two processes share the port
        req = urllib.request.Request(f"{url}/{project}/", headers={"Accept": survey_index.JSON_TYPE})
        with urllib.request.urlopen(req, timeout=30) as r:
            assert r.headers["Content-Type"] == survey_index.JSON_TYPE
            page = json.loads(r.read())
        assert [
            (f["filename"], f["size"], f["upload-time"], f["hashes"]["sha256"]) for f in page["files"]
        ] == [(f["filename"], f["size"], f["upload-time"], f["sha256"]) for f in files]
        with urllib.request.urlopen(f"{url}/{project}/", timeout=30) as r:
            html = r.read().decode()
        assert all(f["filename"] in html for f in files)
        name = files[0]["filename"]
        data = (index_dir / "files" / name).read_bytes()
        base = url.rsplit("/simple", 1)[0]
        for rng, expect in (("bytes=0-99", data[:100]), ("bytes=-22", data[-22:]), ("bytes=10-", data[10:])):
            req = urllib.request.Request(f"{base}/files/{name}", headers={"Range": rng})
            with urllib.request.urlopen(req, timeout=30) as r:
                assert r.status == 206 and r.read() == expect
        with pytest.raises(urllib.error.HTTPError):
            urllib.request.urlopen(f"{base}/files/..%2findex.json", timeout=30)
