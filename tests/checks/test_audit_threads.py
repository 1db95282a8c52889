"""Issue 12's race: the audit of nvidia-cuda-runtime-cu12's Windows wheel failed "native files readable" on
most runs with the default ``-j`` (two scan threads loading the native search at once). Twenty audits in a
row, each starting from an unloaded native search, must give the same JSON."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from cudaship.binary import _search
from cudaship.checks.engine import audit_wheels
from cudaship.checks.table import default_policy
from cudaship.render import audit_json
from tests.fixtures.wheels import RealWheel, fetch

CUDART_CU12_WINDOWS = RealWheel("nvidia-cuda-runtime-cu12", "12.9.79", "win_amd64")


@pytest.fixture(scope="module")
def cudart_cu12_windows_wheel() -> Path:
    return fetch(CUDART_CU12_WINDOWS)


def _stable(report: dict[str, object]) -> str:
    report = dict(report)
    report.pop("version", None)
    return json.dumps(report, sort_keys=True)


@pytest.mark.network
def test_twenty_audits_give_identical_json(
    cudart_cu12_windows_wheel: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    outputs = set()
    readable = []
    for _ in range(20):
        monkeypatch.setattr(_search, "_native", None)  # every audit is a first use, racing its scan threads
        report = audit_wheels([cudart_cu12_windows_wheel], default_policy(), workers=None)
        outputs.add(_stable(audit_json.as_dict(report)))
        readable.extend(c for c in report.checks if c.name == "record: native files readable")
    assert len(outputs) == 1
    assert len(readable) == 20
    assert all(not c.failed for c in readable), readable[0].reason
