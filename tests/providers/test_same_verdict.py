"""The same verdict tomorrow (issue 35, item 2): an audit resolved against a local PEP 691 index (with PEP 700
upload times) where a newer upload appears between two runs a month apart. Without pins the verdict changes;
with ``--exclude-newer``, with the constraints the first run wrote (``--write-constraints``) and with
``--replay`` of its report, the whole JSON report is the one the first run gave.

The audited wheel ships ``mine/lib/libmine.so`` (built here with gcc), which needs ``libdep.so.1`` through its
RUNPATH ``$ORIGIN/../../dep/lib``; it requires ``dep>=1`` unpinned. ``dep 1.0`` installs
``dep/lib/libdep.so.1``; ``dep 2.0``, uploaded later, installs only ``libdep.so.2``: the import no longer
resolves.
"""

from __future__ import annotations

import json
import os
import re
import shutil
import subprocess
import time
from pathlib import Path
from typing import Any

import pytest

from cudaship.cli.main import main
from cudaship.exitcodes import ExitCode
from tests.providers.conftest import LocalIndex, make_wheel

TAG = "py3-none-manylinux_2_28_x86_64"
FIRST_UPLOAD = "2026-10-01T09:30:00.123456Z"
SECOND_UPLOAD = "2026-11-02T14:00:00.000000Z"
BETWEEN = "2026-10-15"


def _gcc(args: list[str], cwd: Path) -> None:
    subprocess.run(["gcc", *args], cwd=cwd, check=True, capture_output=True)


@pytest.fixture
def wheels(tmp_path: Path) -> dict[str, Path]:
    if shutil.which("gcc") is None:
        pytest.skip("gcc is needed to build the audited library (apt-get install gcc)")
    build = tmp_path / "build"
    build.mkdir()
    (build / "dep.c").write_text("int dep(void) { return 1; }\n")
    (build / "mine.c").write_text("int dep(void);\nint mine(void) { return dep(); }\n")
    _gcc(["-shared", "-fPIC", "-o", "libdep.so.1", "dep.c", "-Wl,-soname,libdep.so.1"], build)
    _gcc(["-shared", "-fPIC", "-o", "libdep.so.2", "dep.c", "-Wl,-soname,libdep.so.2"], build)
    rpath = "-Wl,-rpath,$ORIGIN/../../dep/lib"
    _gcc(["-shared", "-fPIC", "-o", "libmine.so", "mine.c", "-L.", "-l:libdep.so.1", rpath], build)
    out = tmp_path / "wheels"
    out.mkdir()
    mine = make_wheel(
        out,
        "mine",
        "1.0",
        TAG,
        {"mine/__init__.py": b"", "mine/lib/libmine.so": (build / "libmine.so").read_bytes()},
        requires=("dep>=1",),
    )
    old = make_wheel(
        out,
        "dep",
        "1.0",
        TAG,
        {"dep/__init__.py": b"", "dep/lib/libdep.so.1": (build / "libdep.so.1").read_bytes()},
    )
    new = make_wheel(
        out,
        "dep",
        "2.0",
        TAG,
        {"dep/__init__.py": b"", "dep/lib/libdep.so.2": (build / "libdep.so.2").read_bytes()},
    )
    return {"mine": mine, "old": old, "new": new}


def _audit(capsys: pytest.CaptureFixture[str], *args: str) -> tuple[int, dict[str, Any], str]:
    code = main(["audit", "--no-progress", "--format", "json", *args])
    captured = capsys.readouterr()
    return code, json.loads(captured.out), captured.err


def _a_month_later(cache: Path) -> None:
    """The cached project pages as a month old: the next online run reads the index again."""
    month_ago = time.time() - 31 * 24 * 3600
    for entry in (cache / "index" / "page").rglob("*.json"):
        os.utime(entry, (month_ago, month_ago))


#: what differs between two runs that resolve alike: when each ran, how its pins were given (files, a
#: report, a date), and what the index cost (requests, bytes, cache hits; offline from the cache or not)
_COST = re.compile(
    r" \((?:\d+ requests?, [\d,.]+ (?:bytes|KiB|MiB|GiB) fetched, \d+ from the cache|no network)\)"
)


