"""The one scan (:func:`cudaship.inspection.scan.scan`): a wheel read once into one record, every member's
hash and size verified against RECORD while it streams, the target platform worked out once, each member's
installed path; an exported program through the same entry point; for inspect, the native members only,
nothing hashed, a damaged wheel reported instead of raised, several wheels started before the first is
finished."""

from __future__ import annotations

import zipfile
from collections.abc import Callable
from pathlib import Path

import pytest

from cudaship.archive.pool import Workers
from cudaship.errors import WheelError
from cudaship.inspection.scan import Purpose, scan, start, target_platform
from cudaship.inspection.wheel import shown_name
from cudaship.records.files import ContainerKind
from cudaship.wheel.records import DistInfo, Metadata, WheelFile
from tests.fixtures.synthetic_wheels import write_wheel

REPO = Path(__file__).resolve().parents[2]
PTE = REPO / "tests" / "program" / "data" / "demo_mlp_cuda.pte"


@pytest.mark.network
@pytest.mark.parametrize(
    "fixture",
    ["cudart_linux_wheel", "cudart_windows_wheel", "bitsandbytes_windows_wheel"],
    ids=["cudart-linux", "cudart-windows", "bitsandbytes-windows"],
)
def test_real_wheels_match_their_record(fixture: str, request: pytest.FixtureRequest) -> None:
    path: Path = request.getfixturevalue(fixture)
    scanned = scan(path)
    assert scanned.record_problems == ()
    assert scanned.unreadable == ()
    with zipfile.ZipFile(path) as zf:
        names = [i.filename for i in zf.infolist() if not i.is_dir()]
    assert sorted(m.name for m in scanned.members) == sorted(names)
    listed = {e.path for e in scanned.dist.record}
    assert listed == set(names)
    assert scanned.dist.metadata.name.replace("_", "-").lower() in path.name.replace("_", "-").lower()


@pytest.mark.network
def test_parallel_scan_equals_serial(bitsandbytes_linux_wheel: Path) -> None:
    serial = scan(bitsandbytes_linux_wheel, workers=1)
    parallel = scan(bitsandbytes_linux_wheel, workers=2)
    assert serial.record_problems == parallel.record_problems == ()
    assert serial.reports == parallel.reports
    assert len(serial.reports) > 5


def _wheel(tmp_path: Path, **kw: object) -> Path:
    files = {"pkg/__init__.py": b"", "pkg/data.bin": b"\x00" * 1000}
    return write_wheel(tmp_path, name="pkg", version="1.0", tag="py3-none-any", files=files, **kw)  # type: ignore[arg-type]


def test_record_hash_mismatch(tmp_path: Path) -> None:
    scanned = scan(_wheel(tmp_path, after_record={"pkg/data.bin": b"\x01" * 1000}))
    (problem,) = scanned.record_problems
    assert (problem.kind, problem.path) == ("hash", "pkg/data.bin")


def test_record_size_mismatch(tmp_path: Path) -> None:
    scanned = scan(_wheel(tmp_path, after_record={"pkg/data.bin": b"\x00" * 999}))
    assert {(p.kind, p.path) for p in scanned.record_problems} == {
        ("hash", "pkg/data.bin"),
        ("size", "pkg/data.bin"),
    }


def test_record_unlisted_and_missing(tmp_path: Path) -> None:
    path = _wheel(tmp_path, unlisted={"pkg/extra.txt": b"x"})
    # drop a listed member by rewriting the zip without it
    dropped = tmp_path / "dropped.whl"
    with zipfile.ZipFile(path) as src, zipfile.ZipFile(dropped, "w") as dst:
        for info in src.infolist():
            if info.filename != "pkg/__init__.py":
                dst.writestr(info, src.read(info))
    scanned = scan(dropped)
    assert {(p.kind, p.path) for p in scanned.record_problems} == {
        ("unlisted", "pkg/extra.txt"),
        ("missing", "pkg/__init__.py"),
    }


@pytest.mark.parametrize(
    ("make", "message"),
    [
        (lambda p: p.write_bytes(b"not a zip"), "not a readable zip archive"),
        (lambda p: zipfile.ZipFile(p, "w").close(), "no .dist-info directory"),
    ],
    ids=["not-zip", "no-dist-info"],
)
def test_unreadable_wheel_is_one_line(tmp_path: Path, make: Callable[[Path], None], message: str) -> None:
    path = tmp_path / "x-1.0-py3-none-any.whl"
    make(path)
    with pytest.raises(WheelError) as info:
        scan(path)
    assert message in str(info.value)
    assert str(path) in str(info.value)


