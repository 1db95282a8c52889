"""Real PyPI wheels that vendor CUDA libraries (auditwheel's hashed copies), repaired: what goes, what the
libraries name afterwards, the requirements, and (network) the repaired cumm and spconv installed together
from PyPI, every library loaded with the CUDA runtime and NVRTC from NVIDIA's wheels; each audits clean."""

from __future__ import annotations

import json
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest

from cudaship.cli.main import main
from cudaship.knowledge.repair import unhashed
from tests.repair.helpers import dynamic, members, record_matches, requires_dist

pytestmark = [pytest.mark.slow, pytest.mark.network]


def _repair(wheel: Path, out: Path, capsys: pytest.CaptureFixture[str]) -> tuple[Path, dict[str, object]]:
    assert main(["repair", str(wheel), "-w", str(out), "-f", "json"]) == 0
    (result,) = json.loads(capsys.readouterr().out)["wheels"]
    # read back before it was placed: every claim of the report held (issue 30)
    assert result["verification"]["failed"] == [] and result["verification"]["checked"] > 0
    return Path(result["output"]), result


def _is(name: str, library: str) -> bool:
    """``name`` (a copy's, maybe hashed and with its full version) is ``library``."""
    plain = unhashed(name, "linux")
    return plain == library or plain.startswith(library + ".")


def _check(output: Path, removed: list[str], requires: list[str], capsys: pytest.CaptureFixture[str]) -> None:
    files = members(output)
    assert record_matches(files) == []
    for name in removed:
        assert not [n for n in files if _is(n.rsplit("/", 1)[-1], name)], name
    assert set(requires) <= set(requires_dist(files))
    for name, data in files.items():
        if ".so" in name and data[:4] == b"\x7fELF":
            for needed in dynamic(data)["needed"]:
                assert not any(_is(needed, r) and needed != r for r in removed), (name, needed)
    code = main(["audit", "--online", str(output)])
    assert code == 0, capsys.readouterr().out


def test_ctranslate2_cudnn8(
    ctranslate2_vendoring_wheel: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    output, _ = _repair(ctranslate2_vendoring_wheel, tmp_path, capsys)
    _check(output, ["libcudnn.so.8"], ['nvidia-cudnn-cu11>=8,<9; sys_platform == "linux"'], capsys)
    lib = next(v for n, v in members(output).items() if "/libctranslate2-" in n)
    # it had no search path and found libgomp through the extension's DT_RPATH: now it names its directory
    assert dynamic(lib)["runpath"] == ["$ORIGIN", "$ORIGIN/../nvidia/cudnn/lib"]


def test_cumm_and_spconv_install_and_load(
    cumm_vendoring_wheel: Path,
    spconv_vendoring_wheel: Path,
    tmp_path: Path,
    capsys: pytest.CaptureFixture[str],
) -> None:
    cumm, _ = _repair(cumm_vendoring_wheel, tmp_path / "out", capsys)
    spconv, result = _repair(spconv_vendoring_wheel, tmp_path / "out", capsys)
    size = result["size"]
    assert isinstance(size, dict) and size["after"] < size["before"]
    runtime = 'nvidia-cuda-runtime-cu12>=12.0,<13; sys_platform == "linux"'
    _check(
        cumm,
        ["libcudart.so.12", "libnvrtc.so.12"],
        [runtime, 'nvidia-cuda-nvrtc-cu12>=12.0,<13; sys_platform == "linux"'],
        capsys,
    )
    _check(spconv, ["libcudart.so.12"], [runtime], capsys)
    venv = tmp_path / "venv"
    subprocess.run([sys.executable, "-m", "venv", str(venv)], check=True, timeout=300)
    python = venv / "bin" / "python"
    pip = subprocess.run(
        [str(python), "-m", "pip", "install", "-q", "--disable-pip-version-check", str(cumm), str(spconv)],
        capture_output=True,
        text=True,
        timeout=900,
        check=False,
    )
    assert pip.returncode == 0, pip.stderr[-2000:]
    probe = textwrap.dedent(
        """
        import ctypes, importlib, json, os, sysconfig
        from importlib import metadata
        site = sysconfig.get_paths()["platlib"]
        loaded = []
        for dist in ("cumm-cu120", "spconv-cu120"):
            for f in metadata.distribution(dist).files:
                if ".so" in f.name:
                    ctypes.CDLL(os.path.join(site, str(f)), mode=os.RTLD_LAZY)
                    loaded.append(str(f))
        import cumm, spconv
        maps = {l.split()[-1] for l in open("/proc/self/maps") if "libcudart" in l or "libnvrtc.so" in l}
        maps = sorted(maps)
        print(json.dumps({"loaded": loaded, "maps": maps, "site": site}))
        """
    )
    done = subprocess.run(
        [str(python), "-c", probe], capture_output=True, text=True, timeout=300, check=False
    )
    assert done.returncode == 0, done.stderr[-2000:]
    facts = json.loads(done.stdout)
    assert len(facts["loaded"]) >= 3
    site = facts["site"]
    assert facts["maps"] == [
        f"{site}/nvidia/cuda_nvrtc/lib/libnvrtc.so.12",
        f"{site}/nvidia/cuda_runtime/lib/libcudart.so.12",
    ]
