"""``--progress`` where stderr is not a terminal (a CI log): plain progress lines, never a bar's control
characters and never nothing; the report on stdout is the same with or without it."""

from __future__ import annotations

import io
import re
import zipfile
from pathlib import Path

import pytest

from cudaship.cli.main import main
from cudaship.cli.progress import ByteProgress
from cudaship.exitcodes import ExitCode

EXAMPLE = Path(__file__).resolve().parents[2] / "examples" / "libvecadd.so"

PERCENT = re.compile(r"^cudaship: \w+: (\d+)% of [\d.]+ (?:bytes|KiB|MiB|GiB) \(.+\)$")


def _wheel(path: Path) -> Path:
    with zipfile.ZipFile(path, "w", zipfile.ZIP_DEFLATED) as zf:
        zf.write(EXAMPLE, "pkg/libvecadd.so")
        zf.writestr("pkg-1.0.dist-info/WHEEL", "Wheel-Version: 1.0\nTag: py3-none-any\n")
        zf.writestr("pkg-1.0.dist-info/METADATA", "Metadata-Version: 2.1\nName: pkg\nVersion: 1.0\n")
        zf.writestr("pkg-1.0.dist-info/RECORD", "")
    return path


@pytest.mark.parametrize(
    ("command", "word"),
    [("inspect", "inspecting"), ("gpus", "reading"), ("audit", "auditing")],
)
def test_forced_progress_into_a_log_is_plain_lines(
    command: str,
    word: str,
    tmp_path: Path,
    monkeypatch: pytest.MonkeyPatch,
    capsys: pytest.CaptureFixture[str],
) -> None:
    monkeypatch.chdir(tmp_path)
    wheel = _wheel(tmp_path / "pkg-1.0-py3-none-any.whl")
    args = [command, "--format", "json", str(wheel)] + (["--offline"] if command == "audit" else [])
    code = main([*args[:1], "--progress", *args[1:]])
    shown = capsys.readouterr()
    quiet_code = main([*args[:1], "--no-progress", *args[1:]])
    quiet = capsys.readouterr()
    assert code == quiet_code and code in (ExitCode.OK, ExitCode.FINDINGS), shown.err
    assert shown.out == quiet.out  # the report does not change
    assert "\x1b" not in shown.err and "\r" not in shown.err
    lines = [line for line in shown.err.splitlines() if line.startswith(f"cudaship: {word}: ")]
    assert lines, shown.err
    assert re.fullmatch(rf"cudaship: {word}: done, [\d.]+ (bytes|KiB) read", lines[-1]), lines
    percents = [int(m.group(1)) for m in map(PERCENT.match, lines) if m]
    assert percents and percents[-1] == 100 and percents == sorted(set(percents))
    assert not [line for line in quiet.err.splitlines() if line.startswith(f"cudaship: {word}: ")]


class _Log(io.StringIO):
    def isatty(self) -> bool:
        return False


def test_plain_lines_are_bounded_by_the_steps_not_by_the_calls() -> None:
    """A million small reads make at most one line per tenth of the planned bytes, plus the start, the plan
    and the end: a CI log stays readable however many members a wheel has."""
    log = _Log()
    with ByteProgress("reading", stream=log) as progress:
        progress.label("big.whl", restart=True)
        progress.planned(1_000_000)
        for _ in range(1_000_000):
            progress.advanced(1)
    lines = log.getvalue().splitlines()
    assert lines[0] == "cudaship: reading: big.whl"
    assert lines[1] == "cudaship: reading: 976.6 KiB to read"
    assert [int(m.group(1)) for m in map(PERCENT.match, lines) if m] == list(range(10, 101, 10))
    assert lines[-1] == "cudaship: reading: done, 976.6 KiB read"
    assert len(lines) == 13
