"""Class 1 of issue 25, injection into reports: names taken from inputs reach every report escaped.

One hostile corpus (tests/security/hostile_names.py) is put into real inputs built here: a gcc ELF whose
SONAME, DT_NEEDED and RUNPATH are hostile, a mingw DLL whose imports are, a wheel whose file name, member
names and METADATA fields are, an AOTInductor package whose member names are, and an installed environment
holding such a wheel. Every command that renders names from inputs runs on them in every format the render
table offers (and audit's GitHub annotations, on standard error when stdout holds the report, on stdout when
it goes to a file), and each output must:

- parse back (JSON loads, JUnit XML parses, HTML has no element or event handler the input named, markdown
  tables keep their columns and code spans their ends);
- hold no control character but line breaks and no line a CI runner reads as a workflow command
  (:func:`cudaship.render.escape.stray`), standard error included;
- still show the hostile names (escaped), so that a report that left them out cannot pass.
"""

from __future__ import annotations

import json
import re
import xml.etree.ElementTree as ET
from collections.abc import Iterator
from dataclasses import dataclass
from html.parser import HTMLParser
from pathlib import Path
from typing import Any

import pytest

from cudaship.cli.main import main
from cudaship.render.escape import stray
from cudaship.render.table import formats
from tests.security.hostile_names import (
    HOSTILE,
    hostile_elf,
    hostile_pe,
    hostile_pt2,
    hostile_site,
    hostile_wheel,
)


@dataclass(frozen=True)
class Corpus:
    elf: Path
    pe: Path
    wheel: Path
    pt2: Path
    export: Path
    site: Path


@pytest.fixture(scope="module")
def corpus(tmp_path_factory: pytest.TempPathFactory, nvcc_build: Any) -> Corpus:
    from tests.program.builders import make_export_dir

    root = tmp_path_factory.mktemp("hostile")
    elf = hostile_elf(root / "elf")
    pe = hostile_pe(root / "pe")
    wheel = hostile_wheel(root / "wheel", elf, pe, nvcc_build("multi_arch"))
    pt2 = hostile_pt2(root / "pt2", elf, nvcc_build("cubin_sm90a"))
    export = make_export_dir(root / "export", pt2)
    # installed: file names with no line break (RECORD is CSV, one row a line, in the environment's reader)
    one_line = HOSTILE.replace("\n", " ").replace("\r", " ")
    plain = hostile_wheel(root / "plain", elf, pe, nvcc_build("multi_arch"), name="pwn", hostile=one_line)
    site = hostile_site(root / "env", plain)
    return Corpus(elf=elf, pe=pe, wheel=wheel, pt2=pt2, export=export, site=site)


def _runs(c: Corpus) -> Iterator[tuple[str, list[str]]]:
    """(render-table command, argv without the format) for each command that renders names from inputs."""
    for path in (c.elf, c.pe, c.wheel, c.pt2):
        yield "inspect", ["inspect", str(path)]
        yield "gpus", ["gpus", str(path)]
    yield "inspect", ["inspect", str(c.wheel.parent.parent)]  # a directory: every input at once
    for path in (c.wheel, c.pt2):
        yield "audit", ["audit", "--offline", "--no-progress", str(path)]
    yield "program inspect", ["program", "inspect", str(c.pt2)]
    yield "program check", ["program", "check", str(c.export), "--train", "13.0", "--gpu", "9.0"]
    yield "doctor --env", ["doctor", "--env", str(c.site), "--no-system"]


#: commands whose short formats name no input's member when all is well (program check's text and markdown
#: say "7 members read"; its JSON lists them)
NAMES_IN_SOME_FORMATS = {"program check"}

CASES = [
    "inspect",
    "gpus",
    "audit",
    "program inspect",
    "program check",
    "doctor --env",
]


def _strings(value: Any) -> Iterator[str]:
    if isinstance(value, str):
        yield value
    elif isinstance(value, dict):
        for k, v in value.items():
            yield k
            yield from _strings(v)
    elif isinstance(value, list):
        for v in value:
            yield from _strings(v)


class _Tags(HTMLParser):
    def __init__(self) -> None:
        super().__init__()
        self.tags: list[str] = []
        self.attributes: list[str] = []

    def handle_starttag(self, tag: str, attrs: list[tuple[str, str | None]]) -> None:
        self.tags.append(tag)
        self.attributes += [name for name, _ in attrs]


def _unescaped_pipes(line: str) -> int:
    return len(re.findall(r"(?<!\\)\|", line))


def _check_markdown(out: str) -> None:
    assert "<img" not in out and "](javascript:" not in out
    columns = None
    for line in out.splitlines():
        if line.startswith("|"):
            count = _unescaped_pipes(line)
            columns = count if columns is None else columns
            assert count == columns, line  # a name never adds a cell
        else:
            columns = None
        assert line.count("`") % 2 == 0, line  # a name never ends a code span


