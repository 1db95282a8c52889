"""Windows: the mangled CUDA runtime copy goes, the extension's import is set back to cudart64_13.dll in
place, the package's __init__.py adds nvidia/cu13/bin/x86_64 with os.add_dll_directory, and the requirement is
declared for win32. Read back with pefile (independent of cudaship's PE reader)."""

from __future__ import annotations

import json
import os
import shlex
import subprocess
import sys
from pathlib import Path

import jsonschema
import pefile
import pytest

from cudaship.cli.main import main
from cudaship.repair.windows import MARKER, with_bootstrap
from tests.fixtures.repair_wheels import MANGLED_CUDART
from tests.repair.helpers import members, record_matches, requires_dist
from tests.repair.test_repair_cuda_extension import SCHEMA

PYD = "cudemo/_ext.cp311-win_amd64.pyd"


def _imports(data: bytes) -> list[str]:
    pe = pefile.PE(data=data)
    return [entry.dll.decode() for entry in pe.DIRECTORY_ENTRY_IMPORT]


def _repair(wheel: Path, out: Path, capsys: pytest.CaptureFixture[str]) -> tuple[Path, dict[str, object]]:
    assert main(["repair", str(wheel), "-w", str(out), "-f", "json"]) == 0
    doc = json.loads(capsys.readouterr().out)
    jsonschema.validate(doc, SCHEMA)
    (result,) = doc["wheels"]
    assert result["verification"]["failed"] == [] and result["verification"]["checked"] > 0  # issue 30
    return Path(result["output"]), result["plan"]


def test_windows_wheel_is_devendored(
    windows_vendored_wheel: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    assert MANGLED_CUDART in _imports(members(windows_vendored_wheel)[PYD])
    output, plan = _repair(windows_vendored_wheel, tmp_path / "a", capsys)
    assert isinstance(plan, dict)
    assert [r["library"] for r in plan["removed"]] == ["cudart64_13.dll"]
    assert plan["pe_edits"] == [{"member": PYD, "replace_imports": [[MANGLED_CUDART, "cudart64_13.dll"]]}]
    assert plan["bootstraps"] == [
        {"member": "cudemo/__init__.py", "directories": ["../nvidia/cu13/bin/x86_64"]}
    ]
    files = members(output)
    assert not [n for n in files if n.startswith("cudemo.libs/")]
    assert "cudart64_13.dll" in _imports(files[PYD])
    assert len(files[PYD]) == len(members(windows_vendored_wheel)[PYD])  # edited in place
    init = files["cudemo/__init__.py"].decode()
    assert init.startswith('"""cudemo for Windows."""\n\nfrom __future__ import annotations\n' + MARKER)
    compile(init, "__init__.py", "exec")
    assert 'cuda-toolkit[cudart]>=13.0,<14; sys_platform == "win32"' in requires_dist(files)
    assert record_matches(files) == []
    # repairing the repaired wheel finds the bootstrap in place and changes nothing
    again, plan2 = _repair(output, tmp_path / "b", capsys)
    assert isinstance(plan2, dict) and plan2["changed"] is False
    assert again.read_bytes() == output.read_bytes()


def test_bootstrap_adds_existing_directories_only(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    package = tmp_path / "site" / "demo"
    package.mkdir(parents=True)
    (tmp_path / "site" / "nvidia" / "cu13" / "bin" / "x86_64").mkdir(parents=True)
    source = with_bootstrap(b"x = 1\n", ("../nvidia/cu13/bin/x86_64", "../nvidia/absent"))
    assert with_bootstrap(source, ("../nvidia/cu13/bin/x86_64",)) == source
    added: list[str] = []
    import os
    import sys

    monkeypatch.setattr(sys, "platform", "win32")
    monkeypatch.setattr(os, "add_dll_directory", added.append, raising=False)
    namespace = {"__file__": str(package / "__init__.py")}
    exec(compile(source, str(package / "__init__.py"), "exec"), namespace)
    assert added == [str(tmp_path / "site" / "nvidia" / "cu13" / "bin" / "x86_64")]
    assert namespace["x"] == 1


def test_print_excludes_for_delvewheel(
    windows_vendored_wheel: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    # no tag, no device code: the CUDA major comes from the runtime the wheel ships (cudart64_13)
    assert main(["repair", "--print-excludes", "delvewheel", str(windows_vendored_wheel)]) == 0
    flags = shlex.split(capsys.readouterr().out)
    assert flags[0::2] == ["--exclude"] * (len(flags) // 2)
    assert "cudart64_13.dll" in flags[1::2] and "cudart64_12.dll" not in flags[1::2]


@pytest.mark.network
def test_delvewheel_given_the_printed_excludes_vendors_no_cuda_runtime(
    windows_vendored_wheel: Path,
    delvewheel_wheel: Path,
    tmp_path: Path,
    capsys: pytest.CaptureFixture[str],
) -> None:
    """delvewheel 1.13.2 itself, run on this (Linux) host over the repaired wheel, which imports
    cudart64_13.dll: given the printed flags it assumes the DLL present instead of copying it (a list joined
    with ';' was one unknown name here: delvewheel splits on the host's ':')."""
    output, _ = _repair(windows_vendored_wheel, tmp_path, capsys)
    assert main(["repair", "--print-excludes", "delvewheel", str(windows_vendored_wheel)]) == 0
    flags = shlex.split(capsys.readouterr().out)
    env = {**os.environ, "PYTHONPATH": str(delvewheel_wheel)}  # a pure-Python wheel imports from the zip
    done = subprocess.run(
        [sys.executable, "-m", "delvewheel", "show", *flags, str(output)],
        capture_output=True,
        text=True,
        env=env,
        timeout=300,
        check=False,
    )
    assert done.returncode == 0, done.stderr[-2000:]
    copied, assumed = done.stdout.split("will be copied into the wheel.", 1)[1].split("will not be copied", 1)
    assert "cudart64_13.dll" not in copied and "cudart64_13.dll" in assumed, done.stdout
