"""Which wheels a survey reads: a real index on 127.0.0.1 (PEP 691 JSON, and PEP 503 HTML), URL files and a
wheelhouse, and the filters."""

from __future__ import annotations

import datetime as dt
import hashlib
import threading
from collections.abc import Iterator
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path

import pytest

from cudaship.errors import UsageError
from cudaship.providers.http import Client
from cudaship.survey.sources import (
    Filters,
    from_index,
    from_urls,
    from_wheelhouse,
    read_projects,
    urls_text,
)
from tests.providers.conftest import LocalIndex
from tests.survey.conftest import wheel

LINUX = "py3-none-manylinux_2_28_x86_64"
WINDOWS = "py3-none-win_amd64"


def utc(day: str) -> dt.datetime:
    return dt.datetime.fromisoformat(day).replace(tzinfo=dt.timezone.utc)


@pytest.fixture
def index(local_index: LocalIndex, tmp_path: Path) -> LocalIndex:
    """Two projects: ``cuda-kern`` 1.0 (2025), 2.0 (2026, Linux and Windows), 3.0rc1 (pre-release), 0.5
    (yanked), 2.1 (no upload time, Linux); ``other`` 1.0 (pure)."""
    w = tmp_path / "w"
    local_index.add(wheel(w, "cuda-kern", "1.0"), uploaded="2025-03-01T10:00:00Z")
    local_index.add(wheel(w, "cuda-kern", "2.0"), uploaded="2026-02-01T10:00:00.123456Z")
    local_index.add(wheel(w, "cuda-kern", "2.0", WINDOWS), uploaded="2026-02-01T11:00:00Z")
    local_index.add(wheel(w, "cuda-kern", "3.0rc1"), uploaded="2026-06-01T00:00:00Z")
    local_index.add(wheel(w, "cuda-kern", "0.5"), yanked=True, uploaded="2024-01-01T00:00:00Z")
    local_index.add(wheel(w, "cuda-kern", "2.1"))
    local_index.add(wheel(w, "other", "1.0", "py3-none-any", native=0), uploaded="2026-01-01T00:00:00Z")
    return local_index


def names(selection: object) -> list[str]:
    return [r.filename for r in selection.refs]  # type: ignore[attr-defined]


def test_an_index_lists_every_wheel_but_the_yanked_in_canonical_order(index: LocalIndex) -> None:
    client = Client()
    s = from_index(index.url, ["Other", "cuda_kern"], Filters(), client=client)
    assert names(s) == [
        "cuda_kern-3.0rc1-py3-none-manylinux_2_28_x86_64.whl",
        "cuda_kern-2.1-py3-none-manylinux_2_28_x86_64.whl",
        "cuda_kern-2.0-py3-none-manylinux_2_28_x86_64.whl",
        "cuda_kern-2.0-py3-none-win_amd64.whl",
        "cuda_kern-1.0-py3-none-manylinux_2_28_x86_64.whl",
        "other-1.0-py3-none-any.whl",
    ]
    assert (s.listed, s.yanked, s.filtered) == (7, 1, 0)
    assert s.page_requests == 2 and client.fetched.requests == 2  # the pages only: no wheel is read here
    ref = s.refs[2]
    assert ref.project == "cuda-kern" and ref.version == "2.0" and ref.upload_time == "2026-02-01T10:00:00Z"
    assert ref.sha256 and ref.size and ref.url.endswith("/files/" + ref.filename)
    assert s.total_bytes == sum(r.size or 0 for r in s.refs) > 0
    assert index.url.split("//")[1].split(":")[0] in (s.hosts or ())


def test_latest_platform_and_pre(index: LocalIndex) -> None:
    latest = from_index(index.url, ["cuda-kern"], Filters(latest=1))
    assert names(latest) == ["cuda_kern-2.1-py3-none-manylinux_2_28_x86_64.whl"]  # 3.0rc1 does not count
    windows = from_index(index.url, ["cuda-kern"], Filters(latest=1, platforms=("windows",)))
    assert names(windows) == ["cuda_kern-2.0-py3-none-win_amd64.whl"]  # the newest version with such a wheel
    pre = from_index(index.url, ["cuda-kern"], Filters(latest=2, pre=True, platforms=("linux",)))
    assert [r.version for r in pre.refs] == ["3.0rc1", "2.1"]
    pure = from_index(index.url, ["cuda-kern", "other"], Filters(platforms=("any",)))
    assert names(pure) == ["other-1.0-py3-none-any.whl"] and pure.filtered == 5