@pytest.mark.parametrize(
    ("make", "error", "name"),
    [
        (lambda p: p.write_bytes(b"not a zip"), "not a readable zip archive", None),
        (lambda p: zipfile.ZipFile(p, "w").close(), None, "x"),
    ],
    ids=["not-zip", "no-dist-info"],
)
def test_inspect_reports_a_wheel_audit_refuses(
    tmp_path: Path, make: Callable[[Path], None], error: str | None, name: str | None
) -> None:
    """inspect's purpose never raises: a wheel that is no zip is its error, one without dist-info is named
    from its file name (the lenient reader)."""
    path = tmp_path / "x-1.0-py3-none-any.whl"
    make(path)
    scanned = scan(path, purpose=Purpose.INSPECT, label="shown.whl")
    assert scanned.path == "shown.whl"
    assert scanned.files == ()
    if error is None:
        assert scanned.error is None
        assert scanned.info is not None
        assert (scanned.info.name, scanned.info.version) == (name, "1.0")
    else:
        assert scanned.error is not None and error in scanned.error
        assert scanned.info is None


@pytest.mark.network
def test_inspect_reads_the_native_members_audit_reads_without_hashing(
    cudart_linux_wheel: Path, cudart_windows_wheel: Path
) -> None:
    """Started on one pool and finished later, in order, the inspect scans report the native members the audit
    scan reports, in archive order, and verify nothing against RECORD."""
    with Workers(2) as pool:
        jobs = [
            start(p, purpose=Purpose.INSPECT, details=False, pool=pool)
            for p in (cudart_linux_wheel, cudart_windows_wheel)
        ]
        inspected = [job.finish() for job in jobs]
    for path, scanned in zip((cudart_linux_wheel, cudart_windows_wheel), inspected, strict=True):
        audited = scan(path, details=False)
        assert scanned.error is None and scanned.record_problems == ()
        assert scanned.files, path
        in_order = [shown_name(m.name) for m in audited.members if m.name in audited.reports]
        assert [f.path for f in scanned.files] == in_order
        assert {f.path: f for f in scanned.files} == {r.path: r for r in audited.reports.values()}
        assert scanned.info is not None and scanned.info.name == audited.dist.metadata.name
        assert scanned.platform == audited.platform


