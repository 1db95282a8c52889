"""The acceptance test of issue 22: a CUDA extension wheel built with nvcc and setuptools, repaired by
auditwheel (which vendors libcudart), then by ``cudaship repair``; installed in a fresh venv with its new
requirements from PyPI, every library loaded, and audited."""

from __future__ import annotations

import hashlib
import json
import shlex
import subprocess
import sys
import textwrap
from pathlib import Path

import jsonschema
import pytest

from cudaship.cli.main import main
from cudaship.knowledge.libraries import is_cuda_library
from cudaship.knowledge.repair import unhashed
from tests.fixtures.repair_wheels import auditwheel_with
from tests.repair.helpers import dynamic, members, record_matches, requires_dist

pytestmark = pytest.mark.slow

EXT = f"cudemo/_ext{__import__('sysconfig').get_config_var('EXT_SUFFIX')}"
REQUIREMENT = 'cuda-toolkit[cudart]>=13.0,<14; sys_platform == "linux"'


def _sha(path: Path) -> str:
    return hashlib.sha256(path.read_bytes()).hexdigest()


SCHEMA = json.loads(
    (Path(__file__).resolve().parents[2] / "src/cudaship/render/schemas/repair.schema.json").read_text()
)


def _repair(wheel: Path, out: Path, capsys: pytest.CaptureFixture[str]) -> tuple[Path, dict[str, object]]:
    code = main(["repair", str(wheel), "-w", str(out), "-f", "json"])
    captured = capsys.readouterr()
    assert code == 0, captured.err
    doc = json.loads(captured.out)
    jsonschema.validate(doc, SCHEMA)
    (result,) = doc["wheels"]
    # read back before it was placed: every claim of the report held (issue 30)
    assert result["verification"]["failed"] == [] and result["verification"]["checked"] > 0
    return Path(result["output"]), result


def test_auditwheel_vendors_cudart(auditwheel_vendored: Path) -> None:
    files = members(auditwheel_vendored)
    vendored = [n for n in files if n.startswith("cudemo.libs/libcudart-")]
    assert len(vendored) == 1, sorted(files)
    assert dynamic(files[vendored[0]])["soname"] == [vendored[0].split("/")[-1]]
    assert dynamic(files[EXT])["needed"][0] == vendored[0].split("/")[-1]


