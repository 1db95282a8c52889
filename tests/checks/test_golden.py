"""Golden files for the markdown and JUnit renderers (house style), on a synthetic wheel with one failure.

Regenerate after an intended change with ``CUDASHIP_UPDATE_GOLDEN=1 pytest tests/checks/test_golden.py`` and
review the diff.
"""

from __future__ import annotations

import os
from collections.abc import Callable
from pathlib import Path

import pytest

from cudaship.checks.engine import audit_wheels
from cudaship.checks.table import load_policy
from cudaship.config import load_config
from cudaship.render import audit_junit, audit_markdown, audit_text
from cudaship.render.style import Style

GOLDEN = Path(__file__).parent / "golden"
REPO = Path(__file__).resolve().parents[2]

pytestmark = pytest.mark.slow

RENDERERS = {
    "md": audit_markdown.render,
    "junit.xml": audit_junit.render,
    "txt": audit_text.render,
}


@pytest.mark.parametrize("suffix", list(RENDERERS), ids=list(RENDERERS))
def test_golden(suffix: str, synthetic_wheel: Callable[[str], Path], monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.chdir(REPO)
    policy = load_policy(load_config(Path("examples/policies/windows.toml")))
    report = audit_wheels([synthetic_wheel("win_arch_missing")], policy)
    text = RENDERERS[suffix](report, Style())
    golden = GOLDEN / f"win_arch_missing.{suffix}"
    if os.environ.get("CUDASHIP_UPDATE_GOLDEN") == "1":
        golden.write_text(text)
    assert text == golden.read_text()
