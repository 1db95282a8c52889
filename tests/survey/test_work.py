"""survey/work: one wheel surveyed into rows, on generated wheels holding real nvcc-built libraries (and one
real PyPI wheel from the test cache) served by a local index on 127.0.0.1. The rows must say what
``cudaship inspect``, ``gpus`` and ``audit`` say of the same wheel read locally; the RECORD check says what it
did not verify; the member cache is read by sha256 and never trusted past a RECORD lie; a wheel that cannot be
read is one error row, never a traceback."""

from __future__ import annotations

import json
import pickle
import zipfile
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest

from cudaship.analysis.gpus import gpu_report
from cudaship.checks.engine import audit_scanned, audit_wheels
from cudaship.checks.table import default_policy
from cudaship.inspection.report import ArchIndex
from cudaship.inspection.walk import inspect_paths
from cudaship.providers.lazywheel import TAIL
from cudaship.providers.options import ProviderOptions
from cudaship.records.binary import Compression, DeviceCodeKind
from cudaship.records.findings import Status
from cudaship.survey.records import ROW_FIELDS, SurveyOptions, WheelOutcome, WheelRef
from cudaship.survey.remote import HEAD, MemberCache, read_wheel
from cudaship.survey.work import scanned_wheel, survey_wheel
from tests.fixtures.plant import record_hash
from tests.providers.conftest import LocalIndex
from tests.survey.test_remote import build_wheel, file_ref, http_ref, noise, options, served

__all__ = ["served"]  # the local index fixture, shared with test_remote

LIBRARIES = ("multi_arch", "cudart_shared", "blackwell", "ptx_only", "compress_size")


@pytest.fixture
def nvcc_wheel(tmp_path: Path, nvcc_build: Callable[[str], Path]) -> Path:
    """Five nvcc-built libraries (static and dynamic cudart, Blackwell SASS, PTX only, ZSTD-compressed), a
    Python file, a header and 3 MB of data no row needs."""
    files = {f"pkg/lib{name}.so": nvcc_build(name).read_bytes() for name in LIBRARIES}
    files["pkg/__init__.py"] = b"import ctypes\n"
    files["pkg/include/k.h"] = b"int f(void);\n" * 100
    files["pkg/data/weights.bin"] = noise(3 << 20)
    (tmp_path / "wheels").mkdir(exist_ok=True)
    return build_wheel(tmp_path / "wheels", "pkg", "1.0", files)


def by_library(outcome: WheelOutcome) -> dict[str, dict[str, Any]]:
    return {row["library"]: row for row in outcome.rows}