#: a control character of a name, shown escaped
_SHOWN = re.compile(r"\\(x[0-9a-f]{2}|[nrt]|u[0-9a-f]{4})")


def _check(fmt: str, out: str) -> bool:
    """The format's own parse-back check; True when the hostile names are in the report (escaped)."""
    if fmt in ("json", "github", "sarif"):
        values = list(_strings(json.loads(out)))
        return any(re.search("[\x00-\x1f]", v) for v in values)  # the names as they are (JSON escapes them)
    if fmt == "junit":
        root = ET.fromstring(out)
        texts = [v for e in root.iter() for v in [e.text or "", *e.attrib.values()]]
        return any(_SHOWN.search(t) for t in texts)
    if fmt == "html":
        parser = _Tags()
        parser.feed(out)
        assert "img" not in parser.tags and not [a for a in parser.attributes if a.startswith("on")]
    elif fmt == "markdown":
        _check_markdown(out)
    else:  # text: a name is never rich markup ("[error]" and "[link]" printed, not eaten as style tags)
        assert out.count("legacy") == out.count("[error]legacy"), out[:2000]
    return bool(_SHOWN.search(out))


@pytest.mark.parametrize("command", CASES)
def test_every_format_of_every_command_escapes_names_from_inputs(
    corpus: Corpus,
    command: str,
    capsys: pytest.CaptureFixture[str],
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.setenv("GITHUB_ACTIONS", "true")  # audit also writes its annotations
    monkeypatch.setenv("NO_COLOR", "1")
    ran = 0
    shown: dict[str, bool] = {}  # format -> some report in it showed the names
    for table_command, argv in _runs(corpus):
        if table_command != command:
            continue
        for fmt in formats(table_command):
            code = main([*argv, "--format", fmt])
            out, err = capsys.readouterr()
            where = f"{' '.join(argv[:2])} --format {fmt}"
            assert code in (0, 1, 2), (where, code, err)
            assert "Traceback" not in err and "internal error" not in err, (where, err)
            assert out, (where, err)
            report = out
            if table_command == "audit":
                # audit's own annotations go to standard error whenever stdout holds the report, whatever its
                # format: never inside a markdown summary or a JSON/XML document
                _check_annotations(err)
                err = _report(err)
                assert not any(_annotation(x) for x in out.splitlines()), where
            leftovers = stray(report)
            assert leftovers == [], (where, leftovers[:5])
            assert stray(err) == [], (where, stray(err)[:5])
            shown[fmt] = _check(fmt, report) or shown.get(fmt, False)
            ran += 1
    assert ran >= len(formats(command))
    if command in NAMES_IN_SOME_FORMATS:
        assert any(shown.values()), shown
    else:
        assert shown == dict.fromkeys(formats(command), True), shown  # every format showed the names


_ANNOTATION = re.compile(r"^::(error|warning|notice) title=cudaship audit%3A [^:\n]*::")


def _annotation(line: str) -> bool:
    return bool(_ANNOTATION.match(line))


def _report(out: str) -> str:
    return "\n".join(line for line in out.splitlines() if not _annotation(line))


def _check_annotations(out: str) -> None:
    """Each annotation is one line: the names in its data percent-encoded where the runner decodes, control
    characters shown escaped, no other command started inside it, nothing raw reaches the log."""
    lines = [line for line in out.splitlines() if line.startswith("::")]
    assert lines, "the hostile wheel fails checks: annotations expected"
    for line in lines:
        assert _annotation(line), line
        title, data = line.split("::", 2)[1:]
        assert "%0A" not in title and "%0D" not in title, line  # a title is one line
        assert stray(data.replace("%0A", "\n").replace("%0D", "\r")) == [], line
    assert any(_SHOWN.search(line) for line in lines)  # the names are there, shown escaped


def test_hostile_names_reach_the_inputs() -> None:
    """The corpus holds what each class of escaping must handle (a corpus that lost them tests nothing)."""
    for piece in (
        "\x1b[2J",
        "\x1b]0;",
        "\x07",
        "\r",
        "\n::add-mask::",
        "##[",
        "##vso[",
        "<img",
        "|",
        "`",
        "](javascript:",
        "\u202e",
        "\x9b",
        "]]>",
        "\x7f",
    ):
        assert piece in HOSTILE, piece
    assert not {"/", "\0"} & set(HOSTILE)  # fits a file name and a wheel's distribution name


@pytest.mark.parametrize("command", ["inspect", "gpus", "audit"])
def test_error_lines_naming_hostile_members_are_escaped(
    tmp_path: Path, command: str, capsys: pytest.CaptureFixture[str]
) -> None:
    """A member that cannot be read (a truncated ELF under a hostile name, and one whose stored bytes fail
    their CRC) gets its error line on standard error: one line, escaped, no workflow command (audit: the
    findings that name them, in the report)."""
    import zipfile

    name = "pwn"
    path = tmp_path / f"{name}-1.0-py3-none-manylinux_2_17_x86_64.whl"
    dist = f"{name}-1.0.dist-info"
    truncated = b"\x7fELF\x02\x01\x01" + bytes(9)
    with zipfile.ZipFile(path, "w", zipfile.ZIP_STORED) as z:
        z.writestr(f"pwn/{HOSTILE}.so", truncated)
        z.writestr(f"pwn/crc{HOSTILE}.so", b"\x7fELF" + b"x" * 64)
        z.writestr(f"{dist}/METADATA", f"Metadata-Version: 2.1\nName: {name}\nVersion: 1.0\n")
        z.writestr(f"{dist}/WHEEL", "Wheel-Version: 1.0\nRoot-Is-Purelib: false\nTag: py3-none-any\n")
        z.writestr(f"{dist}/RECORD", "")
    data = bytearray(path.read_bytes())
    at = data.index(b"x" * 64)
    data[at] = ord("y")  # the stored bytes no longer match their CRC
    path.write_bytes(bytes(data))
    if command == "audit":  # the members are findings of "record: native files readable" there (exit 1)
        assert main(["audit", "--no-progress", "--offline", str(path)]) == 1
        out, err = capsys.readouterr()
        assert stray(out) == [] and _SHOWN.search(out)
        return
    assert main([command, "--no-progress", str(path)]) == 2
    out, err = capsys.readouterr()
    lines = err.splitlines()
    assert lines and all(line.startswith("cudaship: error: ") for line in lines), lines
    assert stray(err) == [], stray(err)[:5]
    assert any(_SHOWN.search(line) for line in lines)  # the member's name, shown escaped
    assert stray(out) == []


@pytest.mark.parametrize("command", ["inspect", "audit"])
def test_colour_keeps_only_the_reports_own_colour_codes(corpus: Corpus, command: str) -> None:
    """In a terminal (colour on) the report's SGR colour codes stay; every other escape sequence, the ones the
    names hold included (a name may hold an SGR sequence too), is shown escaped."""
    from cudaship.checks.engine import audit_wheels
    from cudaship.checks.table import default_policy
    from cudaship.inspection.walk import inspect_paths
    from cudaship.providers.options import ProviderOptions
    from cudaship.render.style import Style
    from cudaship.render.table import AUDIT, INSPECT, render

    if command == "inspect":
        out = render(
            INSPECT, "text", inspect_paths([str(corpus.elf), str(corpus.wheel)], workers=1), Style(color=True)
        )
    else:
        record = audit_wheels([str(corpus.wheel)], default_policy(), workers=1, providers=ProviderOptions())
        out = render(AUDIT, "text", record, Style(color=True))
    sgr = re.compile("\x1b\\[[0-9;]*m")
    assert sgr.search(out)  # coloured
    plain = sgr.sub("", out)
    assert stray(plain) == [], stray(plain)[:5]
    assert "\\x1b[2J" in plain  # the name's own sequence, shown escaped


@pytest.mark.parametrize("fmt", ["markdown", "text", "json", "junit"])
def test_annotations_never_follow_a_report_on_stdout(
    corpus: Corpus,
    fmt: str,
    tmp_path: Path,
    capsys: pytest.CaptureFixture[str],
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """Class 10 of issue 30: ``audit -f markdown`` to stdout, piped into ``$GITHUB_STEP_SUMMARY``, used to
    carry the ``::error`` lines, raw names and all. On stdout there is only the report; the annotations are on
    standard error (the runner reads both); with the report in a file they are on stdout, and the file holds
    none."""
    monkeypatch.setenv("GITHUB_ACTIONS", "true")
    monkeypatch.setenv("NO_COLOR", "1")
    argv = next(a for c, a in _runs(corpus) if c == "audit")
    main([*argv, "--format", fmt])
    out, err = capsys.readouterr()
    commands = [line for line in out.splitlines() if _annotation(line) or line.lstrip().startswith("::")]
    assert commands == [], out[-2000:]
    _check_annotations(err)
    report_file = tmp_path / f"report.{fmt}"
    main([*argv, "--format", fmt, "-o", str(report_file)])
    out, err = capsys.readouterr()
    _check_annotations(out)
    assert not any(_annotation(line) for line in report_file.read_text(encoding="utf-8").splitlines())
    assert not any(line.startswith("::") for line in err.splitlines())
