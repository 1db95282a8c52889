"""One place for counted nouns and cut lists (src/cudaship/words.py), and no renderer or check that writes its
own: "1 native files", "1 imports resolve", "file(s)" and a "(and 3 more)" that lists them nowhere were each
written by hand in one message (issue 23)."""

from __future__ import annotations

import re
from pathlib import Path

import pytest

from cudaship.words import agree, byte_count, count, cut_list, plural_of, size

SRC = Path(__file__).resolve().parents[1] / "src" / "cudaship"


@pytest.mark.parametrize(
    ("noun", "plural"),
    [
        ("file", "files"),
        ("native file", "native files"),
        ("library", "libraries"),
        ("needed library", "needed libraries"),
        ("copy", "copies"),
        ("entry", "entries"),
        ("directory", "directories"),
        ("key", "keys"),
        ("match", "matches"),
        ("NVIDIA library name", "NVIDIA library names"),
    ],
)
def test_plural_of(noun: str, plural: str) -> None:
    assert plural_of(noun) == plural
    assert count(1, noun) == f"1 {noun}"
    assert count(0, noun) == f"0 {plural}"
    assert count(2, noun) == f"2 {plural}"


def test_irregular_plural_and_agreement() -> None:
    assert count(3, "child", "children") == "3 children"
    assert f"{count(1, 'import')} {agree(1, 'resolves', 'resolve')}" == "1 import resolves"
    assert f"{count(4, 'import')} {agree(4, 'resolves', 'resolve')}" == "4 imports resolve"


def test_cut_list_says_where_the_rest_are() -> None:
    assert cut_list(["a", "b"], 4) == "a, b"
    assert cut_list(list("abcdef"), 4) == "a, b, c, d and 2 more"
    assert cut_list(list("abcdef"), 4, where="-v lists them") == "a, b, c, d and 2 more (-v lists them)"


#: A count written by hand into a message: ``{len(x)} files``, ``{n} file(s)``, ``{'s' if ...}``
#: (``http(s)`` is a scheme, not a count).
_HAND_WRITTEN = re.compile(
    r"""\{len\([^}]*\)\}\s+(?:[a-z-]+\s+)?[a-z]+s\b|(?<=\w)(?<!http)\(s\)|"""
    r"""\{'s' if|\{"s" if|'y' if len|"s" if len"""
    r"|\{[^{}]+\} (?:files|libraries|imports|errors|warnings|notes|checks|rows|wheels|entries|members|"
    r"distributions|variables|directories|paths|sentinels|kernels|requests|problems|attempts)\b(?! \{)"
)
#: Counts of measures and limits, not of things a report lists: "{len(data)} bytes", "... characters".
_MEASURES = re.compile(
    r"\b(bytes|characters|fields|sections)\b|over the|expected \d|more than \{|stopped after \{|"
    r"runs past|at offset|"
    r"/\{[^{}]+\} (?:wheels|checks)|the \{[^{}]+\} checks"  # "2/5 wheels": a fraction of a whole
)
#: Standard-library-only modules: the GitHub Action's script (runs without cudaship installed) and the child a
#: program runs in (imports nothing of cudaship).
_STDLIB_ONLY = {"ci/action_steps.py", "program/runner_child.py"}


def test_no_message_counts_by_hand() -> None:
    offenders = []
    for path in sorted(SRC.rglob("*.py")):
        rel = path.relative_to(SRC).as_posix()
        if rel in _STDLIB_ONLY or rel == "words.py":
            continue
        for number, line in enumerate(path.read_text().splitlines(), 1):
            code = line.split("  #", 1)[0]  # an inline comment, not a format spec such as {offset:#x}
            if 'f"' not in code and "f'" not in code:  # a message is an f-string when it counts
                continue
            if _HAND_WRITTEN.search(code) and not _MEASURES.search(code):
                offenders.append(f"{rel}:{number}: {line.strip()}")
    assert offenders == [], "use cudaship.words.count / agree / cut_list:\n" + "\n".join(offenders)


def test_byte_counts_and_sizes() -> None:
    assert byte_count(1) == "1 byte"
    assert byte_count(501_816) == "501,816 bytes"
    assert size(812) == "812 bytes"
    assert size(14_540) == "14.2 KiB"
    assert size(100 * 1024 * 1024) == "100.0 MiB"
    assert size(150_109_880_320) == "139.8 GiB"
    assert size(2_000 * 2**30) == "2,000.0 GiB"


#: A size written by hand into a report or a message of the layers that make them (issue 35: "24.8 kB",
#: "140 GiB", "(501816 bytes)" and "1.2 MiB" side by side): decimal units, a unit after a computed number,
#: or a byte count without separators.
_SIZE_BY_HAND = re.compile(r"\b(?:MB|GB|kB|KB|KiB|MiB|GiB)\b|\{[^{}:]*\}\s*bytes\b|\{[^{}]*\}\s*B\b")
#: The layers that write reports and messages a person reads at the end of a run.
_REPORTING = ("render/", "checks/", "cli/", "oracle/run.py", "http.py")


def test_no_report_formats_a_size_by_hand() -> None:
    offenders = []
    for path in sorted(SRC.rglob("*.py")):
        rel = path.relative_to(SRC).as_posix()
        if not rel.startswith(_REPORTING):
            continue
        for number, line in enumerate(path.read_text().splitlines(), 1):
            code = line.split("  #", 1)[0]
            if ('f"' in code or "f'" in code) and _SIZE_BY_HAND.search(code):
                offenders.append(f"{rel}:{number}: {line.strip()}")
    assert offenders == [], "use cudaship.words.byte_count / size:\n" + "\n".join(offenders)
