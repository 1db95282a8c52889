"""Issue 12 acceptance: an arch dropped from a library of a real wheel, under a policy that requires it, fails
the audit (exit 1) naming the check, the file and the arch; the untouched copy passes under the same policy.

The defect is planted into a copy of bitsandbytes 0.50.2 (Linux) with tests/fixtures/plant.py: in
``libbitsandbytes_cuda130.so`` the loadable SASS entry for sm_90 is relabelled sm_89 (its fatbin entry
header's SM field, 4 bytes), and RECORD is rewritten so only that library differs. The library is a variant
(one of ``libbitsandbytes_cuda*.so``), so it is judged against its own train, cu130, whatever the wheel's.
"""

from __future__ import annotations

import json
import struct
from pathlib import Path

import pytest

from cudaship.cli.main import main
from cudaship.exitcodes import ExitCode
from cudaship.inspection.dispatch import inspect_buffer
from cudaship.records.binary import DeviceCodeKind
from tests.fixtures.plant import changed_members, plant

LIB = "bitsandbytes/libbitsandbytes_cuda130.so"
#: offset of the SM number in a fatbin entry header (kind H, version H, header size I, payload Q,
#: compressed I, options I, minor H, major H, then the SM as a 32-bit integer)
SM_FIELD = 28

POLICY = """
[archs.cu130]
x86_64 = "7.5 8.0 8.6 8.9 9.0 10.0 12.0"

[audit.archs]
libraries = ["bitsandbytes/libbitsandbytes_cuda130.so"]
ptx = "none"
"""


def drop_sm90(data: bytes) -> bytes:
    """The library with its loadable sm_90 SASS entries relabelled sm_89 (found by cudaship's own reader)."""
    report = inspect_buffer(data, LIB)
    entries = [
        d
        for d in report.device_code
        if d.kind is DeviceCodeKind.SASS and d.arch == "sm_90" and not d.relocatable
    ]
    assert entries, "the real library has a loadable sm_90 entry"
    out = bytearray(data)
    for entry in entries:
        assert struct.unpack_from("<I", out, entry.offset + SM_FIELD)[0] == 90
        struct.pack_into("<I", out, entry.offset + SM_FIELD, 89)
    return bytes(out)


def _audit(
    wheel: Path, policy: Path, capsys: pytest.CaptureFixture[str]
) -> tuple[int, dict[str, dict[str, object]]]:
    code = main(
        ["audit", "--no-progress", "--offline", "--format", "json", "--policy", str(policy), str(wheel)]
    )
    doc = json.loads(capsys.readouterr().out)
    return code, {c["name"]: c for c in doc["checks"]}


@pytest.mark.network
def test_dropped_arch_fails_naming_check_file_and_arch(
    bitsandbytes_linux_wheel: Path,
    tmp_path: Path,
    capsys: pytest.CaptureFixture[str],
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.chdir(tmp_path)
    policy = tmp_path / "cudaship.toml"
    policy.write_text(POLICY)

    code, checks = _audit(bitsandbytes_linux_wheel, policy, capsys)
    assert checks[f"archs: {LIB}"]["status"] == "pass"
    assert code == ExitCode.OK

    planted = plant(bitsandbytes_linux_wheel, tmp_path / "planted", replace={LIB: drop_sm90})
    dist_info = "bitsandbytes-0.50.2.dist-info"
    assert changed_members(bitsandbytes_linux_wheel, planted) == {LIB, f"{dist_info}/RECORD"}

    code, checks = _audit(planted, policy, capsys)
    assert code == ExitCode.FINDINGS
    failed = {name: c for name, c in checks.items() if c["status"] == "fail" and c["severity"] == "error"}
    assert list(failed) == [f"archs: {LIB}"]
    evidence = failed[f"archs: {LIB}"]["evidence"]
    assert isinstance(evidence, list)
    assert {"file": LIB, "arch": "sm_90"}.items() <= evidence[0].items()
    assert evidence[0]["message"] == "missing SASS sm_90 (only in a relocatable fatbin)"
    # RECORD still matches: the defect is the only difference
    assert checks["record: hashes and sizes"]["status"] == "pass"