def test_rows_agree_with_inspect_and_audit(tmp_path: Path, served: LocalIndex, nvcc_wheel: Path) -> None:
    outcome = survey_wheel(http_ref(served, nvcc_wheel), options(tmp_path))
    assert outcome.error is None
    assert all(tuple(row) == ROW_FIELDS for row in outcome.rows)
    rows = by_library(outcome)
    assert set(rows) == {f"pkg/lib{name}.so" for name in LIBRARIES}
    # the data was never fetched, but for its first bytes (is it a binary?) and what of it lies in the tail
    # fetched with the directory
    assert outcome.fetched_bytes == served.bytes < nvcc_wheel.stat().st_size - (3 << 20) + TAIL + HEAD

    # inspect: the same SASS, PTX, linkage and format per library
    inspected = {f.path: f for f in inspect_paths([nvcc_wheel]).files}
    for path, row in rows.items():
        report = inspected[path]
        archs = ArchIndex(report.device_code)
        assert row["sass"] == list(archs.names(DeviceCodeKind.SASS)), path
        assert row["ptx"] == list(archs.names(DeviceCodeKind.PTX)), path
        assert report.linkage is not None
        assert row["runtime_linkage"] == report.linkage.runtime.value, path
        assert row["cudart_major"] == report.linkage.cudart_major, path
        assert row["format"] == "elf" and row["library_size"] == report.size
        compressed = any(d.compression is not Compression.NONE for d in report.device_code)
        assert row["compressed"] is compressed, path
        assert row["error"] is None and row["min_driver_windows"] is None  # an ELF file runs on Linux only
    assert rows["pkg/libmulti_arch.so"]["runtime_linkage"] == "static"
    assert rows["pkg/libcudart_shared.so"]["runtime_linkage"] == "dynamic"
    assert rows["pkg/libcudart_shared.so"]["cudart_major"] == 13
    assert rows["pkg/libcompress_size.so"]["compressed"] is True
    assert rows["pkg/libptx_only.so"]["ptx_isa"] and not rows["pkg/libptx_only.so"]["sass"]
    kinds = {(a["arch"], a["kind"]) for a in rows["pkg/libmulti_arch.so"]["arch_bytes"]}
    assert kinds == {(s, "sass") for s in rows["pkg/libmulti_arch.so"]["sass"]} | {("compute_90", "ptx")}
    assert all(a["bytes"] > 0 for a in rows["pkg/libmulti_arch.so"]["arch_bytes"])

    # audit: the same checks, but RECORD, which the survey could not verify for the members it did not fetch
    local = audit_wheels([nvcc_wheel], default_policy()).wheels[0]
    surveyed = audit_scanned(
        scanned_wheel(read_wheel(file_ref(nvcc_wheel), options(tmp_path))), default_policy()
    )
    record = "record: hashes and sizes"
    assert [(c.name, c.status, c.severity) for c in surveyed.checks if c.name != record] == [
        (c.name, c.status, c.severity) for c in local.checks if c.name != record
    ]
    assert next(c for c in local.checks if c.name == record).status is Status.PASS
    skipped = next(c for c in surveyed.checks if c.name == record)
    assert skipped.status is Status.SKIP and skipped.reason.startswith("not verified: ")
    assert (
        "pkg/data/weights.bin" in scanned_wheel(read_wheel(file_ref(nvcc_wheel), options(tmp_path))).unfetched
    )
    row = next(iter(rows.values()))
    summary = local.summary
    expected = "fail" if summary.failed else "warn" if summary.warnings else "pass"
    assert (row["audit_verdict"], row["audit_errors"], row["audit_warnings"]) == (
        expected,
        summary.failed,
        summary.warnings,
    )
    assert row["audit_failed"] == sorted({c.name for c in local.checks if c.is_error})
    assert (row["train"], row["train_source"]) == (local.facts.train, local.facts.train_source)
    assert row["cuda_code"] is True and row["native_libraries"] == len(LIBRARIES)
    assert (row["os"], row["machine"], row["python_tag"]) == ("linux", "x86_64", "py3")


@pytest.mark.parametrize("name", ["multi_arch", "blackwell", "ptx_only", "cudart_shared"])
def test_minimum_driver_is_the_one_gpus_gives(
    tmp_path: Path, name: str, nvcc_build: Callable[[str], Path]
) -> None:
    """A wheel of one library: the row's minimum driver is the wheel's in ``cudaship gpus`` (its default
    GPUs for the wheel's machine, no driver given)."""
    wheel = build_wheel(tmp_path, "one", "1.0", {f"one/lib{name}.so": nvcc_build(name).read_bytes()})
    (row,) = survey_wheel(file_ref(wheel), options(tmp_path, audit=False)).rows
    expected = gpu_report(inspect_paths([wheel])).wheels[0].min_driver
    assert row["min_driver_linux"] == expected
    assert row["audit_verdict"] is None and row["audit_failed"] is None  # audit=False
    assert row["train"] is not None or row["train_source"]