def test_truncated_wheel_is_one_line(tmp_path: Path) -> None:
    path = _wheel(tmp_path)
    data = path.read_bytes()
    cut = tmp_path / "cut-1.0-py3-none-any.whl"
    cut.write_bytes(data[: len(data) // 2])
    with pytest.raises(WheelError, match="not a readable zip archive"):
        scan(cut)


def test_zip_bomb_is_refused_without_inflating(tmp_path: Path) -> None:
    from cudaship.wheel import archive as archive_limits

    files = {"pkg/zeros.bin": b"\x00" * (archive_limits.RATIO_FLOOR + (1 << 20))}
    path = write_wheel(tmp_path, name="pkg", version="1.0", tag="py3-none-any", files=files)
    scanned = scan(path)
    assert scanned.unreadable == (
        (
            "pkg/zeros.bin",
            f"compression ratio 1028:1 over the {archive_limits.MAX_RATIO}:1 limit (zip bomb?)",
        ),
    )


def test_unreadable_member_is_not_also_missing(tmp_path: Path) -> None:
    from cudaship.wheel import archive as archive_limits

    files = {"pkg/zeros.bin": b"\x00" * (archive_limits.RATIO_FLOOR + (1 << 20))}
    scanned = scan(write_wheel(tmp_path, name="pkg", version="1.0", tag="py3-none-any", files=files))
    assert scanned.record_problems == ()


def _dist(*tags: str) -> DistInfo:
    return DistInfo(
        directory="pkg-1.0.dist-info",
        metadata=Metadata("pkg", "1.0", None, ()),
        wheel=WheelFile("1.0", False, tags),
        record=(),
        record_path="pkg-1.0.dist-info/RECORD",
    )


def test_the_platform_comes_from_wheel_tags_else_the_file_name() -> None:
    platform, notes = target_platform(_dist("cp312-cp312-win_amd64"), "pkg-1.0-py3-none-any.whl")
    assert (platform.os, platform.machine, notes) == ("windows", "x86_64", ())
    # WHEEL without tags: the file name's, the same derivation
    platform, notes = target_platform(_dist(), "pkg-1.0-cp312-cp312-manylinux_2_28_aarch64.whl")
    assert (platform.os, platform.machine, notes) == ("linux", "aarch64", ())
    platform, _ = target_platform(_dist(), "pkg-1.0-py3-none-any.whl")
    assert platform.os == "any"


def test_tags_naming_several_platforms_are_noted() -> None:
    platform, notes = target_platform(
        _dist("cp312-cp312-manylinux_2_28_x86_64", "cp312-cp312-win_amd64"), "pkg-1.0-py3-none-any.whl"
    )
    assert platform.os == "linux"
    (note,) = notes
    assert "several platforms" in note and "audited for linux-x86_64" in note


def test_the_scan_carries_platform_and_installed_paths(tmp_path: Path) -> None:
    files = {
        "pkg/__init__.py": b"",
        "pkg-1.0.data/platlib/pkg/lib/a.bin": b"x",
        "pkg-1.0.data/scripts/t": b"y",
    }
    wheel = write_wheel(
        tmp_path, name="pkg", version="1.0", tag="cp312-cp312-manylinux_2_28_x86_64", files=files
    )
    scanned = scan(wheel, workers=1)
    assert (scanned.platform.os, scanned.platform.machine) == ("linux", "x86_64")
    installed = {m.name: m.installed for m in scanned.members}
    assert installed["pkg-1.0.data/platlib/pkg/lib/a.bin"] == "pkg/lib/a.bin"
    assert installed["pkg-1.0.data/scripts/t"] == "pkg-1.0.data/scripts/t"  # outside site-packages: kept
    assert installed["pkg/__init__.py"] == "pkg/__init__.py"


def test_a_program_gives_the_same_record_through_the_same_entry_point() -> None:
    calls: list[str] = []

    def on_dist(*_args: object) -> None:
        calls.append("dist")

    scanned = scan(PTE, on_dist=on_dist)
    assert scanned.kind is ContainerKind.PTE and scanned.filename == PTE.name
    assert (scanned.platform.os, scanned.platform.machine) == ("linux", "x86_64")
    assert scanned.program_train == "13.0" and scanned.train_evidence == "PTX ISA 9.0"
    assert scanned.reports and all(m.installed == m.name for m in scanned.members)
    assert scanned.dist.directory == "" and calls == []  # a program has no dist-info


def test_the_scan_reads_requires_dist_for_the_wheel_and_each_policy_os(tmp_path: Path) -> None:
    requires = (
        "nvidia-cuda-runtime>=13,<14; platform_system == 'Linux'",
        "nvidia-cublas>=13; sys_platform == 'linux' and platform_machine == 'aarch64'",
        "pywin32; os_name == 'nt'",
        "numpy>=2",
    )
    tag = "cp312-cp312-manylinux_2_28_aarch64"
    wheel = write_wheel(
        tmp_path, name="pkg", version="1.0", tag=tag, files={"pkg/a.py": b""}, requires=requires
    )
    scanned = scan(wheel, workers=1)
    by_target = {(d.os, d.machine): {r.name for r in d.requirements} for d in scanned.declared}
    # the wheel's own platform first, then each OS a policy may name (its own machine on its own OS)
    assert (scanned.declared[0].os, scanned.declared[0].machine) == ("linux", "aarch64")
    assert by_target == {
        ("linux", "aarch64"): {"nvidia-cuda-runtime", "nvidia-cublas", "numpy"},
        ("windows", "x86_64"): {"pywin32", "numpy"},
        ("macos", "x86_64"): {"numpy"},
    }
    runtime = next(r for r in scanned.declared[0].requirements if r.name == "nvidia-cuda-runtime")
    assert runtime.key == "nvidia-cuda-runtime<14,>=13"


def test_an_invalid_requirement_is_kept_as_the_reason_not_raised(tmp_path: Path) -> None:
    wheel = write_wheel(
        tmp_path,
        name="pkg",
        version="1.0",
        tag="py3-none-any",
        files={"pkg/a.py": b""},
        requires=("not valid!",),
    )
    scanned = scan(wheel, workers=1)
    assert scanned.declared and all(d.requirements == () for d in scanned.declared)
    assert all(d.error is not None and "'not valid!' is invalid" in d.error for d in scanned.declared)
