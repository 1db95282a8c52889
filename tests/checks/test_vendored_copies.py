"""The audit says what repair removes (issue 32, class 11): a shipped copy of a library an NVIDIA wheel
provides is a warning naming that wheel and the bytes depending on it saves, and the copies the audit
names are exactly those ``repair`` removes, on real wheels that vendor (ctranslate2's cuDNN 8, cumm's CUDA
runtime and NVRTC) and on an auditwheel-repaired extension (libcudart)."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from cudaship.cli.main import main

PREFIX = "closure: vendored copy of "


def _audit_copies(wheel: Path, capsys: pytest.CaptureFixture[str]) -> dict[str, dict[str, object]]:
    main(["audit", str(wheel), "-f", "json"])
    checks = json.loads(capsys.readouterr().out)["checks"]
    out = {}
    for c in checks:
        if c["name"].startswith(PREFIX):
            assert c["rule"] == "vendored_nvidia" and c["severity"] == "warning" and c["status"] == "fail"
            out[c["name"].rsplit(" in ", 1)[1]] = c
    return out


def _removed(wheel: Path, capsys: pytest.CaptureFixture[str]) -> dict[str, dict[str, object]]:
    assert main(["repair", "--dry-run", str(wheel), "-f", "json"]) == 0
    (result,) = json.loads(capsys.readouterr().out)["wheels"]
    return {r["member"]: r for r in result["plan"]["removed"]}


@pytest.mark.parametrize(
    "fixture", ["auditwheel_vendored", "ctranslate2_vendoring_wheel", "cumm_vendoring_wheel"]
)
def test_audit_warns_about_what_repair_removes(
    fixture: str, request: pytest.FixtureRequest, capsys: pytest.CaptureFixture[str]
) -> None:
    wheel: Path = request.getfixturevalue(fixture)
    copies = _audit_copies(wheel, capsys)
    removed = _removed(wheel, capsys)
    assert removed, "the fixture vendors an NVIDIA wheel's library"
    assert set(copies) == set(removed)
    for member, check in copies.items():
        r = removed[member]
        assert str(r["project"]) in str(check["reason"])
        assert f"{r['size']:,} bytes" in str(check["reason"])
