"""What a valid wheel member path is (cudaship.wheel.names), and RECORD's verifier flagging the others."""

from __future__ import annotations

import pytest

from cudaship.wheel.metadata import RecordVerifier
from cudaship.wheel.names import name_problem
from cudaship.wheel.records import RecordEntry

VALID = [
    "pkg/__init__.py",
    "pkg/libs/libx.so.1",
    "pkg-1.0.dist-info/RECORD",
    "pkg-1.0.data/scripts/run",
    'pkg/a "quoted", name.py',
    "pkg/ünïcode/名前.py",
    "pkg/\u202ertl.py",  # printed escaped by the renderers; not a path problem
    "ab:c/x.py",  # a colon past the second character is no drive
]
INVALID = {
    "": "an empty name",
    "../x.py": "'..'",
    "pkg/../../x.py": "'..'",
    "pkg/./x.py": "'.'",
    "/abs/x.py": "absolute",
    "C:x.py": "drive letter",
    "c:/x.py": "drive letter",
    "pkg\\x.py": "backslash",
    "\\\\host\\share\\x.py": "backslash",
    "pkg//x.py": "empty component",
    "pkg/": "empty component",
    "pkg/x\0.py": "U+0000",
    "pkg/x\n.py": "U+000A",
    "pkg/x\r.py": "U+000D",
    "pkg/x\x1b[2J.py": "U+001B",
    "pkg/x\x7f.py": "U+007F",
    "pkg/x\x85.py": "U+0085",
    "pkg/x\udcff.py": "lone surrogate",
}


@pytest.mark.parametrize("name", VALID)
def test_valid_names(name: str) -> None:
    assert name_problem(name) is None


@pytest.mark.parametrize(("name", "why"), list(INVALID.items()), ids=[repr(n) for n in INVALID])
def test_invalid_names(name: str, why: str) -> None:
    problem = name_problem(name)
    assert problem is not None and why in problem


def test_record_verifier_flags_names_of_read_and_unread_members() -> None:
    listed = "pkg/../evil.py"
    verifier = RecordVerifier(
        (RecordEntry(listed, "sha256", "x", 1), RecordEntry("pkg/ok.py", None, None, None))
    )
    verifier.observe(listed, "sha256", "x", 1)
    verifier.unverified("/abs.so")
    kinds = sorted((p.kind, p.path) for p in verifier.problems())
    assert ("name", listed) in kinds and ("name", "/abs.so") in kinds
    assert ("missing", "pkg/ok.py") in kinds
    assert not any(k == "hash" for k, _ in kinds)