def test_a_vendored_library_is_read_once(
    tmp_path: Path, served: LocalIndex, nvcc_build: Callable[[str], Path]
) -> None:
    """Two wheels ship the same library: the second takes its facts from the member cache (by RECORD's
    sha256) and never fetches it."""
    lib = nvcc_build("multi_arch").read_bytes()
    (tmp_path / "w").mkdir()
    first = build_wheel(tmp_path / "w", "first", "1.0", {"first/libk.so": lib})
    second = build_wheel(tmp_path / "w", "second", "2.0", {"second/vendored/libk-1234abcd.so": lib})
    opts = options(tmp_path)
    one = survey_wheel(http_ref(served, first), opts)
    assert (one.read_members, one.cached_members) == (1, 0)
    served.bytes = 0
    two = survey_wheel(http_ref(served, second), opts)
    assert (two.read_members, two.cached_members) == (0, 1)
    assert served.bytes == two.fetched_bytes < len(lib) // 2  # the library's bytes were not fetched
    (a,), (b,) = one.rows, two.rows
    for column in (
        "library_sha256",
        "sass",
        "ptx",
        "ptx_isa",
        "arch_bytes",
        "runtime_linkage",
        "min_driver_linux",
    ):
        assert a[column] == b[column], column
    assert b["library"] == "second/vendored/libk-1234abcd.so" and b["error"] is None
    # the cached facts are the member's, under this wheel's member name
    cached = MemberCache(opts.cache_dir).get(a["library_sha256"], details=False)[0]
    assert cached is not None and cached.path == "first/libk.so"


def test_a_record_hash_lie_is_caught_and_not_cached(
    tmp_path: Path, served: LocalIndex, nvcc_build: Callable[[str], Path]
) -> None:
    lib = nvcc_build("blackwell").read_bytes()
    lie = record_hash(b"another library")
    wheel = build_wheel(tmp_path, "liar", "1.0", {"liar/libk.so": lib}, claims={"liar/libk.so": lie})
    opts = options(tmp_path)
    outcome = survey_wheel(http_ref(served, wheel), opts)
    (row,) = outcome.rows
    assert "RECORD claims" in row["error"] and "not cached" in row["error"]
    assert row["sass"] == ["sm_100", "sm_120"]  # the facts of the bytes read are still reported
    assert row["audit_verdict"] == "fail" and "record: hashes and sizes" in row["audit_failed"]
    assert not list(Path(opts.cache_dir).rglob("*.json"))  # neither under the true hash nor the claimed one
    again = survey_wheel(http_ref(served, wheel), opts)
    assert (again.read_members, again.cached_members) == (1, 0)


def test_a_corrupt_cache_entry_is_read_again(
    tmp_path: Path, served: LocalIndex, nvcc_build: Callable[[str], Path]
) -> None:
    wheel = build_wheel(tmp_path, "pkg", "1.0", {"pkg/libk.so": nvcc_build("ptx_only").read_bytes()})
    opts = options(tmp_path)
    first = survey_wheel(http_ref(served, wheel), opts)
    entry = MemberCache(opts.cache_dir).path(first.rows[0]["library_sha256"])
    for damage in (b"{not json", b'{"version": 1}', entry.read_bytes()[:100], b"[]"):
        entry.write_bytes(damage)
        again = survey_wheel(http_ref(served, wheel), opts)
        assert (again.read_members, again.cached_members) == (1, 0)
        assert again.rows == first.rows
        assert json.loads(entry.read_bytes())["sha256"] == first.rows[0]["library_sha256"]  # written anew
    third = survey_wheel(http_ref(served, wheel), opts)
    assert (third.read_members, third.cached_members) == (0, 1)


def test_a_wheel_without_native_code_is_one_row(tmp_path: Path, served: LocalIndex) -> None:
    wheel = build_wheel(tmp_path, "pure", "1.0", {"pure/__init__.py": b"x = 1\n"}, tag="py3-none-any")
    (row,) = survey_wheel(http_ref(served, wheel), options(tmp_path)).rows
    assert row["library"] is None and row["error"] is None and row["native_libraries"] == 0
    assert row["cuda_code"] is False and row["audit_verdict"] in ("pass", "warn")