def test_upload_dates_keep_undated_files_and_count_them(index: LocalIndex) -> None:
    s = from_index(
        index.url,
        ["cuda-kern"],
        Filters(uploaded_after=utc("2026-01-01"), uploaded_before=utc("2026-06-01")),
    )
    assert [r.version for r in s.refs] == ["2.1", "2.0", "2.0"]  # 3.0rc1 at the cut-off is out; 2.1: undated
    assert s.undated == 1 and s.filtered == 2


def test_an_unknown_project_is_bad_input(index: LocalIndex) -> None:
    with pytest.raises(UsageError, match="no project 'no-such-thing' on this index"):
        from_index(index.url, ["cuda-kern", "no-such-thing"], Filters())


def test_an_index_that_cannot_be_reached_is_bad_input() -> None:
    with pytest.raises(UsageError, match=r"--index-url http://127\.0\.0\.1:9/simple"):
        from_index("http://127.0.0.1:9/simple", ["x"], Filters())


@pytest.fixture
def html_index(index: LocalIndex) -> Iterator[str]:
    """A PEP 503 (HTML only) index of the same files: hashes in URL fragments, ``data-yanked``."""
    root = index.root

    class Handler(BaseHTTPRequestHandler):
        def log_message(self, format: str, *args: object) -> None:
            pass

        def do_GET(self) -> None:
            project = self.path.strip("/").split("/")[-1]
            anchors = []
            for whl in sorted(root.glob("*.whl")):
                if whl.name.split("-")[0].replace("_", "-") != project:
                    continue
                digest = hashlib.sha256(whl.read_bytes()).hexdigest()
                yanked = " data-yanked=''" if (root / (whl.name + ".yanked")).exists() else ""
                anchors.append(
                    f'<a href="{index.url}/../files/{whl.name}#sha256={digest}"{yanked}>{whl.name}</a>'
                )
            body = f"<!DOCTYPE html><html><body>{'<br/>'.join(anchors)}</body></html>".encode()
            self.send_response(200 if anchors else 404)
            self.send_header("Content-Type", "text/html; charset=utf-8")
            self.send_header("Content-Length", str(len(body)))
            self.end_headers()
            self.wfile.write(body)

    server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
    threading.Thread(target=server.serve_forever, daemon=True).start()
    try:
        yield f"http://127.0.0.1:{server.server_address[1]}/simple"
    finally:
        server.shutdown()
        server.server_close()


def test_a_pep503_html_index(html_index: str, index: LocalIndex) -> None:
    s = from_index(html_index, ["cuda-kern"], Filters(latest=1), allowed_hosts=["127.0.0.1"])
    (ref,) = s.refs
    assert ref.filename == "cuda_kern-2.1-py3-none-manylinux_2_28_x86_64.whl"
    assert ref.sha256 == hashlib.sha256((index.root / ref.filename).read_bytes()).hexdigest()
    assert ref.size is None and ref.upload_time is None  # PEP 503 gives neither
    assert s.yanked == 1 and s.unsized == 1
    with pytest.raises(UsageError, match="no project 'nope'"):
        from_index(html_index, ["nope"], Filters())


def test_a_url_file(tmp_path: Path) -> None:
    digest = "ab" * 32
    urls = tmp_path / "urls.txt"
    urls.write_text(
        "# CUDA wheels\n\n"
        f"https://files.example.org/p/torch-2.9.0-cp312-cp312-manylinux_2_28_x86_64.whl#sha256={digest}\n"
        "  https://files.example.org/p/torch-2.9.0-cp312-cp312-win_amd64.whl   # Windows\n"
        "file:///srv/w/cupy_cuda12x-13.0.0-cp312-cp312-manylinux2014_aarch64.whl\n"
    )
    s = from_urls(urls, Filters(platforms=("linux",)))
    assert [(r.project, r.sha256) for r in s.refs] == [("cupy-cuda12x", None), ("torch", digest)]
    assert s.refs[1].url.endswith(".whl") and s.refs[1].key == f"sha256:{digest}"
    assert (s.listed, s.filtered) == (3, 1)