def test_repair_devendors_cudart(
    auditwheel_vendored: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    before = _sha(auditwheel_vendored)
    output, result = _repair(auditwheel_vendored, tmp_path / "out", capsys)
    assert _sha(auditwheel_vendored) == before, "the input changed"
    assert output.name == auditwheel_vendored.name
    plan = result["plan"]
    assert isinstance(plan, dict)
    (removed,) = plan["removed"]
    assert removed["library"] == "libcudart.so.13"
    assert removed["project"] == "nvidia-cuda-runtime"
    assert [r["text"] for r in plan["requirements"]] == [REQUIREMENT]

    files = members(output)
    assert not [n for n in files if n.startswith("cudemo.libs/")], sorted(files)
    dyn = dynamic(files[EXT])
    assert "libcudart.so.13" in dyn["needed"]
    assert not [n for n in dyn["needed"] if "-" in n and n.startswith("libcudart")]
    # auditwheel wrote DT_RPATH (it also serves what the extension loads); repair keeps the kind
    assert dyn["rpath"] == ["$ORIGIN/../nvidia/cu13/lib"]
    assert dyn["runpath"] == []
    assert REQUIREMENT in requires_dist(files)
    assert record_matches(files) == []
    size = result["size"]
    assert isinstance(size, dict)
    assert size["after"] == output.stat().st_size < size["before"] // 10


def test_repair_is_deterministic_and_idempotent(
    auditwheel_vendored: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    first, _ = _repair(auditwheel_vendored, tmp_path / "a", capsys)
    second, _ = _repair(auditwheel_vendored, tmp_path / "b", capsys)
    assert first.read_bytes() == second.read_bytes()
    again, result = _repair(first, tmp_path / "c", capsys)
    plan = result["plan"]
    assert isinstance(plan, dict)
    assert plan["changed"] is False
    assert again.read_bytes() == first.read_bytes()


def test_dry_run_writes_nothing(
    auditwheel_vendored: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    out = tmp_path / "out"
    assert main(["repair", str(auditwheel_vendored), "--dry-run", "-w", str(out)]) == 0
    text = capsys.readouterr().out
    assert "removed    cudemo.libs/libcudart-" in text
    assert "dry run: nothing written" in text
    assert not out.exists()


def test_print_excludes_keeps_auditwheel_from_vendoring_cuda(
    cuda_ext_wheel: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    assert main(["repair", "--print-excludes", "auditwheel", str(cuda_ext_wheel)]) == 0
    flags = tuple(shlex.split(capsys.readouterr().out))
    at = flags.index("libcudart.so.13")
    assert flags[at - 1] == "--exclude"
    excluded = auditwheel_with(cuda_ext_wheel, flags)
    files = members(excluded)
    cuda = [n for n in files if is_cuda_library(unhashed(n.rsplit("/", 1)[-1], "linux"))]
    assert cuda == [], cuda
    assert dynamic(files[EXT])["needed"][0] == "libcudart.so.13"
    # then cudaship repair adds what auditwheel left out: the RUNPATH and the requirement
    output, result = _repair(excluded, tmp_path / "out", capsys)
    plan = result["plan"]
    assert isinstance(plan, dict)
    assert plan["removed"] == []
    assert [r["text"] for r in plan["requirements"]] == [REQUIREMENT]
    assert dynamic(members(output)[EXT])["runpath"] == ["$ORIGIN/../nvidia/cu13/lib"]


@pytest.mark.network
def test_repaired_wheel_installs_loads_and_audits(
    auditwheel_vendored: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    output, _ = _repair(auditwheel_vendored, tmp_path / "out", capsys)
    venv = tmp_path / "venv"
    subprocess.run([sys.executable, "-m", "venv", str(venv)], check=True, timeout=300)
    python = venv / "bin" / "python"
    pip = subprocess.run(
        [str(python), "-m", "pip", "install", "-q", "--disable-pip-version-check", str(output)],
        capture_output=True,
        text=True,
        timeout=600,
        check=False,
    )
    assert pip.returncode == 0, pip.stderr[-2000:]
    probe = textwrap.dedent(
        """
        import ctypes, json, os, pathlib, sys, sysconfig
        site = pathlib.Path(sysconfig.get_paths()["platlib"])
        loaded = []
        for lib in sorted((site / "cudemo").rglob("*.so*")):
            ctypes.CDLL(str(lib), mode=os.RTLD_LAZY)
            loaded.append(str(lib.relative_to(site)))
        import cudemo
        maps = [l.split()[-1] for l in open("/proc/self/maps") if "libcudart" in l]
        print(json.dumps({"loaded": loaded, "cudart": sorted(set(maps)), "site": str(site),
                          "devices": cudemo.devices()}))
        """
    )
    done = subprocess.run(
        [str(python), "-c", probe], capture_output=True, text=True, timeout=120, check=False
    )
    assert done.returncode == 0, done.stderr[-2000:]
    facts = json.loads(done.stdout)
    assert facts["loaded"] == [EXT]
    assert facts["cudart"] == [f"{facts['site']}/nvidia/cu13/lib/libcudart.so.13"]
    assert main(["audit", "--online", str(output)]) == 0, capsys.readouterr().out


def test_unused_cuda_needed_is_dropped_only_when_asked(
    unused_cudart_wheel: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    helper = "cudemo/libhelper.so"
    assert "libcudart.so.13" in dynamic(members(unused_cudart_wheel)[helper])["needed"]
    # by default it stays, and gets the RUNPATH that finds it
    kept, _ = _repair(unused_cudart_wheel, tmp_path / "kept", capsys)
    assert "libcudart.so.13" in dynamic(members(kept)[helper])["needed"]
    assert dynamic(members(kept)[helper])["runpath"] == ["$ORIGIN/../nvidia/cu13/lib"]
    argv = ["repair", str(unused_cudart_wheel), "-w", str(tmp_path / "dropped"), "-f", "json"]
    assert main([*argv, "--drop-unused-cuda"]) == 0
    doc = json.loads(capsys.readouterr().out)
    jsonschema.validate(doc, SCHEMA)
    (result,) = doc["wheels"]
    edits = {e["member"]: e for e in result["plan"]["edits"]}
    assert edits[helper]["remove_needed"] == ["libcudart.so.13"]
    assert edits[EXT]["remove_needed"] == []  # the extension uses the runtime
    assert [r["text"] for r in result["plan"]["requirements"]] == [REQUIREMENT]
    files = members(Path(result["output"]))
    assert "libcudart.so.13" not in dynamic(files[helper])["needed"]
    assert dynamic(files[helper])["runpath"] == []
    assert "libcudart.so.13" in dynamic(files[EXT])["needed"]