def _unreadable(
    kind: str, tmp_path: Path, served: LocalIndex, nvcc_wheel: Path
) -> tuple[WheelRef, SurveyOptions]:
    opts = options(tmp_path)
    if kind == "unreachable":
        return WheelRef(
            "x", "1", "x-1-py3-none-any.whl", "http://127.0.0.1:1/x-1-py3-none-any.whl", 1000
        ), opts
    if kind == "missing":
        return WheelRef(
            "x", "1", "x-1-py3-none-any.whl", f"{served.url}/files/x-1-py3-none-any.whl", 1000
        ), opts
    if kind == "host not allowed":
        return http_ref(served, nvcc_wheel), SurveyOptions(cache_dir=opts.cache_dir, hosts=("pypi.org",))
    if kind == "file missing":
        return WheelRef("x", "1", "x.whl", (tmp_path / "nothing.whl").as_uri()), opts
    if kind == "deadline":
        return http_ref(served, nvcc_wheel), SurveyOptions(cache_dir=opts.cache_dir, deadline_s=0.0)
    if kind == "wrong size":  # the index says it is larger than the file served
        ref = http_ref(served, nvcc_wheel)
        return WheelRef(ref.project, ref.version, ref.filename, ref.url, (ref.size or 0) + 1000), opts
    data = nvcc_wheel.read_bytes()
    damaged = tmp_path / "damaged" / nvcc_wheel.name
    damaged.parent.mkdir()
    damaged.write_bytes(data[: len(data) // 2] if kind == "truncated" else noise(200_000))
    return http_ref(served, damaged), opts


@pytest.mark.parametrize(
    "kind",
    [
        "unreachable",
        "missing",
        "host not allowed",
        "file missing",
        "deadline",
        "wrong size",
        "truncated",
        "not a zip",
    ],
)
def test_an_unreadable_wheel_is_one_error_row(
    tmp_path: Path, served: LocalIndex, nvcc_wheel: Path, kind: str
) -> None:
    ref, opts = _unreadable(kind, tmp_path, served, nvcc_wheel)
    outcome = survey_wheel(ref, opts)
    (row,) = outcome.rows
    assert tuple(row) == ROW_FIELDS
    assert row["library"] is None and row["wheel_key"] == ref.key
    assert outcome.error == row["error"] and "\n" not in row["error"] and "Traceback" not in row["error"]
    expected = {
        "unreachable": "127.0.0.1:1",
        "missing": "404",
        "host not allowed": "not followed",
        "file missing": "nothing.whl",
        "deadline": "deadline",
        "wrong size": "answered with status 206",
        "truncated": "not a readable zip archive",
        "not a zip": "not a readable zip archive",
    }[kind]
    assert expected in row["error"]
    # no answer is worth the engines' one more try; an answer that says no (404) or bad bytes are not
    if kind in ("unreachable", "missing", "truncated", "not a zip", "file missing"):
        assert outcome.transient is (kind == "unreachable")
    if kind in ("truncated", "not a zip", "wrong size"):  # the bytes received before it failed count
        assert outcome.fetched_bytes == served.bytes > 0
    pickle.loads(pickle.dumps(outcome))


def test_survey_wheel_pickles(tmp_path: Path, nvcc_wheel: Path) -> None:
    """What an engine sends to a worker and back: the function, the ref, the options, the outcome."""
    sent = pickle.loads(pickle.dumps((survey_wheel, file_ref(nvcc_wheel), options(tmp_path))))
    outcome = sent[0](sent[1], sent[2])
    assert pickle.loads(pickle.dumps(outcome)).rows == outcome.rows


@pytest.mark.network
def test_a_real_cuda_runtime_wheel_and_a_wheel_vendoring_it(
    tmp_path: Path, served: LocalIndex, cudart_linux_wheel: Path
) -> None:
    """NVIDIA's own CUDA runtime wheel (from the test cache), served locally: its rows agree with inspect and
    audit; a wheel that vendors its libcudart.so.13 names the NVIDIA wheel providing it and takes the
    library's facts from the cache."""
    opts = options(tmp_path)
    outcome = survey_wheel(http_ref(served, cudart_linux_wheel), opts)
    rows = by_library(outcome)
    inspected = {f.path: f for f in inspect_paths([cudart_linux_wheel]).files}
    assert set(rows) == set(inspected)
    for path, row in rows.items():
        archs = ArchIndex(inspected[path].device_code)
        assert (row["sass"], row["ptx"]) == (
            list(archs.names(DeviceCodeKind.SASS)),
            list(archs.names(DeviceCodeKind.PTX)),
        )
    local = audit_wheels([cudart_linux_wheel], default_policy(), providers=ProviderOptions()).wheels[0]
    row = next(iter(rows.values()))
    assert (row["audit_errors"], row["audit_warnings"]) == (local.summary.failed, local.summary.warnings)
    assert rows["nvidia/cu13/lib/libcudart.so.13"]["vendored_nvidia"] is None  # it is the provider itself

    cudart = next(r for r in rows if r.endswith("libcudart.so.13"))
    from cudaship.archive.zip import ZipFile

    with ZipFile(cudart_linux_wheel) as archive:
        member = archive.get(cudart)
        assert member is not None
        data = archive.read(member, 1 << 30)
    vendoring = build_wheel(tmp_path, "vendors", "1.0+cu130", {"vendors/libs/libcudart.so.13": data})
    served.bytes = 0
    second = survey_wheel(http_ref(served, vendoring), opts)
    (vrow,) = second.rows
    assert second.cached_members == 1 and served.bytes < len(data) // 2
    assert vrow["vendored_nvidia"] == "nvidia-cuda-runtime"
    assert vrow["library_sha256"] == rows[cudart]["library_sha256"]


def test_a_member_not_fetched_is_still_checked_against_record_by_name(tmp_path: Path) -> None:
    """A member the survey does not fetch (data) is unverified, not "missing"; one RECORD does not list is
    still "unlisted": the central directory says so without its bytes."""
    wheel = build_wheel(tmp_path, "pkg", "1.0", {"pkg/data/a.bin": noise(1000), "pkg/__init__.py": b""})
    plain = survey_wheel(file_ref(wheel), options(tmp_path))
    assert plain.rows[0]["audit_failed"] == []
    with zipfile.ZipFile(wheel, "a") as zf:
        zf.writestr("pkg/data/unlisted.bin", noise(200_000, seed=3))  # only its head is fetched
    (row,) = survey_wheel(file_ref(wheel), options(tmp_path)).rows
    assert "record: hashes and sizes" in row["audit_failed"]
    read = read_wheel(file_ref(wheel), options(tmp_path))
    audit = audit_scanned(scanned_wheel(read), default_policy())
    record = next(c for c in audit.checks if c.name == "record: hashes and sizes")
    assert [f.message for f in record.evidence] == ["pkg/data/unlisted.bin is in the wheel but not in RECORD"]
    assert "pkg/data/unlisted.bin" in read.unfetched


def test_a_cache_that_cannot_be_written_costs_only_speed(
    tmp_path: Path, nvcc_build: Callable[[str], Path]
) -> None:
    wheel = build_wheel(tmp_path, "pkg", "1.0", {"pkg/libk.so": nvcc_build("ptx_only").read_bytes()})
    blocked = tmp_path / "blocked"
    blocked.write_text("a file where the cache's directory would be")
    outcome = survey_wheel(file_ref(wheel), SurveyOptions(cache_dir=str(blocked)))
    assert outcome.error is None and outcome.rows[0]["error"] is None and outcome.read_members == 1