def test_a_url_list_written_from_an_index_gives_the_same_wheels_back(
    index: LocalIndex, tmp_path: Path
) -> None:
    chosen = from_index(index.url, ["cuda-kern", "other"], Filters(platforms=("linux", "windows", "any")))
    urls = tmp_path / "urls.txt"
    urls.write_text(urls_text(chosen.refs, ["chosen from\na test index"]))
    lines = urls.read_text().splitlines()
    assert lines[0] == "# chosen from a test index"  # a header line stays one comment line
    assert lines[3].endswith(f" size={chosen.refs[2].size} uploaded=2026-02-01T10:00:00Z")
    assert "uploaded=" not in lines[2]  # 2.1: the index gives no upload time
    again = from_urls(urls, Filters())
    assert again.refs == chosen.refs  # URL, sha256, size, upload time: every field
    assert again.total_bytes == chosen.total_bytes and again.unsized == 0
    dated = from_urls(urls, Filters(uploaded_after=utc("2026-01-01")))
    assert [r.version for r in dated.refs] == ["3.0rc1", "2.1", "2.0", "2.0", "1.0"] and dated.undated == 1


@pytest.mark.parametrize(
    ("text", "message"),
    [
        ("ftp://x/a-1.0-py3-none-any.whl\n", r"urls.txt:1: 'ftp://x/a-1.0-py3-none-any.whl' is not an http"),
        ("# x\nhttps://x/notawheel.tar.gz\n", r"urls.txt:2: 'notawheel.tar.gz' is not a wheel file name"),
        ("https://x/a-1.0-py3-none-any.whl#md5=00\n", r"urls.txt:1: the fragment '#md5=00' is not #sha256="),
        ("https://x/a-1.0-py3-none-any.whl https://x/b-1.0-py3-none-any.whl\n", "more than one URL"),
        ("https://x/a-1.0-py3-none-any.whl size=12x\n", r"urls.txt: line 1: 'size=12x' is neither size="),
        ("https://x/a-1.0-py3-none-any.whl size=1 size=2\n", r"'size=2' is neither size=<bytes> nor"),
        ("https://x/a-1.0-py3-none-any.whl color=red\n", r"'color=red' is neither"),
        (
            "https://x/a-1.0-py3-none-any.whl uploaded=yesterday\n",
            r"urls.txt:1: uploaded= 'yesterday': not a",
        ),
        (b"\xff\xfe", "not UTF-8 text"),
    ],
)
def test_a_bad_url_file_is_one_line(tmp_path: Path, text: str | bytes, message: str) -> None:
    urls = tmp_path / "urls.txt"
    urls.write_bytes(text if isinstance(text, bytes) else text.encode())
    with pytest.raises(UsageError, match=message) as e:
        from_urls(urls, Filters())
    assert "\n" not in str(e.value)


def test_a_missing_url_file_and_a_directory(tmp_path: Path) -> None:
    with pytest.raises(UsageError, match=r"missing\.txt: --urls: cannot read: No such file"):
        from_urls(tmp_path / "missing.txt", Filters())
    with pytest.raises(UsageError, match=r"cannot read: Is a directory|not a regular file"):
        from_urls(tmp_path, Filters())


def test_a_wheelhouse_hashes_its_wheels(tmp_path: Path) -> None:
    house = tmp_path / "house"
    a = wheel(house, "cuda-kern", "1.0")
    wheel(house, "cuda-kern", "1.1", WINDOWS)
    (house / "not-a-wheel.whl").write_bytes(b"x")  # an unreadable name: left out, said
    (house / "sub").mkdir()
    wheel(house / "sub", "deeper", "1.0")  # not walked
    s = from_wheelhouse(house, Filters(platforms=("linux",)))
    (ref,) = s.refs
    assert ref.sha256 == hashlib.sha256(a.read_bytes()).hexdigest() and ref.size == a.stat().st_size
    assert ref.url == a.resolve().as_uri()
    assert s.filtered == 1 and len(s.problems) == 1 and "not-a-wheel.whl" in s.problems[0]


def test_an_unreadable_wheelhouse_is_bad_input(tmp_path: Path) -> None:
    with pytest.raises(UsageError, match="--wheelhouse: cannot read: No such file"):
        from_wheelhouse(tmp_path / "nowhere", Filters())
    (tmp_path / "f").write_text("x")
    with pytest.raises(UsageError, match="--wheelhouse: not a directory"):
        from_wheelhouse(tmp_path / "f", Filters())


def test_a_projects_file(tmp_path: Path) -> None:
    listed = tmp_path / "projects.txt"
    listed.write_text("# the CUDA ones\ntorch\ncupy-cuda12x  # the CUDA 12 build\n\n")
    assert read_projects(listed) == ["torch", "cupy-cuda12x"]
    listed.write_text("torch\nbad/name\n")
    with pytest.raises(UsageError, match="line 2: 'bad/name' is not a project name"):
        read_projects(listed)