def _comparable(report: dict[str, Any]) -> dict[str, Any]:
    out = json.loads(json.dumps(report))
    res = out["resolution"]
    for key in ("resolved_at", "constraints", "exclude_newer", "offline"):
        res.pop(key)
    for wheel in out["wheels"]:
        wheel["notes"] = [
            _COST.sub("", n).replace(" (offline: cache only)", "") if n.startswith("providers:") else n
            for n in wheel["notes"]
        ]
    return out


def test_pins_give_the_same_verdict_a_month_later(
    wheels: dict[str, Path], local_index: LocalIndex, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    cache = tmp_path / "cache"
    base = ["--online", "--index-url", local_index.url, "--cache-dir", str(cache)]
    local_index.add(wheels["old"], uploaded=FIRST_UPLOAD)
    pins = tmp_path / "pins.txt"

    code, first, _ = _audit(capsys, *base, "--write-constraints", str(pins), str(wheels["mine"]))
    assert code == ExitCode.OK, first["checks"]
    res = first["resolution"]
    assert res["indexes"] == [local_index.url] and res["exclude_newer"] is None and not res["offline"]
    assert re.fullmatch(r"\d{4}-\d\d-\d\dT\d\d:\d\d:\d\dZ", res["resolved_at"])
    assert res["projects"] == [
        {"name": "dep", "version": "1.0", "source": "index", "targets": ["linux x86_64 3.12"], "marker": None}
    ]
    assert [line for line in pins.read_text().splitlines() if not line.startswith("#")] == ["dep==1.0"]
    first_report = tmp_path / "first.json"
    first_report.write_text(json.dumps(first))

    # a month later: the index serves dep 2.0 too
    local_index.add(wheels["new"], uploaded=SECOND_UPLOAD)
    _a_month_later(cache)

    code, unpinned, _ = _audit(capsys, *base, str(wheels["mine"]))
    assert code == ExitCode.FINDINGS  # libdep.so.1 is no longer installed: the verdict changed
    assert [p["version"] for p in unpinned["resolution"]["projects"]] == ["2.0"]
    assert _comparable(unpinned) != _comparable(first)

    _a_month_later(cache)
    code, dated, err = _audit(capsys, *base, "--exclude-newer", BETWEEN, str(wheels["mine"]))
    assert code == ExitCode.OK and "warning" not in err
    assert dated["resolution"]["exclude_newer"] == "2026-10-15T00:00:00Z"
    assert _comparable(dated) == _comparable(first)

    _a_month_later(cache)
    code, constrained, _ = _audit(capsys, *base, "-c", str(pins), str(wheels["mine"]))
    assert code == ExitCode.OK
    assert constrained["resolution"]["constraints"] == [str(pins)]
    assert _comparable(constrained) == _comparable(first)

    # the replay: offline from the cache, the index the report recorded (no --index-url, no --online)
    requests = local_index.requests
    code, replayed, _ = _audit(
        capsys, "--cache-dir", str(cache), "--replay", str(first_report), str(wheels["mine"])
    )
    assert local_index.requests == requests  # not one request: the cache answered
    assert code == ExitCode.OK
    assert replayed["resolution"]["offline"] is True
    assert replayed["resolution"]["resolved_at"] == first["resolution"]["resolved_at"]
    assert _comparable(replayed) == _comparable(first)


def test_an_index_without_upload_times_is_warned_about(
    wheels: dict[str, Path], local_index: LocalIndex, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    local_index.add(wheels["old"])  # no upload-time (an index before PEP 700)
    local_index.add(wheels["new"])
    args = ["--online", "--index-url", local_index.url, "--cache-dir", str(tmp_path / "cache")]
    code, report, err = _audit(capsys, *args, "--exclude-newer", BETWEEN, str(wheels["mine"]))
    # never a silent pass: the date could not apply, and the report, the notes and stderr say so
    assert code == ExitCode.FINDINGS  # dep 2.0 was taken: nothing said it came after the date
    assert report["resolution"]["undated"] == ["dep"]
    assert err.count("warning") == 1 and "gives no upload time (PEP 700) for dep" in err
    providers = next(n for n in report["wheels"][0]["notes"] if n.startswith("providers:"))
    assert "--exclude-newer not applied to 1 project (dep)" in providers


def test_text_report_has_one_resolution_line(
    wheels: dict[str, Path], local_index: LocalIndex, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    local_index.add(wheels["old"], uploaded=FIRST_UPLOAD)
    args = ["--online", "--index-url", local_index.url, "--cache-dir", str(tmp_path / "cache")]
    for fmt in ("text", "markdown"):
        code = main(
            [
                "audit",
                "--no-progress",
                "--format",
                fmt,
                *args,
                "--exclude-newer",
                BETWEEN,
                str(wheels["mine"]),
            ]
        )
        out = capsys.readouterr().out
        assert code == ExitCode.OK
        lines = [line for line in out.splitlines() if line.startswith("resolution:")]
        assert len(lines) == 1, out
        assert f"1 project from {local_index.url} as of " in lines[0]
        assert "uploads after 2026-10-15T00:00:00Z ignored" in lines[0]


@pytest.mark.parametrize(
    ("text", "problem"),
    [
        ("dep[extra]==1.0\n", "a constraint cannot name extras"),
        ("dep @ https://example.org/dep.whl\n", "a constraint names a version, not a URL"),
        ("--index-url https://example.org/simple\n", "--index-url is not read in a constraints file"),
        ("dep=>1\n", "not a requirement"),
    ],
)
def test_bad_constraints_are_one_line_naming_the_file(
    wheels: dict[str, Path], tmp_path: Path, capsys: pytest.CaptureFixture[str], text: str, problem: str
) -> None:
    bad = tmp_path / "bad.txt"
    bad.write_text("# pins\n" + text)
    code = main(["audit", "--no-progress", "--offline", "-c", str(bad), str(wheels["mine"])])
    err = capsys.readouterr().err.strip().splitlines()
    assert code == ExitCode.BAD_INPUT
    assert len(err) == 1 and f"{bad}:2" in err[0] and problem in err[0], err


def test_replay_of_a_report_without_a_record_is_bad_input(
    wheels: dict[str, Path], tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    old = tmp_path / "old.json"
    old.write_text(json.dumps({"schema": 2, "tool": "cudaship", "wheels": []}))
    code = main(["audit", "--no-progress", "--replay", str(old), str(wheels["mine"])])
    err = capsys.readouterr().err.strip().splitlines()
    assert code == ExitCode.BAD_INPUT
    assert len(err) == 1 and str(old) in err[0] and "no resolution recorded" in err[0]


def test_constraints_and_date_from_the_configuration(
    wheels: dict[str, Path], local_index: LocalIndex, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    local_index.add(wheels["old"], uploaded=FIRST_UPLOAD)
    local_index.add(wheels["new"], uploaded=SECOND_UPLOAD)
    args = ["--online", "--index-url", local_index.url, "--cache-dir", str(tmp_path / "cache")]
    project = tmp_path / "project"
    project.mkdir()
    (project / "nested.txt").write_text("dep<3\n")
    config = project / "pyproject.toml"
    config.write_text(
        '[tool.cudaship.resolution]\nconstraints = ["dep<2"]\nconstraint-files = ["nested.txt"]\n'
        "exclude-newer = 2026-12-01\n"
    )
    code, report, _ = _audit(capsys, *args, "--policy", str(config), str(wheels["mine"]))
    assert code == ExitCode.OK
    res = report["resolution"]
    assert [p["version"] for p in res["projects"]] == ["1.0"]
    assert res["exclude_newer"] == "2026-12-01T00:00:00Z"
    assert res["constraints"] == [f"{config} [tool.cudaship.resolution]", str(project / "nested.txt")]
    config.write_text('[tool.cudaship.resolution]\nexclude-newer = "next week"\n')
    code = main(["audit", "--no-progress", *args, "--policy", str(config), str(wheels["mine"])])
    err = capsys.readouterr().err.strip().splitlines()
    assert (
        code == ExitCode.BAD_INPUT and len(err) == 1 and "exclude-newer" in err[0] and str(config) in err[0]
    )
