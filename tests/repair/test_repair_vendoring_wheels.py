"""Issue 31: real PyPI wheels that vendor CUDA libraries, built by auditwheel and by hand, CUDA 10.2 to 12.2,
Linux and Windows. Each added requirement is resolved by pip itself for the wheel's platform and Python (the
resolution cached in the test cache: pip downloads a 700 MB cuDNN wheel to resolve it, as the index has no
separate metadata for it), and the wheel pip picks must ship the very file repair removed, at the path the
repair points the library at (checked in its central directory, fetched by HTTP range request).

* cumm-cu118 0.4.11 and spconv-cu118 2.3.6: auditwheel's copies named by their full version
  (libcudart-d0da41ae.so.11.8.89, whose SONAME is that same name) are CUDA 11's libcudart.so.11.0 and
  libnvrtc.so.11.2; NVRTC's builtins stay, with the reason; the repaired wheels, installed together from
  PyPI, load both from NVIDIA's wheels.
* cumm-cu102 0.2.8: CUDA 10.2's runtime: no NVIDIA wheel, kept with the reason, the output byte-identical.
* ctranslate2 4.0.0 (CUDA 12.2, cuDNN 8; Linux and Windows): nvidia-cudnn-cu12>=8,<9, not -cu11.
* ctranslate2 3.24.0 for Windows (CUDA 11.2, cudnn64_8.dll): nvidia-cudnn-cu11>=8,<9 (unbounded, pip picks
  9.x, which ships cudnn64_9.dll only).

The audit of each output, given the input's train (``--train``), keeps the input's verdict.
"""

from __future__ import annotations

import json
import subprocess
import sys
import textwrap
import zipfile
from pathlib import Path

import pytest
from packaging.requirements import Requirement

from cudaship.cli.main import main
from tests.fixtures import built_once, cache_dir, content_key
from tests.fixtures.wheels import RealWheel, fetch_head
from tests.repair.helpers import dynamic, members, record_matches, requires_dist

pytestmark = [pytest.mark.slow, pytest.mark.network]

#: what pip is told (--platform) and what marks that platform's files, per wheel OS
PLATFORMS = {"linux": ("manylinux2014_x86_64", "x86_64"), "windows": ("win_amd64", "win_amd64")}
MARKER_ENV = {"linux": {"sys_platform": "linux"}, "windows": {"sys_platform": "win32"}}


def _repair(wheel: Path, out: Path, capsys: pytest.CaptureFixture[str]) -> dict[str, object]:
    assert main(["repair", str(wheel), "-w", str(out), "-f", "json"]) == 0
    (result,) = json.loads(capsys.readouterr().out)["wheels"]
    assert isinstance(result, dict)
    return result


def _resolved(requirement: str, os_name: str, python: str) -> tuple[str, str]:
    """(project, version) of the wheel pip installs for ``requirement`` on ``os_name`` (x86_64) for CPython
    ``python``: pip's own resolver (``install --dry-run --report --platform ... --no-deps``), its answer
    cached. The requirement's marker must hold there (pip would evaluate it for this machine instead)."""
    req = Requirement(requirement)
    assert req.marker is not None and req.marker.evaluate(MARKER_ENV[os_name]), requirement
    req.marker = None
    platform = PLATFORMS[os_name][0]

    def resolve(work: Path) -> None:
        command = [
            sys.executable,
            "-m",
            "pip",
            "install",
            "--dry-run",
            "--ignore-installed",
            "--no-deps",
            "--only-binary=:all:",
            "--no-cache-dir",
            "--disable-pip-version-check",
            "--quiet",
            "--platform",
            platform,
            "--python-version",
            python,
            "--target",
            str(work / "target"),
            "--report",
            str(work / "report.json"),
            str(req),
        ]
        done = subprocess.run(command, capture_output=True, text=True, timeout=1800, check=False)
        if done.returncode != 0:
            pytest.skip(f"pip cannot resolve {req} for {platform}: {done.stderr.strip()[-300:]}")
        (install,) = json.loads((work / "report.json").read_text())["install"]
        (work / "resolved.json").write_text(json.dumps(install["metadata"]))

    key = content_key(str(req), platform, python)
    found = built_once(cache_dir() / "pip-resolutions" / f"{req.name}-{key}", resolve)
    metadata = json.loads((found / "resolved.json").read_text())
    return metadata["name"], metadata["version"]


def _ships(requirement: str, path: str, os_name: str, python: str) -> None:
    """The wheel pip installs for ``requirement`` holds ``path`` (site-packages relative)."""
    project, version = _resolved(requirement, os_name, python)
    head = fetch_head(RealWheel(project, version, PLATFORMS[os_name][1], python=python))
    with zipfile.ZipFile(head) as zf:
        assert path in zf.namelist(), f"{requirement}: pip installs {head.name}, which holds no {path}"


def _plan(result: dict[str, object]) -> dict[str, list[dict[str, str]]]:
    plan = result["plan"]
    assert isinstance(plan, dict)
    return plan


def _same_verdict(wheel: Path, output: Path, train: str, capsys: pytest.CaptureFixture[str]) -> None:
    """The audit of the output, with the input's train, exits as the input's does (here: 0); and without
    ``--train`` it infers the input's train (a requirement of another CUDA major made it infer that one)."""
    before = main(["audit", "--train", train, str(wheel)])
    after = main(["audit", "--train", train, str(output)])
    text = capsys.readouterr().out
    assert (before, after) == (0, 0), text
    trains = []
    for path in (wheel, output):
        main(["audit", "-f", "json", str(path)])
        (audited,) = json.loads(capsys.readouterr().out)["wheels"]
        trains.append((audited["train"], audited["train_source"]))
    assert trains[0][0] == trains[1][0] == train, trains


def _requirements_ship_what_was_removed(result: dict[str, object], os_name: str, python: str) -> list[str]:
    plan = _plan(result)
    directories = {r["library"]: r["directory"] for r in plan["removed"]}
    texts = []
    for added in plan["requirements"]:
        for library in added["libraries"]:
            _ships(added["text"], f"{directories[library]}/{library}", os_name, python)
        texts.append(added["text"])
    return texts


def test_cumm_and_spconv_cu118_copies_named_by_their_full_version(
    cumm118_vendoring_wheel: Path,
    spconv118_vendoring_wheel: Path,
    tmp_path: Path,
    capsys: pytest.CaptureFixture[str],
) -> None:
    result = _repair(cumm118_vendoring_wheel, tmp_path / "out", capsys)
    plan = _plan(result)
    assert {(r["member"].rsplit("/", 1)[1], r["library"]) for r in plan["removed"]} == {
        ("libcudart-d0da41ae.so.11.8.89", "libcudart.so.11.0"),
        ("libnvrtc-672ee683.so.11.8.89", "libnvrtc.so.11.2"),
    }
    (kept,) = plan["kept"]
    assert kept["member"].endswith("libnvrtc-builtins-2dc4bf68.so.11.8.89")
    assert kept["reason"].startswith("NVRTC's builtins")
    texts = _requirements_ship_what_was_removed(result, "linux", "3.11")
    assert texts == [
        'nvidia-cuda-nvrtc-cu11>=11.8,<12; sys_platform == "linux"',
        'nvidia-cuda-runtime-cu11>=11.8,<12; sys_platform == "linux"',
    ]
    output = Path(str(result["output"]))
    files = members(output)
    assert record_matches(files) == [] and set(texts) <= set(requires_dist(files))
    core = next(v for n, v in files.items() if n.startswith("cumm/core_cc"))
    needed = dynamic(core)["needed"]
    assert "libcudart.so.11.0" in needed and "libnvrtc.so.11.2" in needed
    assert output.stat().st_size < cumm118_vendoring_wheel.stat().st_size
    _same_verdict(cumm118_vendoring_wheel, output, "11.8", capsys)
    spconv = _repair(spconv118_vendoring_wheel, tmp_path / "out", capsys)
    assert [r["library"] for r in _plan(spconv)["removed"]] == ["libcudart.so.11.0"]
    assert _requirements_ship_what_was_removed(spconv, "linux", "3.11") == [texts[1]]
    spconv_output = Path(str(spconv["output"]))
    assert spconv_output.stat().st_size < spconv118_vendoring_wheel.stat().st_size
    _same_verdict(spconv118_vendoring_wheel, spconv_output, "11.8", capsys)
    _installs_and_loads([output, spconv_output], tmp_path)


def _installs_and_loads(outputs: list[Path], tmp_path: Path) -> None:
    """pip installs the repaired cumm-cu118 and spconv-cu118 with their requirements from PyPI into a fresh
    venv; the extension of each loads, with libcudart and libnvrtc mapped from NVIDIA's wheels."""
    venv = tmp_path / "venv"
    subprocess.run([sys.executable, "-m", "venv", str(venv)], check=True, timeout=300)
    python = venv / "bin" / "python"
    pip = subprocess.run(
        [str(python), "-m", "pip", "install", "-q", "--disable-pip-version-check", *map(str, outputs)],
        capture_output=True,
        text=True,
        timeout=900,
        check=False,
    )
    assert pip.returncode == 0, pip.stderr[-2000:]
    probe = textwrap.dedent(
        """
        import ctypes, json, os, sysconfig
        from importlib import metadata
        site = sysconfig.get_paths()["platlib"]
        for dist in ("cumm-cu118", "spconv-cu118"):
            for f in metadata.distribution(dist).files:
                if f.name.startswith("core_cc") and ".so" in f.name:
                    ctypes.CDLL(os.path.join(site, str(f)), mode=os.RTLD_LAZY)
        cuda = ("libcudart", "libnvrtc.so")
        maps = sorted({l.split()[-1] for l in open("/proc/self/maps") if any(c in l for c in cuda)})
        print(json.dumps({"maps": maps, "site": site}))
        """
    )
    done = subprocess.run(
        [str(python), "-c", probe], capture_output=True, text=True, timeout=300, check=False
    )
    assert done.returncode == 0, done.stderr[-2000:]
    facts = json.loads(done.stdout)
    site = facts["site"]
    assert facts["maps"] == [
        f"{site}/nvidia/cuda_nvrtc/lib/libnvrtc.so.11.2",
        f"{site}/nvidia/cuda_runtime/lib/libcudart.so.11.0",
    ]


def test_cumm_cu102_keeps_cuda_10_and_says_why(
    cumm102_vendoring_wheel: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    result = _repair(cumm102_vendoring_wheel, tmp_path, capsys)
    plan = _plan(result)
    assert plan["removed"] == [] and plan["requirements"] == []
    (kept,) = plan["kept"]
    assert kept["member"] == "cumm_cu102.libs/libcudart-80664282.so.10.2.89"
    assert "CUDA 10" in kept["reason"]
    output = tmp_path / cumm102_vendoring_wheel.name
    assert output.read_bytes() == cumm102_vendoring_wheel.read_bytes()


def test_ctranslate2_cuda12_cudnn8_linux(
    ctranslate2_cuda12_vendoring_wheel: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    result = _repair(ctranslate2_cuda12_vendoring_wheel, tmp_path, capsys)
    (added,) = _plan(result)["requirements"]
    assert added["text"] == 'nvidia-cudnn-cu12>=8,<9; sys_platform == "linux"'
    output = Path(str(result["output"]))
    assert output.stat().st_size < ctranslate2_cuda12_vendoring_wheel.stat().st_size
    # and without --train, the output's audit reads CUDA 12.2 (a -cu11 requirement made it 11.0)
    _same_verdict(ctranslate2_cuda12_vendoring_wheel, output, "12.2", capsys)


@pytest.mark.parametrize(
    ("fixture", "train", "text"),
    [
        ("ctranslate2_cuda12_windows_wheel", "12.2", 'nvidia-cudnn-cu12>=8,<9; sys_platform == "win32"'),
        ("ctranslate2_cuda11_windows_wheel", "11.2", 'nvidia-cudnn-cu11>=8,<9; sys_platform == "win32"'),
    ],
)
def test_ctranslate2_windows_requirement_installs_cudnn64_8(
    fixture: str,
    train: str,
    text: str,
    request: pytest.FixtureRequest,
    tmp_path: Path,
    capsys: pytest.CaptureFixture[str],
) -> None:
    wheel: Path = request.getfixturevalue(fixture)
    result = _repair(wheel, tmp_path, capsys)
    plan = _plan(result)
    assert [r["member"] for r in plan["removed"]] == ["ctranslate2/cudnn64_8.dll"]
    # pip, resolving for win_amd64, installs a wheel holding nvidia/cudnn/bin/cudnn64_8.dll
    assert _requirements_ship_what_was_removed(result, "windows", "3.11") == [text]
    output = Path(str(result["output"]))
    assert output.stat().st_size < wheel.stat().st_size
    _same_verdict(wheel, output, train, capsys)


def _with_wrong_record_hash(wheel: Path, target: Path, member_suffix: str) -> str:
    """``wheel`` rewritten to ``target`` with RECORD's hash of the member ending in ``member_suffix`` wrong,
    as torch 1.10-1.12 were published (METADATA's hash disagrees); every member's bytes kept. The member."""
    with zipfile.ZipFile(wheel) as zf:
        infos = zf.infolist()
        data = {i.filename: zf.read(i) for i in infos}
    record = next(n for n in data if n.endswith(".dist-info/RECORD"))
    member = next(n for n in data if n.endswith(member_suffix))
    rows = data[record].decode().splitlines()
    wrong = "sha256=" + "A" * 43
    data[record] = (
        "\n".join(
            f"{member},{wrong},{row.rsplit(',', 1)[1]}" if row.startswith(member + ",") else row
            for row in rows
        ).encode()
        + b"\n"
    )
    with zipfile.ZipFile(target, "w", zipfile.ZIP_DEFLATED) as out:
        for info in infos:
            out.writestr(info, data[info.filename])
    return member


def test_fix_record_repairs_a_wheel_whose_record_is_wrong(
    cumm118_vendoring_wheel: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    broken = tmp_path / "in" / cumm118_vendoring_wheel.name
    broken.parent.mkdir()
    member = _with_wrong_record_hash(cumm118_vendoring_wheel, broken, ".dist-info/METADATA")
    # without --fix-record: refused, one line naming the wheel and the way out, nothing written
    assert main(["repair", str(broken), "-w", str(tmp_path / "refused")]) == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and str(broken) in err[0] and "--fix-record" in err[0]
    assert not (tmp_path / "refused" / broken.name).exists()
    # with it: the CUDA repair as for the published wheel, RECORD written from the members, the row named
    out = tmp_path / "out"
    assert main(["repair", "--fix-record", str(broken), "-w", str(out), "-f", "json"]) == 0
    (result,) = json.loads(capsys.readouterr().out)["wheels"]
    plan = _plan(result)
    assert [(f["member"], f["kind"]) for f in plan["record_fixes"]] == [(member, "hash")]
    assert len(plan["removed"]) == 2
    files = members(out / broken.name)
    assert record_matches(files) == []
    assert main(["repair", str(broken), "--fix-record", "--dry-run"]) == 0
    assert f"RECORD     {member}: " in capsys.readouterr().out
